//! What an RTSP loop and the RTSP server core say to each other, so the engine's loops drive
//! the core without knowing it: the [`RtspCore`] trait (bytes, datagrams and the time in; what to
//! write where, and the next wake-up, out), the loop's datagram batch as the core sees it
//! ([`DatagramSink`], [`Port`]), a control connection's output ([`OutBuf`]), and the notes the core
//! gives for the loop's counters ([`LoopNote`]).
//!
//! As HTTP's [`Session`](crate::Session) is the engine's view of an HTTP connection, this is its
//! view of RTSP: the engine (`sluice-engine`) calls it, the server core (`sluice-rtsp`'s
//! `RtspServer`) implements it, and the server binary joins the two. It owns the shapes, not what
//! a request means, the session table or pacing (the core's), nor sockets and timers (the
//! loop's).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::rtp::{Body, BodyRef};

/// Which of the server's two UDP sockets a datagram leaves from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// The RTP port (media).
    Rtp = 0,
    /// The RTCP port (sender reports).
    Rtcp = 1,
}

/// Where [`RtspCore::fill_datagrams`] puts datagrams: the loop's batch.
pub trait DatagramSink {
    /// Whether a datagram of `len` bytes fits now.
    fn fits(&self, len: usize) -> bool;
    /// Adds a datagram from `port` to `dest`: `head`, then `body` (payload bytes in a shared
    /// sample, which the sink may hold, by cloning its sample once for the packets of that sample
    /// in a row, until the datagram has left); called only after [`DatagramSink::fits`] said yes
    /// for their total length.
    fn push(&mut self, port: Port, dest: SocketAddr, head: &[u8], body: Option<BodyRef<'_>>);
}

/// How loaded the RTSP loop was over one load window, and what it admits from now on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Headroom {
    /// Share of the window the loop needed the CPU (its thread's CPU time, and the time it waited
    /// for a CPU, over wall time).
    pub busy: f64,
    /// Samples queued late in the window.
    pub late_sends: usize,
    /// Viewers streaming, on average over the window (weighted by time).
    pub viewers: usize,
    /// Viewers the loop admits at most now (`usize::MAX`: no bound from the load).
    pub room: usize,
}

/// What a control connection has to write, in two generations so bytes handed to the kernel stay
/// put while more are appended (io_uring reads them after submission). Replies and frame headers
/// are bytes of its own; an interleaved packet's payload that lies in a shared sample is a piece
/// referring to it, so the loop writes the connection with `writev` of the slices (the kernel's
/// copy is the only copy, as for UDP viewers).
#[derive(Debug, Default)]
pub struct OutBuf {
    queued: Pieces,
    sending: Pieces,
    /// Bytes of `sending` written.
    sent: usize,
}

/// Bytes to write in order: runs of `bytes`, and shared samples' slices.
#[derive(Debug, Default)]
struct Pieces {
    bytes: Vec<u8>,
    pieces: Vec<Piece>,
    len: usize,
}

#[derive(Debug)]
enum Piece {
    /// `bytes[start..start + len]`.
    Own {
        start: usize,
        len: usize,
    },
    Shared(Body),
}

impl Pieces {
    fn push(&mut self, more: &[u8]) {
        if more.is_empty() {
            return;
        }
        let start = self.bytes.len();
        self.bytes.extend_from_slice(more);
        self.len += more.len();
        match self.pieces.last_mut() {
            Some(Piece::Own { start: s, len }) if *s + *len == start => *len += more.len(),
            _ => self.pieces.push(Piece::Own { start, len: more.len() }),
        }
    }

    fn push_shared(&mut self, body: BodyRef<'_>) {
        self.len += body.len();
        self.pieces.push(Piece::Shared(body.to_body()));
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.pieces.clear();
        self.len = 0;
    }

    /// The slices from byte `from` on.
    fn slices(&self, from: usize) -> impl Iterator<Item = &[u8]> {
        let mut skip = from;
        self.pieces.iter().filter_map(move |p| {
            let all = match p {
                Piece::Own { start, len } => &self.bytes[*start..*start + *len],
                Piece::Shared(b) => b.as_slice(),
            };
            let cut = skip.min(all.len());
            skip -= cut;
            (cut < all.len()).then(|| &all[cut..])
        })
    }
}

impl OutBuf {
    /// Appends bytes of its own (a reply, a frame header), copied.
    pub fn push(&mut self, bytes: &[u8]) {
        self.queued.push(bytes);
    }

    /// Appends a slice of a shared sample, held rather than copied.
    pub fn push_shared(&mut self, body: BodyRef<'_>) {
        self.queued.push_shared(body);
    }

    /// Bytes not yet written.
    pub fn len(&self) -> usize {
        self.queued.len + self.sending.len - self.sent
    }

    /// Whether everything has been written.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Moves what is queued to sending once sending is written.
    fn turn(&mut self) {
        if self.sent == self.sending.len {
            self.sending.clear();
            self.sent = 0;
            std::mem::swap(&mut self.queued, &mut self.sending);
        }
    }

    /// The first run of bytes to write next (stable until [`OutBuf::advance`]), or `None` when
    /// done; [`OutBuf::pending_slices`] gives all of them, for `writev`.
    pub fn pending(&mut self) -> Option<&[u8]> {
        self.turn();
        self.sending.slices(self.sent).next()
    }

    /// Up to `max` slices to write next, in order (stable until [`OutBuf::advance`]); empty when
    /// done.
    pub fn pending_slices(&mut self, max: usize) -> Vec<&[u8]> {
        self.turn();
        self.sending.slices(self.sent).take(max).collect()
    }

    /// `n` bytes of what [`OutBuf::pending`] or [`OutBuf::pending_slices`] gave were written.
    pub fn advance(&mut self, n: usize) {
        self.sent = (self.sent + n).min(self.sending.len);
    }
}

/// Why a session was released.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The client sent `TEARDOWN`.
    Teardown,
    /// No request or report within the session timeout.
    Timeout,
    /// Its control connection closed and its packets went over that connection.
    ConnectionClosed,
}

/// Something the core did that the loop counts (the rest of what it reports, such as the access
/// log, is the server's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoopNote<'a> {
    /// A control connection was accepted.
    Connected,
    /// Bytes arrived on a control connection.
    BytesIn(usize),
    /// Requests were answered.
    Answered(usize),
    /// A session (this id) was set up.
    SessionCreated(u64),
    /// A session (this id) is gone, and why.
    SessionReleased(u64, Release),
    /// A sample's bytes were read from the file.
    SampleRead,
    /// A viewer's queue refused a frame of `packets` packets.
    FrameDropped {
        /// Packets of the frame.
        packets: usize,
    },
    /// Packets left for a viewer.
    PacketsSent {
        /// Packets.
        packets: usize,
        /// Their bytes (without interleaved framing).
        bytes: usize,
    },
    /// A viewer's stream started.
    ViewerAdmitted,
    /// A viewer was refused with 453.
    ViewerRefused,
    /// Samples were queued late.
    LateSends(usize),
    /// The viewers streaming the presentation at this URL path changed to this many.
    StreamViewers {
        /// The URL path.
        path: &'a str,
        /// Viewers streaming it now.
        viewers: usize,
    },
    /// The loop's headroom over the last load window.
    Headroom(Headroom),
}

/// A control connection as the loop drives it: its own state `T` (socket, buffers, operations in
/// flight), kept in the core's slot so both share one key, and what to write to it.
#[derive(Debug)]
pub struct ControlIo<'c, T> {
    /// The loop's state for it.
    pub io: &'c mut T,
    /// What to write to it.
    pub out: &'c mut OutBuf,
    /// Whether the loop should close it now (the core is done with it and its output is
    /// written, or is to be dropped).
    pub should_close: bool,
}

/// The RTSP server core as a loop drives it: every control connection (keyed by the number
/// [`RtspCore::accept`] gives), the sessions and the pacing of their packets. The loop reads and
/// writes sockets and keeps time; the core decides. Times are the loop's: the core reads no clock.
pub trait RtspCore<T> {
    /// A connection accepted from `peer`, with the loop's state for it; returns its key.
    fn accept(&mut self, io: T, peer: SocketAddr, now: Instant) -> usize;
    /// Connection `key`, if it is still there.
    fn control(&mut self, key: usize) -> Option<ControlIo<'_, T>>;
    /// The keys of every connection.
    fn keys(&self) -> Vec<usize>;
    /// Moves into `into` the connections with something new to write or to close.
    fn take_dirty(&mut self, into: &mut Vec<usize>);
    /// `bytes` arrived on `key`.
    fn received(&mut self, key: usize, bytes: &[u8], now: Instant);
    /// `key`'s client half-closed: what it sent is answered, then the connection closes.
    fn input_ended(&mut self, key: usize, now: Instant);
    /// Whether `key` wants input now (its unanswered input is within bounds).
    fn wants_input(&self, key: usize) -> bool;
    /// Some of `key`'s output was written ([`OutBuf::advance`]).
    fn wrote(&mut self, key: usize, now: Instant);
    /// `key` failed or closed: its sessions are released; the slot stays until
    /// [`RtspCore::remove`].
    fn disconnect(&mut self, key: usize, now: Instant);
    /// Frees `key`'s slot (disconnecting it first), giving back the loop's state.
    fn remove(&mut self, key: usize, now: Instant) -> Option<T>;
    /// A datagram arrived on the RTCP port from `from`.
    fn rtcp_from(&mut self, from: SocketAddr, now: Instant);
    /// A datagram, `packet`, arrived on the RTP port from `from` (a publisher's RTP over UDP).
    fn rtp_from(&mut self, _from: SocketAddr, _packet: &[u8], _now: Instant) {}
    /// The loop's thread has needed `cpu` of CPU time in all (used it, or waited for it behind
    /// other work), at `now` (once a turn).
    fn account(&mut self, cpu: Duration, now: Instant);
    /// When the loop must call [`RtspCore::tick`] next, if ever.
    fn next_wake(&self) -> Option<Instant>;
    /// Queues what is due at `now` (`wall`: the time since the Unix epoch, for sender reports).
    fn tick(&mut self, now: Instant, wall: Duration);
    /// Shutdown: every viewer gets a final goodbye, connections close once written.
    fn farewell(&mut self, now: Instant, wall: Duration);
    /// Whether everything [`RtspCore::farewell`] queued has left.
    fn drained(&self) -> bool;
    /// Puts the datagrams due into `batch` while they fit; returns whether more are waiting.
    fn fill_datagrams(&mut self, batch: &mut dyn DatagramSink, now: Instant) -> bool;
    /// `packets` datagrams of `bytes` bytes left (for the counters).
    fn sent_datagrams(&self, packets: usize, bytes: usize);
}
