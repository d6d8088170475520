//! The one bounded cache type sluice has: a map that keeps its entries within a budget of cost
//! (bytes, or 1 an entry to bound by entries) and evicts the least recently used past it.
//!
//! It lives here, in the lowest crate every cache's owner depends on (the server's catalogue,
//! per-client limits and log throttle, the store's slice and metadata caches, the RTSP sample
//! cache), so they share one eviction policy and one set of counters. Entries may belong to a
//! class with a cap of its own within the budget, so that a few costly entries cannot push out
//! thousands of cheap ones. It does not lock, load or time anything: its owner wraps it in the
//! lock it needs, decides what a miss fetches, and acts on what [`Lru::insert`] evicted (a file to
//! unlink, a buffer to reuse).

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// What a cache has done since it was made: the hooks its owner publishes as metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LruCounts {
    /// [`Lru::get`] calls that found their key.
    pub hits: u64,
    /// [`Lru::get`] calls that did not.
    pub misses: u64,
    /// Entries evicted to stay within the budget or a class's cap.
    pub evictions: u64,
}

/// One class: the most cost it may hold, the cost it holds, and its keys by last use, oldest
/// first.
#[derive(Debug)]
struct Class<K> {
    cap: u64,
    held: u64,
    order: BTreeMap<u64, K>,
}

/// A cached value with its cost, last use (a tick) and class.
#[derive(Debug)]
struct Entry<V> {
    value: V,
    cost: u64,
    used: u64,
    class: usize,
}

/// See the module docs.
#[derive(Debug)]
pub struct Lru<K, V> {
    budget: u64,
    held: u64,
    tick: u64,
    entries: HashMap<K, Entry<V>>,
    classes: Vec<Class<K>>,
    counts: LruCounts,
}

impl<K: Clone + Eq + Hash, V> Lru<K, V> {
    /// A cache holding at most `budget` of cost, in one class.
    pub fn new(budget: u64) -> Lru<K, V> {
        Lru::with_classes(budget, &[budget])
    }

    /// A cache holding at most `budget` of cost, with one class per cap in `caps` (each capped
    /// at the budget too); [`Lru::insert_in`] names the class.
    pub fn with_classes(budget: u64, caps: &[u64]) -> Lru<K, V> {
        Lru {
            budget,
            held: 0,
            tick: 0,
            entries: HashMap::new(),
            classes: caps
                .iter()
                .map(|&cap| Class { cap: cap.min(budget), held: 0, order: BTreeMap::new() })
                .collect(),
            counts: LruCounts::default(),
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Cost held (bytes, or entries when every cost is 1).
    pub fn held(&self) -> u64 {
        self.held
    }

    /// What the cache has done so far.
    pub fn counts(&self) -> LruCounts {
        self.counts
    }

    /// The value of `key`, now the most recently used; counted as a hit or a miss.
    pub fn get<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.tick += 1;
        let tick = self.tick;
        let Some((owned, entry)) = self.entries.get_key_value(key) else {
            self.counts.misses += 1;
            return None;
        };
        self.counts.hits += 1;
        let (owned, class, used) = (owned.clone(), entry.class, entry.used);
        let order = &mut self.classes[class].order;
        order.remove(&used);
        order.insert(tick, owned);
        let entry = self.entries.get_mut(key)?;
        entry.used = tick;
        Some(&mut entry.value)
    }

    /// The value of `key` and its cost, without using it (its place in line and the counts stay).
    pub fn peek<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> Option<(&V, u64)>
    where
        K: Borrow<Q>,
    {
        self.entries.get(key).map(|e| (&e.value, e.cost))
    }

    /// Whether `key` is held.
    pub fn contains_key<Q: Hash + Eq + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.entries.contains_key(key)
    }

    /// Every key held, in no particular order.
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.keys()
    }

    /// Inserts `value` costing `cost` in the first class; see [`Lru::insert_in`].
    pub fn insert(&mut self, key: K, value: V, cost: u64) -> Vec<(K, V)> {
        self.insert_in(0, key, value, cost)
    }

    /// Inserts `value` costing `cost` in `class` (replacing what `key` held), evicting the least
    /// recently used entries of its class beyond the class's cap, then of any class beyond the
    /// budget; returns what it evicted, oldest first. A value costing more than its class's cap
    /// is not kept (and not counted as an eviction): it comes back as the last entry returned.
    pub fn insert_in(&mut self, class: usize, key: K, value: V, cost: u64) -> Vec<(K, V)> {
        self.remove(&key);
        let mut evicted = Vec::new();
        if cost > self.classes[class].cap {
            evicted.push((key, value));
            return evicted;
        }
        while self.classes[class].held + cost > self.classes[class].cap {
            evicted.extend(self.evict_oldest_of(class));
        }
        while self.held + cost > self.budget {
            // The least recently used entry of any class.
            let oldest = (0..self.classes.len())
                .filter_map(|c| Some((*self.classes[c].order.first_key_value()?.0, c)))
                .min();
            match oldest {
                Some((_, c)) => evicted.extend(self.evict_oldest_of(c)),
                None => break,
            }
        }
        self.counts.evictions += evicted.len() as u64;
        self.tick += 1;
        let class_of = &mut self.classes[class];
        class_of.order.insert(self.tick, key.clone());
        class_of.held += cost;
        self.held += cost;
        self.entries.insert(key, Entry { value, cost, used: self.tick, class });
        evicted
    }

    fn evict_oldest_of(&mut self, class: usize) -> Option<(K, V)> {
        let oldest = self.classes[class].order.first_key_value()?.1.clone();
        let value = self.remove(&oldest)?;
        Some((oldest, value))
    }

    /// Takes `key` out (not counted as an eviction).
    pub fn remove<Q: Hash + Eq + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let entry = self.entries.remove(key)?;
        let class = &mut self.classes[entry.class];
        class.order.remove(&entry.used);
        class.held -= entry.cost;
        self.held -= entry.cost;
        Some(entry.value)
    }

    /// Takes out every entry `doomed` picks (not counted as evictions); returns them.
    pub fn remove_where(&mut self, mut doomed: impl FnMut(&K, &V) -> bool) -> Vec<(K, V)> {
        let keys: Vec<K> =
            self.entries.iter().filter(|(k, e)| doomed(k, &e.value)).map(|(k, _)| k.clone()).collect();
        keys.into_iter().filter_map(|k| self.remove(&k).map(|v| (k, v))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_of(evicted: Vec<(&'static str, u32)>) -> Vec<&'static str> {
        evicted.into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn stays_within_its_budget_and_evicts_the_least_recently_used() {
        let mut lru: Lru<&str, u32> = Lru::new(100);
        assert!(lru.insert("a", 1, 40).is_empty());
        assert!(lru.insert("b", 2, 40).is_empty());
        assert_eq!(lru.get(&"a").copied(), Some(1), "a is now the most recently used");
        assert_eq!(keys_of(lru.insert("c", 3, 40)), ["b"], "b was the least recently used");
        assert_eq!(lru.get(&"b"), None);
        assert_eq!((lru.get(&"a").copied(), lru.get(&"c").copied()), (Some(1), Some(3)));
        assert_eq!(lru.held(), 80);
        assert_eq!(keys_of(lru.insert("huge", 9, 101)), ["huge"], "larger than the budget: not kept");
        assert!(!lru.contains_key(&"huge"));
        assert_eq!(keys_of(lru.insert("d", 4, 100)), ["a", "c"], "everything else goes, oldest first");
        assert_eq!((lru.len(), lru.held()), (1, 100));
        assert!(lru.insert("d", 5, 10).is_empty(), "replaced, not evicted");
        assert_eq!((lru.len(), lru.held(), lru.peek(&"d")), (1, 10, Some((&5, 10))));
        assert_eq!(lru.counts(), LruCounts { hits: 3, misses: 1, evictions: 3 });
    }

    #[test]
    fn by_entries_when_every_cost_is_one() {
        let mut lru: Lru<u32, ()> = Lru::new(3);
        for k in 0..10 {
            lru.insert(k, (), 1);
            lru.get(&0);
        }
        assert_eq!(lru.len(), 3);
        assert!(lru.contains_key(&0), "kept by being used");
        assert!(lru.contains_key(&9) && lru.contains_key(&8));
        assert_eq!(lru.counts().evictions, 7);
    }

    #[test]
    fn large_entries_take_no_more_than_their_class_allows() {
        // Class 0 (say, sample tables) may hold 50 of 100; class 1 (descriptions) all of it.
        let mut lru: Lru<&str, u32> = Lru::with_classes(100, &[50, 100]);
        for small in ["s1", "s2", "s3", "s4"] {
            lru.insert_in(1, small, 0, 10);
        }
        assert!(lru.insert_in(0, "t1", 0, 30).is_empty());
        assert_eq!(keys_of(lru.insert_in(0, "t2", 0, 30)), ["t1"], "the class is full, not the budget");
        assert_eq!(lru.len(), 5, "every small entry stays");
        assert_eq!(keys_of(lru.insert_in(0, "t3", 0, 51)), ["t3"], "larger than its class: not kept");
        // Past the whole budget, the least recently used of any class goes.
        for small in ["s5", "s6", "s7"] {
            lru.insert_in(1, small, 0, 10);
        }
        assert_eq!(lru.held(), 100);
        assert_eq!(lru.get(&"s1").copied(), Some(0));
        assert_eq!(keys_of(lru.insert_in(1, "s8", 0, 10)), ["s2"], "s2 was the least recently used");
        assert_eq!(lru.get(&"t2").copied(), Some(0));
    }

    #[test]
    fn removing_is_not_evicting() {
        let mut lru: Lru<u32, u32> = Lru::new(10);
        for k in 0..5 {
            lru.insert(k, k * 10, 2);
        }
        assert_eq!(lru.remove(&1), Some(10));
        let mut gone = lru.remove_where(|k, _| k % 2 == 0);
        gone.sort();
        assert_eq!(gone, [(0, 0), (2, 20), (4, 40)]);
        assert_eq!((lru.len(), lru.held(), lru.counts().evictions), (1, 2, 0));
    }
}
