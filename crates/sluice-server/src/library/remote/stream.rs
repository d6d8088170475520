//! The body of a response read through the slice cache, a step at a time ([`SliceStream`]): the
//! pieces of one object, or of several laid end to end (a span of recordings as one MP4), each
//! a run of bytes of one cached slice, fetched ahead by the library's background workers.
//!
//! Owns the order slices are opened, fetched ahead and given to the session. Which slices a
//! response's byte ranges cover is decided here too ([`pieces`]); what the response is (ranges,
//! validators) is not: it arrives built over the library's placeholder file.

use std::collections::VecDeque;
use std::fs::File;
use std::sync::{mpsc, Arc};

use sluice_proto::conn::{FileSlice, Segment};
use sluice_proto::http::{BodyTail, BodyTailError};
use sluice_store::{CacheError, ObjectVersion, SliceCache};

use super::Background;

/// One slice of one of a body's objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SliceId {
    /// Which of the body's objects.
    object: usize,
    /// Which slice of it.
    index: u64,
}

/// One object of a body and where its bytes start in the body's placeholder coordinates (0 for a
/// body of one object; the running sum of the lengths before it for objects laid end to end).
#[derive(Debug, Clone)]
pub(super) struct Laid {
    /// The object, in the version every slice is read against.
    pub version: Arc<ObjectVersion>,
    /// Where it starts.
    pub base: u64,
}

/// One piece of a response body as the cache sees it.
#[derive(Debug)]
pub(super) enum Piece {
    /// Bytes of the response itself (a multipart boundary, an MP4's header).
    Own(Segment),
    /// `len` bytes at `offset` of slice `id`.
    Slice { id: SliceId, offset: u64, len: u64 },
}

/// The response's segments as pieces of slices (and the response's own bytes between them):
/// each file slice, in the placeholder's coordinates, cut where an object of `laid` ends and
/// where a cache slice does.
pub(super) fn pieces(cache: &SliceCache, laid: &[Laid], segments: Vec<Segment>) -> VecDeque<Piece> {
    let mut pieces = VecDeque::with_capacity(segments.len());
    for segment in segments {
        let Segment::File(f) = segment else {
            pieces.push_back(Piece::Own(segment));
            continue;
        };
        let end = f.offset + f.len;
        for (object, o) in laid.iter().enumerate() {
            let (from, to) = (f.offset.max(o.base), end.min(o.base + o.version.len));
            if from >= to {
                continue;
            }
            let (from, to) = (from - o.base, to - o.base);
            for index in cache.slices_of(from..to) {
                let range = cache.slice_range(&o.version, index);
                let (a, b) = (from.max(range.start), to.min(range.end));
                pieces.push_back(Piece::Slice {
                    id: SliceId { object, index },
                    offset: a - range.start,
                    len: b - a,
                });
            }
        }
    }
    pieces
}

/// A slice fetched ahead of the one being sent.
#[derive(Debug)]
pub(super) enum Ahead {
    /// On disk and open: the descriptor holds it against eviction until it is sent.
    Ready(Arc<File>),
    /// Being fetched by a background worker.
    Fetching(mpsc::Receiver<Result<File, CacheError>>),
}

/// The body of a response read through the cache, a step at a time: each step waits for the next
/// slice only, so the first byte of a whole 2 GB object waits for its first slice rather than
/// the object, and [`AHEAD`] slices are fetched while the ones before them are sent. A step
/// also takes the slices after its first that are already on disk, up to [`STEP_SLICES`].
///
/// Nothing is held in memory but descriptors: a slice fetched ahead is written to the cache and
/// kept open (an eviction before it is sent unlinks the name, not the bytes). The session asks
/// for the next step only once the previous one has been sent, so a slow client holds back the
/// fetching, never more than [`AHEAD`] slices beyond what it has read.
#[derive(Debug)]
pub(super) struct SliceStream {
    pub cache: Arc<SliceCache>,
    pub background: Arc<Background>,
    /// The objects the pieces are of, by [`SliceId::object`].
    pub versions: Vec<Arc<ObjectVersion>>,
    pub pieces: VecDeque<Piece>,
    /// The slice the last piece sent came from, still open for the next piece of it.
    pub current: Option<(SliceId, Arc<File>)>,
    /// The next slices after `current`, in the order they will be sent.
    pub ahead: VecDeque<(SliceId, Ahead)>,
    /// False on the event loop: only slices on disk, no fetching.
    pub may_block: bool,
}

/// Slices fetched ahead of the one a response is sending. Two keep the origin busy while a slice
/// goes out (as the earlier all-at-once fetch did, two at a time), and hold at most two slices
/// of disk beyond what the client has read.
pub(super) const AHEAD: usize = 2;

/// Most slices one step queues (when they are on disk already): bounds the descriptors a warm
/// response holds open at once.
pub(super) const STEP_SLICES: usize = 4;

impl SliceStream {
    /// The next segments: every piece up to the first slice's end, and the pieces of the slices
    /// after it that are ready now. Waits (when it may block) for the first slice only.
    pub fn step(&mut self) -> Result<Vec<Segment>, CacheError> {
        let mut out = Vec::new();
        let mut slices = 0;
        // On the loop every slice is on disk (or the call fails): the whole body at once.
        let most = if self.may_block { STEP_SLICES } else { usize::MAX };
        self.look_ahead(AHEAD);
        while let Some(piece) = self.pieces.front() {
            let (id, offset, len) = match piece {
                Piece::Own(_) => {
                    if let Some(Piece::Own(segment)) = self.pieces.pop_front() {
                        out.push(segment);
                    }
                    continue;
                }
                Piece::Slice { id, offset, len } => (*id, *offset, *len),
            };
            let same = self.current.as_ref().is_some_and(|(i, _)| *i == id);
            if !same {
                if slices == most || (slices > 0 && self.may_block && !self.ready_now(id)) {
                    break;
                }
                let file = self.open(id)?;
                self.current = Some((id, file));
                slices += 1;
            }
            let Some((_, file)) = &self.current else { break };
            out.push(Segment::File(FileSlice { file: Arc::clone(file), offset, len }));
            self.pieces.pop_front();
        }
        if self.pieces.is_empty() {
            self.current = None;
        } else {
            self.look_ahead(AHEAD);
        }
        Ok(out)
    }

    /// Whether slice `id` is on disk.
    pub fn has(&self, id: SliceId) -> bool {
        self.cache.has(&self.versions[id.object], id.index)
    }

    /// Fetches the first slice the body needs that is not on disk, if any, and keeps it for its
    /// turn. Every fetch is conditional on the version, so this checks the version with the
    /// origin before the head goes out: an object replaced since its version was resolved (its
    /// first slices still cached) fails here with [`CacheError::Changed`] and is answered again,
    /// new and whole, instead of being cut after a head that named the old one. A replacement
    /// later in the body can only cut it (never mix versions). Of a body of several objects, the
    /// first missing slice of each is fetched so (their versions all checked before the head).
    pub fn confirm_versions(&mut self) -> Result<(), CacheError> {
        let mut confirmed: Vec<usize> = Vec::new();
        let missing: Vec<SliceId> = self
            .pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Slice { id, .. } if !self.has(*id) => Some(*id),
                _ => None,
            })
            .filter(|id| {
                let first = !confirmed.contains(&id.object);
                confirmed.push(id.object);
                first
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        self.look_ahead(AHEAD);
        for id in missing {
            let file = self.open(id)?;
            self.ahead.push_back((id, Ahead::Ready(file)));
        }
        Ok(())
    }

    /// The distinct slices the remaining pieces need after `current`, in order, at most `n`.
    fn upcoming(&self, n: usize) -> Vec<SliceId> {
        let current = self.current.as_ref().map(|(i, _)| *i);
        let mut next: Vec<SliceId> = Vec::with_capacity(n);
        for piece in &self.pieces {
            if next.len() == n {
                break;
            }
            if let Piece::Slice { id, .. } = piece {
                if Some(*id) != current && !next.contains(id) {
                    next.push(*id);
                }
            }
        }
        next
    }

    /// Makes sure the next `n` slices are open or being fetched (when blocking is allowed), and
    /// forgets any that are no longer ahead.
    fn look_ahead(&mut self, n: usize) {
        let next = self.upcoming(n);
        self.ahead.retain(|(i, _)| next.contains(i));
        for id in next {
            if self.ahead.iter().any(|(i, _)| *i == id) {
                continue;
            }
            let ahead = match self.cache.slice(&self.versions[id.object], id.index, self.bytes_of(id), false)
            {
                Ok(file) => Ahead::Ready(Arc::new(file)),
                Err(_) if !self.may_block => continue,
                Err(_) => match self.fetch_in_background(id) {
                    Some(fetching) => fetching,
                    None => continue,
                },
            };
            self.ahead.push_back((id, ahead));
        }
    }

    /// Starts fetching slice `id` on a background worker, unless too many are running.
    fn fetch_in_background(&self, id: SliceId) -> Option<Ahead> {
        fetch_in_background(&self.background, &self.cache, &self.versions[id.object], id.index)
            .map(Ahead::Fetching)
    }

    /// Whether slice `id` can be sent without waiting.
    fn ready_now(&mut self, id: SliceId) -> bool {
        let Some((_, ahead)) = self.ahead.iter_mut().find(|(i, _)| *i == id) else { return false };
        if let Ahead::Fetching(rx) = ahead {
            match rx.try_recv() {
                Ok(Ok(file)) => *ahead = Ahead::Ready(Arc::new(file)),
                // A failure is the blocking path's to report.
                Ok(Err(_)) | Err(_) => return false,
            }
        }
        true
    }

    /// Slice `id`, open: fetched ahead, or now (waiting when blocking is allowed).
    fn open(&mut self, id: SliceId) -> Result<Arc<File>, CacheError> {
        let position = self.ahead.iter().position(|(i, _)| *i == id);
        if let Some((_, ahead)) = position.and_then(|p| self.ahead.remove(p)) {
            match ahead {
                Ahead::Ready(file) => return Ok(file),
                Ahead::Fetching(rx) => {
                    if let Ok(result) = rx.recv() {
                        return result.map(Arc::new);
                    }
                }
            }
        }
        let bytes = self.bytes_of(id);
        self.cache.slice(&self.versions[id.object], id.index, bytes, self.may_block).map(Arc::new)
    }

    /// The bytes the response sends from slice `id` once it is opened: its next run of pieces
    /// (a multipart body that comes back to a slice after another opens it again).
    fn bytes_of(&self, id: SliceId) -> u64 {
        let of_id = |p: &&Piece| matches!(p, Piece::Slice { id: i, .. } if *i == id);
        let mut bytes = 0;
        for piece in self.pieces.iter().skip_while(|p| !of_id(p)) {
            match piece {
                Piece::Slice { id: i, len, .. } if *i == id => bytes += len,
                Piece::Slice { .. } => break,
                Piece::Own(_) => {}
            }
        }
        bytes
    }
}

/// Starts fetching slice `index` of `version` into the cache on a `background` worker; the
/// receiver gets the slice, opened.
pub(super) fn fetch_in_background(
    background: &Background,
    cache: &Arc<SliceCache>,
    version: &Arc<ObjectVersion>,
    index: u64,
) -> Option<mpsc::Receiver<Result<File, CacheError>>> {
    let (cache, version) = (Arc::clone(cache), Arc::clone(version));
    background.run(move || cache.slice(&version, index, 0, true))
}

impl BodyTail for SliceStream {
    fn next(&mut self) -> Result<Vec<Segment>, BodyTailError> {
        self.step().map_err(|e| {
            // The object whose slice failed: the one the next piece is of.
            let object = self.pieces.iter().find_map(|p| match p {
                Piece::Slice { id, .. } => Some(id.object),
                Piece::Own(_) => None,
            });
            let key = self.versions[object.unwrap_or(0)].key.as_str();
            tracing::warn!(key, "origin: {e}; the response is cut short (its head is sent)");
            BodyTailError(e.to_string())
        })
    }
}
