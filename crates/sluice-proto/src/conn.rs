//! The contract between a protocol and an engine.
//!
//! A [`Session`] is one connection's protocol state. The engine hands it the bytes it has read and a
//! [`Clock`]; the session answers by queueing [`Segment`]s (bytes, or a slice of a file to be sent
//! with whatever send strategy the engine runs) in an [`Outbox`] and by telling the engine when it next
//! needs attention ([`Session::deadline`]). This module owns that vocabulary; it does not own how
//! bytes reach a socket (that is the engine's) nor what any protocol says (that is `http`'s).

use std::collections::VecDeque;
use std::fs::File;
use std::io::IoSlice;
use std::sync::Arc;
use std::time::Instant;

use crate::kernel_tls::{KernelTlsKeys, KernelTlsRefusal, RecordAction};

/// The time as an engine's loop last read it, with the HTTP `Date` value for that second.
///
/// Engines refresh it once per loop iteration, so a burst of pipelined requests shares one clock
/// read and one date formatting.
#[derive(Debug, Clone)]
pub struct Clock {
    now: Instant,
    unix_secs: u64,
    date: [u8; 29],
}

impl Clock {
    /// A clock reading: a monotonic instant and the wall-clock seconds since the Unix epoch.
    pub fn new(now: Instant, unix_secs: u64) -> Self {
        let mut clock = Clock { now, unix_secs: u64::MAX, date: [b' '; 29] };
        clock.set(now, unix_secs);
        clock
    }

    /// Moves the clock; the date string is re-formatted only when the second changes.
    pub fn set(&mut self, now: Instant, unix_secs: u64) {
        self.now = now;
        if unix_secs != self.unix_secs {
            self.unix_secs = unix_secs;
            let formatted =
                httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix_secs));
            let bytes = formatted.as_bytes();
            let n = bytes.len().min(self.date.len());
            self.date[..n].copy_from_slice(&bytes[..n]);
        }
    }

    /// The monotonic time of this reading.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The IMF-fixdate for this reading's second, as the `Date` header wants it.
    pub fn http_date(&self) -> &[u8] {
        &self.date
    }
}

/// A byte range of an open file, to be sent without passing through the protocol.
#[derive(Debug, Clone)]
pub struct FileSlice {
    /// The open file; shared because a multipart response sends several slices of one file.
    pub file: Arc<File>,
    /// Where the next byte to send starts.
    pub offset: u64,
    /// How many bytes remain to send.
    pub len: u64,
}

/// Part of bytes in memory that several responses send at once (a cached encrypted segment):
/// each response holds a reference, and none copies them.
#[derive(Debug, Clone)]
pub struct SharedBytes {
    bytes: Arc<Vec<u8>>,
    start: usize,
    end: usize,
}

impl SharedBytes {
    /// All of `bytes`.
    pub fn new(bytes: Arc<Vec<u8>>) -> SharedBytes {
        let end = bytes.len();
        SharedBytes { bytes, start: 0, end }
    }

    /// The bytes this part stands for.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }

    /// The part `from..to` of this one (offsets within it), sharing the same bytes.
    ///
    /// # Panics
    /// When `from..to` is not within it.
    pub fn slice(&self, from: usize, to: usize) -> SharedBytes {
        assert!(from <= to && to <= self.end - self.start, "a slice within the shared bytes");
        SharedBytes { bytes: Arc::clone(&self.bytes), start: self.start + from, end: self.start + to }
    }

    /// The buffer itself, when nothing else shares it.
    pub fn into_unique(self) -> Option<Vec<u8>> {
        Arc::try_unwrap(self.bytes).ok()
    }
}

/// One piece of queued output.
#[derive(Debug)]
pub enum Segment {
    /// Bytes the protocol produced (response heads, generated pages).
    Bytes(Vec<u8>),
    /// Bytes that live for the whole program (fixed bodies).
    Static(&'static [u8]),
    /// Bytes shared with other responses and a cache.
    Shared(SharedBytes),
    /// Part of a file, sent by the engine's send strategy (sendfile, splice or copy).
    File(FileSlice),
}

impl Segment {
    /// Bytes left to send in this segment.
    pub fn len(&self) -> u64 {
        match self {
            Segment::File(f) => f.len,
            other => other.in_memory().map_or(0, <[u8]>::len) as u64,
        }
    }

    /// Whether nothing is left to send.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of an in-memory segment; `None` for a file slice.
    pub fn in_memory(&self) -> Option<&[u8]> {
        match self {
            Segment::Bytes(b) => Some(b),
            Segment::Static(b) => Some(b),
            Segment::Shared(b) => Some(b.as_slice()),
            Segment::File(_) => None,
        }
    }
}

/// A connection's queued output, in order, plus whether to close once it is sent.
///
/// The outbox keeps the byte buffers of segments it has finished sending and hands them back
/// through [`Outbox::buffer`], so a keep-alive connection formats every response head into memory
/// it already owns.
#[derive(Debug, Default)]
pub struct Outbox {
    segments: VecDeque<Segment>,
    /// How far into the front `Bytes`/`Static` segment the engine has written.
    front_written: usize,
    spare: Vec<Vec<u8>>,
    close_after_flush: bool,
    responses: usize,
    /// Bytes ever queued and ever sent on this connection: a response's place in the stream is
    /// a pair of these offsets, which tells whether it was sent whole when the connection ends.
    queued_total: u64,
    sent_total: u64,
}

impl Outbox {
    /// An empty outbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty byte buffer to format into, recycled from sent segments when there is one.
    pub fn buffer(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    /// Queues a segment; empty segments are dropped (their buffer recycled).
    pub fn push(&mut self, segment: Segment) {
        self.queued_total += segment.len();
        if segment.is_empty() {
            self.recycle(segment);
        } else {
            self.segments.push_back(segment);
        }
    }

    /// Counts one more complete response queued (for pipelining bounds and tests).
    pub fn note_response(&mut self) {
        self.responses += 1;
    }

    /// Responses queued since the outbox was last empty.
    pub fn queued_responses(&self) -> usize {
        self.responses
    }

    /// Bytes queued on this connection since it opened.
    pub fn queued_total(&self) -> u64 {
        self.queued_total
    }

    /// Bytes the engine has sent on this connection since it opened.
    pub fn sent_total(&self) -> u64 {
        self.sent_total
    }

    /// Asks the engine to close the connection once everything queued is sent.
    pub fn close_after_flush(&mut self) {
        self.close_after_flush = true;
    }

    /// Whether the connection is to be closed once the queue drains.
    pub fn closing(&self) -> bool {
        self.close_after_flush
    }

    /// Whether nothing is waiting to be sent.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Bytes waiting to be sent, over all segments.
    pub fn pending_bytes(&self) -> u64 {
        self.segments.iter().map(Segment::len).sum::<u64>() - self.front_written as u64
    }

    /// The segment to send next and, for in-memory segments, the unsent part of it.
    pub fn front(&mut self) -> Option<Pending<'_>> {
        let written = self.front_written;
        Some(match self.segments.front()? {
            Segment::File(f) => Pending::File(f),
            other => Pending::Bytes(&other.in_memory()?[written..]),
        })
    }

    /// Fills `slots` with the leading in-memory slices, for one vectored write; stops at the
    /// first file segment. Returns how many slots were filled.
    pub fn leading_slices<'a>(&'a self, slots: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (i, seg) in self.segments.iter().enumerate() {
            if n == slots.len() {
                break;
            }
            let skip = if i == 0 { self.front_written } else { 0 };
            let Some(bytes) = seg.in_memory() else { break };
            slots[n] = IoSlice::new(&bytes[skip..]);
            n += 1;
        }
        n
    }

    /// The segment `n` places behind the front, if any.
    pub fn segment_after(&self, n: usize) -> Option<&Segment> {
        self.segments.get(n)
    }

    /// Records that the engine wrote `n` bytes from the front of the queue.
    pub fn advance(&mut self, mut n: u64) {
        self.sent_total += n;
        while n > 0 {
            let Some(front) = self.segments.front_mut() else { break };
            let left = match front {
                Segment::File(f) => {
                    let step = n.min(f.len);
                    f.offset += step;
                    f.len -= step;
                    n -= step;
                    f.len
                }
                Segment::Bytes(_) | Segment::Static(_) | Segment::Shared(_) => {
                    let left = front.len() - self.front_written as u64;
                    let step = n.min(left);
                    self.front_written += step as usize;
                    n -= step;
                    left - step
                }
            };
            if left == 0 {
                self.front_written = 0;
                let done = self.segments.pop_front().expect("front exists");
                self.recycle(done);
            }
        }
        if self.segments.is_empty() {
            self.responses = 0;
        }
    }

    fn recycle(&mut self, segment: Segment) {
        // A handful of buffers covers any pipelining depth we allow; more would only hold memory
        // on idle connections.
        if let Segment::Bytes(mut b) = segment {
            if self.spare.len() < 4 && b.capacity() <= 64 * 1024 {
                b.clear();
                self.spare.push(b);
            } else {
                crate::buffers::give(b);
            }
        }
    }
}

/// The next thing an engine has to send.
#[derive(Debug)]
pub enum Pending<'a> {
    /// In-memory bytes.
    Bytes(&'a [u8]),
    /// A file range; the engine advances it through [`Outbox::advance`].
    File(&'a FileSlice),
}

/// CPU-bound work a session hands to its engine, so that no event loop ever runs it. An event-loop
/// engine runs it on its bounded worker pool; the threads engine runs it inline, as a servlet would.
pub type Job = Box<dyn FnOnce() -> JobOutput + Send>;

/// What a [`Job`] produced, handed back to the session that asked for it (the session knows the
/// concrete type it boxed).
pub type JobOutput = Box<dyn std::any::Any + Send>;

/// One connection's protocol state, driven by an engine.
pub trait Session {
    /// Offers the bytes received and not yet consumed; returns how many the session consumed.
    ///
    /// The session queues its output in `out`. It may consume less than it is offered (a partial
    /// request, or pipelined requests held back until earlier responses are sent); the engine keeps
    /// the rest and offers it again, with more, after the next read or once `out` drains.
    fn receive(&mut self, input: &[u8], out: &mut Outbox, clock: &Clock) -> usize;

    /// When the session next needs [`Session::on_deadline`], while the engine waits for input.
    fn deadline(&self) -> Option<Instant>;

    /// Called when everything queued has been sent, so idle timers start from the last byte out
    /// rather than from when the response was queued.
    fn on_drained(&mut self, clock: &Clock);

    /// Called with the engine's outbox empty, before the engine asks for input: a session that
    /// produces its output in steps (TLS encrypting a large response a bounded piece at a time)
    /// queues the next step here. The default queues nothing.
    fn refill(&mut self, _out: &mut Outbox, _clock: &Clock) {}

    /// Called when the deadline has passed with no input; the session may queue a last response
    /// and must ask for the connection to be closed.
    fn on_deadline(&mut self, out: &mut Outbox, clock: &Clock);

    /// The server is shutting down: returns true when the connection can be closed at once (no
    /// request in progress); otherwise the session finishes the current response and then closes.
    fn on_shutdown(&mut self, out: &mut Outbox) -> bool;

    /// The engine cannot serve this connection now (every thread busy and the queue of waiting
    /// connections full): queue a last word saying so, and close. HTTP answers 503 with
    /// `Retry-After`; the default closes without a word.
    fn on_overload(&mut self, out: &mut Outbox, _clock: &Clock) {
        out.close_after_flush();
    }

    /// Whether the session can take more input now. False while a response waits on a job or a
    /// timer: the engine then stops reading (the client's bytes wait in the kernel, bounded by
    /// its buffers) and waits for the job or for [`Session::deadline`].
    fn wants_input(&self) -> bool {
        true
    }

    /// A job the session wants run off the event loop; each job is taken once.
    fn take_job(&mut self) -> Option<Job> {
        None
    }

    /// The output of the job last taken from this session.
    fn job_done(&mut self, _output: JobOutput, _out: &mut Outbox, _clock: &Clock) {}

    /// The engine could not run the job (its queue is full); the session answers accordingly.
    fn job_refused(&mut self, _out: &mut Outbox, _clock: &Clock) {}

    /// The connection is closing, whatever the reason (the response stream ended, the peer left,
    /// a deadline, shutdown): `out` says how much was sent and what never left, so that a
    /// response cut short can be told from a whole one.
    fn on_close(&mut self, _out: &Outbox) {}

    /// Whether the session would have the kernel take over its TLS record layer now (the
    /// handshake is over). The engine asks with the outbox empty, so that nothing encrypted in
    /// user space is left unsent, attaches the `tls` ULP and then takes the keys
    /// ([`Session::kernel_tls_keys`]), and tells how it went ([`Session::kernel_tls_result`]).
    fn wants_kernel_tls(&self) -> bool {
        false
    }

    /// The traffic keys for the kernel: from here on the session's bytes in and out are plain.
    /// `None` when the session changed its mind (it may have queued a last word in `out`).
    fn kernel_tls_keys(&mut self, _out: &mut Outbox) -> Option<KernelTlsKeys> {
        None
    }

    /// Whether the switch happened. When it did not, the session goes on in user space, except
    /// after [`KernelTlsRefusal::Keys`], when the engine closes the connection.
    fn kernel_tls_result(&mut self, _result: Result<(), KernelTlsRefusal>) {}

    /// A record the kernel handed up instead of decrypting into the byte stream (its content
    /// type and body): an alert or a key update, answered by what the engine must do.
    fn kernel_tls_record(&mut self, _content_type: u8, _body: &[u8]) -> RecordAction {
        RecordAction::Close
    }
}
