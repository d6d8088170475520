//! The sending side of the [`RtspServer`]: on each tick, every viewer whose samples are due has
//! them read (once per position, through the sample cache), packetized into its own bounded
//! queue (whole frames dropped when it is full, or skipped up to a keyframe when the loop is late
//! under `degrade`) and moved towards its delivery: interleaved frames into its connection's
//! output, or datagrams into the loop's batch at the pace of its token bucket ([`Pacer`]). The
//! farewell at shutdown (a final sender report and BYE per track) goes the same way.
//!
//! It owns when and how much each viewer is sent, not the control connections and sessions (the
//! rest of [`RtspServer`]) nor the sockets (the loop's).

use std::io;
use std::time::{Duration, Instant};

use sluice_proto::rtp::Offer;
use sluice_proto::rtsp::{interleaved_header, DatagramSink, LoopNote, Port};

use super::{
    MediaLibrary, Note, Observer, RtspServer, Viewer, CNAME, DEGRADE_BACKLOG, DEGRADE_BEHIND, LATE_SEND,
    OUTPUT_HIGH, PACE_BURST, PACE_TICK,
};
use crate::config::Overload;
use crate::session::{WARM_RETRY, WARM_TIMEOUT};
use crate::table::Delivery;
use crate::table::SessionId;

/// A token bucket: how many bytes a viewer may be sent now.
#[derive(Debug)]
pub(super) struct Pacer {
    /// Bytes per second.
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl Pacer {
    pub(super) fn new(rate: f64, now: Instant) -> Pacer {
        Pacer { rate, tokens: PACE_BURST, at: now }
    }

    /// Takes `n` bytes' worth if the bucket has them (a packet larger than the burst is let
    /// through on a full bucket).
    fn take(&mut self, n: usize, now: Instant) -> bool {
        // A viewer's packets leave one after another at the same `now`: the bucket fills once.
        if now != self.at {
            let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
            self.tokens = (self.tokens + elapsed * self.rate).min(PACE_BURST);
            self.at = now;
        }
        let n = (n as f64).min(PACE_BURST);
        if self.tokens >= n {
            self.tokens -= n;
            true
        } else {
            false
        }
    }

    /// When the bucket will have `n` bytes.
    fn ready_at(&self, n: usize) -> Instant {
        let missing = (n as f64).min(PACE_BURST) - self.tokens;
        self.at + Duration::from_secs_f64((missing / self.rate).max(0.0))
    }
}

/// Opens `v`'s bytes for the presentation at `path` unless open: a presentation still being
/// fetched ([`io::ErrorKind::WouldBlock`]) is tried again at the viewer's next turn; any other
/// failure is noted once, and the viewer misses its samples and times out (the index said the
/// file was there).
pub(super) fn open_bytes<M: MediaLibrary, O: Observer>(
    media: &M,
    observer: &O,
    v: &mut Viewer<M::Bytes>,
    path: &str,
) {
    if v.bytes.is_some() || v.unreadable {
        return;
    }
    match media.open_bytes(path) {
        Ok(b) => v.bytes = Some(b),
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
        Err(error) => {
            v.unreadable = true;
            observer.note(Note::Unreadable { path, error: &error });
        }
    }
}

impl<M: MediaLibrary, O: Observer, T> RtspServer<'_, M, O, T> {
    /// Queues what is due at `now` (`wall`: the wall-clock time since the Unix epoch, for sender
    /// reports), expires sessions and idle connections.
    pub fn tick(&mut self, now: Instant, wall: Duration) {
        let wall = self.report_clock(now, wall);
        if self.table.deadline().is_some_and(|d| d <= now) {
            let mut events = Vec::new();
            self.table.expire(now, &mut events);
            self.apply(&events, now);
        }
        let idle: Vec<usize> = self
            .connections()
            // A closing connection whose client reads nothing is dropped at the same deadline.
            .filter(|(_, c)| !c.drop_output && c.rtsp.deadline(&self.table) <= now)
            .map(|(k, _)| k)
            .collect();
        for key in idle {
            if let Some(c) = self.control(key) {
                c.closing = true;
                c.drop_output = true;
            }
            self.mark(key);
        }
        // Requests held while their presentations warm are asked again.
        let retry: Vec<usize> = self
            .connections()
            .filter(|(_, c)| {
                !c.closing && c.out.len() <= OUTPUT_HIGH && c.rtsp.retry_at().is_some_and(|at| at <= now)
            })
            .map(|(k, _)| k)
            .collect();
        for key in retry {
            self.answer(key, now);
        }
        let mut due_ids = std::mem::take(&mut self.scratch_ids);
        due_ids.clear();
        // Viewers at the same point of a file one after the other (see SEND_SLOT): their
        // packets then sit side by side in the batch, and the kernel copies a sample from the
        // cache for all but the first.
        due_ids.extend(
            self.viewers
                .iter()
                .filter(|(_, v)| v.next_wake.is_some_and(|w| w <= now))
                .map(|(id, v)| (v.origin, *id)),
        );
        due_ids.sort_unstable_by_key(|&(origin, _)| origin);
        let degrade = self.config().overload == Overload::Degrade;
        let mut late = 0;
        for &(_, id) in &due_ids {
            if let Some(v) = self.viewers.get_mut(&id) {
                // Late to queue the viewer's samples, or late to send what it queued: at 400 UDP
                // viewers the loop kept its ticks on time but its sends fell seconds behind,
                // and the queues overflowed (144,877 frames dropped against 843 late ticks,
                // 2026-11-24).
                // The backlog is measured in sending time at the viewer's pace (4x its mean rate):
                // a queue merely not empty when the next sample comes is normal (a keyframe
                // takes ~20 ms to leave), and counting that as late gave 60,952 late sends at
                // 175 perfect io_uring viewers (2026-11-24).
                let late_by = now.saturating_duration_since(v.next_wake.unwrap_or(now));
                let backlog = match v.control {
                    None => Duration::from_secs_f64(v.queue.queued_bytes() as f64 / v.pacer.rate),
                    Some(_) => Duration::ZERO,
                };
                if late_by > LATE_SEND || backlog > LATE_SEND {
                    late += 1;
                }
                v.skipping |= degrade && (late_by > DEGRADE_BEHIND || backlog > DEGRADE_BACKLOG);
            }
            self.stream(id, now, wall);
        }
        if late > 0 {
            self.load.late += late;
            self.observer.note(Note::Loop(LoopNote::LateSends(late)));
        }
        self.scratch_ids = due_ids;
    }

    /// The wall-clock time sender reports give for `now`: the first tick's wall clock plus the
    /// monotonic time since. Receivers map RTP time to NTP time through every report, and ffmpeg
    /// re-bases each track's timestamps on the NTP time of its latest report: a wall clock read a
    /// little after `now` (the loop's work between the two reads, tens of milliseconds on a loaded
    /// machine) moved a video track back by a frame at the 5 s report and gave ffmpeg two frames with
    /// one DTS ("non monotonically increasing dts 152 >= 152" in `tests/rtsp.rs` under load). NTP
    /// steps of the system clock likewise stay out of a running stream.
    pub(super) fn report_clock(&mut self, now: Instant, wall: Duration) -> Duration {
        let (at, wall_at) = *self.wall_anchor.get_or_insert((now, wall));
        wall_at + now.saturating_duration_since(at)
    }

    /// Queues what `id` has due at `now` and hands it towards its delivery.
    fn stream(&mut self, id: SessionId, now: Instant, wall: Duration) {
        let Some(session) = self.table.get_mut(id) else { return };
        let Some(v) = self.viewers.get_mut(&id) else { return };
        // A live stream's newer table first: what came since the last turn is due now.
        let live_ended = session.refresh_live();
        let live = session.live().cloned();
        let file = session.file().clone();
        if v.bytes.is_none() && live.is_none() {
            open_bytes(self.media, &self.observer, v, session.path());
        }
        let waiting = v.bytes.is_none() && !v.unreadable && live.is_none();
        let Some(streamer) = session.streamer_mut() else { return };
        self.due.clear();
        self.due.extend(v.stalled.drain(..));
        streamer.due(super::slot_end(self.epoch, now), &mut self.due);
        // Bytes still being fetched hold the viewer's samples (in order) rather than lose them,
        // up to WARM_TIMEOUT; past it they are missed as lost frames would be.
        let give_up = v.stalled_since.is_some_and(|t| now.saturating_duration_since(t) >= WARM_TIMEOUT);
        let mut stall_from = None;
        for (i, d) in self.due.iter().enumerate() {
            if waiting && !give_up {
                stall_from = Some(i);
                break;
            }
            if v.skipping && v.video.get(d.track) == Some(&true) {
                if !d.keyframe {
                    // Under degrade and late: this frame is dropped unread (the work is what
                    // the loop lacks), and so is every one up to the next keyframe.
                    self.observer.note(Note::Loop(LoopNote::FrameDropped { packets: 0 }));
                    continue;
                }
                v.skipping = false;
            }
            // Shared: viewers at the same position read a sample once. For 200 UDP viewers of the
            // 23 Mbps file this took a run's reads from 461,600 `pread`s (one per viewer and
            // sample) to 2,303 (2026-11-24, docs/BENCHMARKS.md).
            let (media, observer) = (self.media, &self.observer);
            // A live sample's bytes are kept by its stream, shared by its viewers already.
            let kept = live
                .as_ref()
                .map(|l| l.sample(d.offset).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound)));
            let read = match &kept {
                Some(kept) => kept.as_ref().map_err(|e| io::Error::from(e.kind())),
                None => self.samples.get_or_read(&file, d.offset, d.size, |into| match &v.bytes {
                    Some(b) => {
                        let read = media.read_at(b, d.offset, into);
                        if read.is_ok() {
                            observer.note(Note::Loop(LoopNote::SampleRead));
                        }
                        read
                    }
                    None => Err(io::Error::from(io::ErrorKind::NotFound)),
                }),
            };
            if matches!(&read, Err(e) if e.kind() == io::ErrorKind::WouldBlock) && !give_up {
                stall_from = Some(i);
                break;
            }
            self.packets.clear();
            let packets = &mut self.packets;
            let packed = read.map(|sample| {
                // The packets refer to the shared sample's bytes rather than copy them: the
                // kernel's copy into each viewer's datagrams is the only one.
                packets.reference(sample);
                streamer.packetize(d, sample, packets)
            });
            if !matches!(packed, Ok(Ok(_))) {
                // The file changed under its index, or the sample is malformed: the viewer
                // misses it, as it would a lost frame; the stream goes on.
                continue;
            }
            let packets = self.packets.len();
            if v.queue.push_packets((d.track * 2) as u8, d.keyframe, &mut self.packets) == Offer::Dropped {
                self.observer.note(Note::Loop(LoopNote::FrameDropped { packets }));
            }
        }
        match stall_from {
            Some(i) => {
                v.stalled.extend(self.due.drain(i..));
                v.stalled_since.get_or_insert(now);
            }
            None => v.stalled_since = None,
        }
        self.reports.clear();
        streamer.sender_reports(now, wall, CNAME, &mut self.reports);
        // The goodbye goes after the last sample, not before samples still waiting; a live
        // stream's last sample is the one before its publisher left.
        if v.stalled.is_empty() && live_ended != Some(false) {
            streamer.goodbyes(now, wall, CNAME, &mut self.reports);
        }
        for (track, report) in &self.reports {
            let _ = v.queue.push_packet((track * 2 + 1) as u8, report);
        }
        let epoch = self.epoch;
        v.next_wake = streamer.next_wake_in_slots(|at| super::slot_start(epoch, at));
        if live_ended == Some(false) && streamer.is_playing() {
            // What the publisher sends next is looked for at the next slot.
            let next = super::slot_start(epoch, now) + super::SEND_SLOT;
            v.next_wake = Some(v.next_wake.map_or(next, |w| w.min(next)));
        }
        if !v.stalled.is_empty() {
            let retry = now + WARM_RETRY;
            v.next_wake = Some(v.next_wake.map_or(retry, |w| w.min(retry)));
        }
        if v.queue.is_empty() {
            return;
        }
        match v.control {
            Some(key) => self.feed_interleaved(key),
            None => {
                if !v.ready {
                    v.ready = true;
                    self.udp_ready.push_back(id);
                }
            }
        }
    }

    /// Moves queued packets of `key`'s viewers into its output, as interleaved frames, while it
    /// is short.
    pub(super) fn feed_interleaved(&mut self, key: usize) {
        let Some(c) = self.controls.get_mut(key).and_then(Option::as_mut) else { return };
        if c.closing {
            return;
        }
        let (mut packets, mut bytes) = (0, 0);
        for id in &c.viewers {
            let Some(v) = self.viewers.get_mut(id) else { continue };
            while c.out.len() < OUTPUT_HIGH {
                let Some(packet) = v.queue.front() else { break };
                let stream = packet.stream;
                let channel = match v.deliveries.get(usize::from(stream / 2)) {
                    Some(Delivery::Interleaved { rtp, rtcp }) => {
                        Some(if stream % 2 == 0 { *rtp } else { *rtcp })
                    }
                    _ => None,
                };
                // A packet longer than a frame's 16-bit length cannot be framed (packetizers
                // keep to the MTU, so none is): it is dropped rather than cut.
                let header = channel.and_then(|ch| interleaved_header(ch, packet.len()));
                match header {
                    Some(header) => {
                        c.out.push(&header);
                        c.out.push(packet.head);
                        if let Some(body) = packet.body {
                            c.out.push_shared(body);
                        }
                        packets += 1;
                        bytes += packet.len();
                    }
                    None if channel.is_some() => {
                        self.observer.note(Note::Loop(LoopNote::FrameDropped { packets: 1 }))
                    }
                    None => {}
                }
                v.queue.pop();
            }
        }
        if packets > 0 {
            self.observer.note(Note::Loop(LoopNote::PacketsSent { packets, bytes }));
            self.mark(key);
        }
    }

    /// The server is shutting down: every viewer's queued packets give way to a final RTCP BYE
    /// per track (sender report and BYE, RFC 3550 §6.6), which goes out as its packets do (on
    /// its RTCP port, or interleaved on its connection), and every control connection closes
    /// once what it has to write is written. The loop keeps sending until [`RtspServer::drained`]
    /// (or its own time limit).
    pub fn farewell(&mut self, now: Instant, wall: Duration) {
        let wall = self.report_clock(now, wall);
        let ids: Vec<SessionId> = self.viewers.keys().copied().collect();
        let mut connections = Vec::new();
        for id in ids {
            let Some(session) = self.table.get_mut(id) else { continue };
            let Some(v) = self.viewers.get_mut(&id) else { continue };
            let Some(streamer) = session.streamer_mut() else { continue };
            self.reports.clear();
            streamer.farewell(now, wall, CNAME, &mut self.reports);
            v.queue.clear();
            v.stalled.clear();
            v.next_wake = None;
            for (track, report) in &self.reports {
                let _ = v.queue.push_packet((track * 2 + 1) as u8, report);
            }
            match v.control {
                Some(key) => connections.push(key),
                None if !v.queue.is_empty() && !v.ready => {
                    v.ready = true;
                    self.udp_ready.push_back(id);
                }
                None => {}
            }
        }
        for key in connections {
            self.feed_interleaved(key);
        }
        let keys = self.keys();
        for key in keys {
            if let Some(c) = self.control(key) {
                c.closing = true;
            }
            self.mark(key);
        }
    }

    /// After [`RtspServer::farewell`], whether everything is out: no UDP viewer has packets
    /// queued and every control connection is gone.
    pub fn drained(&self) -> bool {
        self.udp_ready.is_empty() && self.controls.iter().all(Option::is_none)
    }

    /// Moves queued packets of UDP viewers into `batch`, viewer by viewer, as far as each one's
    /// pacer allows; returns whether the batch filled up (more may be sendable at once). The loop
    /// reports what actually left with [`RtspServer::sent_datagrams`].
    pub fn fill_datagrams(&mut self, batch: &mut (impl DatagramSink + ?Sized), now: Instant) -> bool {
        self.pace_wake = None;
        // Each ready viewer once per call: those still holding packets (held by their pacer)
        // go round again at the next call.
        for _ in 0..self.udp_ready.len() {
            let Some(id) = self.udp_ready.pop_front() else { break };
            let Some(v) = self.viewers.get_mut(&id) else { continue };
            // A viewer its pacer held waits for its whole burst. Served at every turn instead
            // (a turn comes for any viewer's samples, a writable socket, a completion), it sent
            // the few packets its bucket had gained since the last turn, and each such send
            // brought the next turn at once: at 100 viewers the epoll loop turned 1,900 times a
            // second on a 500-a-second grid and spent 1.06 us of CPU per packet, against 0.50 us
            // at 1,000 viewers, where turns are full anyway (2026-11-26).
            if let Some(at) = v.held_until.filter(|&at| now < at) {
                self.pace_wake = Some(self.pace_wake.map_or(at, |w| w.min(at)));
                self.udp_ready.push_back(id);
                continue;
            }
            v.held_until = None;
            while let Some(packet) = v.queue.front() {
                let stream = packet.stream;
                if !batch.fits(packet.len()) {
                    // Full: this viewer and the ones behind it go first next time.
                    self.udp_ready.push_front(id);
                    return true;
                }
                if !v.pacer.take(packet.len(), now) {
                    // Wake when the bucket holds the rest of what is queued (or a whole burst),
                    // not the next packet: each wake-up then sends a viewer one GSO
                    // super-packet of up to ~42 datagrams instead of ~8 a millisecond.
                    // Less than a whole bucket by a tick's refill: the wake-up comes on the next
                    // tick of the grid, up to a tick after the burst is in, and a full bucket
                    // would waste what it gains meanwhile (a quarter of a 23 Mbps viewer's pace).
                    let refill = v.pacer.rate * PACE_TICK.as_secs_f64();
                    let most = (PACE_BURST - refill).max(packet.len() as f64) as usize;
                    let want = v.queue.queued_bytes().min(most);
                    let at = v.pacer.ready_at(want).max(now + PACE_TICK);
                    v.held_until = Some(at);
                    self.pace_wake = Some(self.pace_wake.map_or(at, |w| w.min(at)));
                    break;
                }
                if let Some(Delivery::Udp { rtp, rtcp }) = v.deliveries.get(usize::from(stream / 2)) {
                    let (port, dest) = if stream % 2 == 0 { (Port::Rtp, *rtp) } else { (Port::Rtcp, *rtcp) };
                    batch.push(port, dest, packet.head, packet.body);
                }
                v.queue.pop();
            }
            if v.queue.is_empty() {
                v.ready = false;
            } else {
                self.udp_ready.push_back(id);
            }
        }
        false
    }

    /// `packets` datagrams of `bytes` bytes left (counted as sent).
    pub fn sent_datagrams(&self, packets: usize, bytes: usize) {
        self.observer.note(Note::Loop(LoopNote::PacketsSent { packets, bytes }));
    }
}
