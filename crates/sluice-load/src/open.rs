//! The open model on one worker: users arrive on the schedule from `schedule` whatever the server
//! does, wait for a connection from the worker's share of the pool, and are timed from their
//! scheduled arrival, so a stalled server shows up as latency instead of as fewer requests
//! (coordinated omission corrected). An arrival that cannot be sent by its deadline, or that finds
//! the waiting line full, is counted as dropped. The connection slots are spawned lazily up to the
//! pool cap; with one-connection-per-request each slot reconnects for every request.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::Connection;
use crate::schedule::{Arrivals, Scenario};
use crate::stats::{Outcome, RequestRecord};
use crate::target::WeightedPicker;
use crate::timer::PreciseTimer;
use crate::worker::WorkerCtx;

/// This worker's share of an open run.
pub(crate) struct OpenShare {
    pub scenarios: Vec<Scenario>,
    /// Index of each scenario's first target in the run's target list.
    pub first_target: Vec<usize>,
    /// Connections this worker may hold.
    pub max_connections: usize,
    /// Arrivals allowed to wait for a connection at once.
    pub max_pending: usize,
    /// Only arrivals with a global index below this are sent.
    pub requests: Option<u64>,
}

/// An arrival waiting for a connection.
struct Waiting {
    scheduled: Instant,
    target: usize,
}

/// The worker's waiting line and pool bookkeeping.
struct Pool {
    line: RefCell<VecDeque<Waiting>>,
    wake: Notify,
    idle: Cell<usize>,
    slots: Cell<usize>,
    done: Cell<bool>,
    handles: RefCell<Vec<JoinHandle<()>>>,
}

pub(crate) async fn run_open(ctx: Rc<WorkerCtx>, share: OpenShare) {
    let pool = Rc::new(Pool {
        line: RefCell::new(VecDeque::new()),
        wake: Notify::new(),
        idle: Cell::new(0),
        slots: Cell::new(0),
        done: Cell::new(false),
        handles: RefCell::new(Vec::new()),
    });
    let mut pickers: Vec<WeightedPicker> =
        share.scenarios.iter().map(|s| WeightedPicker::new(s.targets.iter().map(|t| t.weight))).collect();
    let limit = share.requests.unwrap_or(u64::MAX);
    let timer = PreciseTimer::new();
    // Every worker walks the whole schedule and takes every `workers`-th arrival: the split is
    // exact and needs no coordination.
    let mine = Arrivals::new(&share.scenarios)
        .enumerate()
        .take_while(|(i, _)| (*i as u64) < limit)
        .filter(|(i, _)| i % ctx.workers == ctx.index)
        .map(|(_, a)| a);
    for arrival in mine {
        let scheduled = ctx.start + arrival.at;
        if scheduled > Instant::now() {
            timer.sleep_until(scheduled).await;
        }
        if ctx.stopped() {
            break;
        }
        let now = Instant::now();
        let target = share.first_target[arrival.scenario] + pickers[arrival.scenario].next_index();
        {
            let mut rec = ctx.recorder.borrow_mut();
            rec.arrival(now);
            rec.user_arrived(now);
            if pool.line.borrow().len() >= share.max_pending {
                rec.finish(now, &dropped(target, now, scheduled));
                rec.user_left(now);
                continue;
            }
        }
        pool.line.borrow_mut().push_back(Waiting { scheduled, target });
        if pool.line.borrow().len() > pool.idle.get() && pool.slots.get() < share.max_connections {
            pool.slots.set(pool.slots.get() + 1);
            let handle = tokio::task::spawn_local(slot(ctx.clone(), pool.clone()));
            pool.handles.borrow_mut().push(handle);
        }
        pool.wake.notify_one();
    }
    pool.done.set(true);
    pool.wake.notify_waiters();
    loop {
        let next = pool.handles.borrow_mut().pop();
        match next {
            Some(h) => {
                let _ = h.await;
            }
            None => break,
        }
    }
}

fn dropped(target: usize, now: Instant, scheduled: Instant) -> RequestRecord {
    RequestRecord {
        target,
        outcome: Outcome::Dropped,
        latency: now.saturating_duration_since(scheduled),
        connect: None,
        ttfb: None,
        download: None,
        status: None,
        bytes: 0,
    }
}

/// One connection of the pool: takes waiting arrivals in order until the schedule is over and the
/// line is empty.
async fn slot(ctx: Rc<WorkerCtx>, pool: Rc<Pool>) {
    let mut conn = Connection::new(ctx.connections, ctx.expected);
    loop {
        let next = pool.line.borrow_mut().pop_front();
        let Some(waiting) = next else {
            if pool.done.get() {
                break;
            }
            pool.idle.set(pool.idle.get() + 1);
            pool.wake.notified().await;
            pool.idle.set(pool.idle.get() - 1);
            continue;
        };
        let deadline = waiting.scheduled + ctx.timeout;
        let now = Instant::now();
        if now >= deadline {
            let mut rec = ctx.recorder.borrow_mut();
            rec.finish(now, &dropped(waiting.target, now, waiting.scheduled));
            rec.user_left(now);
            continue;
        }
        ctx.recorder.borrow_mut().sent(now);
        let mut record = conn.request(&ctx.targets[waiting.target], waiting.scheduled, deadline).await;
        record.target = waiting.target;
        let mut rec = ctx.recorder.borrow_mut();
        let now = Instant::now();
        rec.finish(now, &record);
        rec.user_left(now);
    }
    conn.close();
    pool.slots.set(pool.slots.get() - 1);
}

/// Splits `total` into `parts` shares differing by at most one (the first ones get the extra).
pub(crate) fn share_of(total: usize, parts: usize, index: usize) -> usize {
    total / parts + usize::from(index < total % parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up() {
        for total in [0, 1, 7, 200] {
            for parts in 1..5 {
                let sum: usize = (0..parts).map(|i| share_of(total, parts, i)).sum();
                assert_eq!(sum, total);
            }
        }
    }
}
