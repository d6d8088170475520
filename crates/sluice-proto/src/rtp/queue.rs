//! A viewer's bounded queue of outgoing packets, and what happens when a viewer cannot keep up.
//!
//! This module owns the policy, as a pure data structure: packets wait in one queue per viewer
//! (bounded in bytes and in packets); a frame is admitted whole or not at all; when a frame does
//! not fit, it is dropped and so is every later frame of the same stream up to the next keyframe,
//! because a decoder cannot use frames whose reference is gone. Nothing here ever blocks or waits:
//! the streaming loop offers a frame, the queue keeps or drops it, and the loop moves on to the
//! next viewer. It does not own sockets or decide when to send; the engine drains [`front`] /
//! [`pop`] as its socket accepts bytes, and reports [`dropped_frames`] in `/metrics`.
//!
//! [`front`]: ViewerQueue::front
//! [`pop`]: ViewerQueue::pop
//! [`dropped_frames`]: ViewerQueue::dropped_frames

use std::collections::VecDeque;
use std::sync::Arc;

use super::Packets;

/// Most streams (the `stream` tag of a packet) one queue tracks keyframe state for: RTSP sessions
/// have a handful of tracks, each with an RTP and an RTCP stream.
pub const MAX_STREAMS: u8 = 64;

/// Bounds of one viewer's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Most bytes queued (packet bytes, framing excluded).
    pub max_bytes: usize,
    /// Most packets queued.
    pub max_packets: usize,
}

impl Default for QueueLimits {
    /// About one second of a 23 Mbps stream: enough to absorb a keyframe burst and scheduling
    /// jitter, small enough that 300 viewers hold under 1 GiB in the worst case.
    fn default() -> Self {
        QueueLimits { max_bytes: 3 << 20, max_packets: 4096 }
    }
}

/// What became of an offered frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// All its packets are queued.
    Queued,
    /// Dropped: it did not fit, or its stream is waiting for a keyframe after an earlier drop.
    Dropped,
}

/// A payload tail that stays in the shared sample it came from, held: a range of the sample's
/// bytes and a hold on them (an interleaved connection's output keeps one until the bytes are
/// written). Queued packets are handed out as a [`BodyRef`].
#[derive(Debug, Clone)]
pub struct Body {
    sample: Arc<Vec<u8>>,
    start: usize,
    len: usize,
}

impl Body {
    /// `len` bytes of `sample` from `start`; `None` when that is not within it.
    pub fn new(sample: Arc<Vec<u8>>, start: usize, len: usize) -> Option<Body> {
        (start.checked_add(len)? <= sample.len()).then_some(Body { sample, start, len })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.sample[self.start..self.start + self.len]
    }

    /// How many bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never, for a packet's body).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The same bytes, borrowed.
    pub fn view(&self) -> BodyRef<'_> {
        BodyRef { sample: &self.sample, start: self.start, len: self.len }
    }
}

/// A [`Body`] borrowed from where it is held (a queue's packet): the range of the shared sample
/// and the sample itself, which a holder that must keep the bytes alive clones once per sample
/// rather than once per packet (an `Arc` clone and drop per packet and per hand-over was a third
/// of the queue's time at 600 viewers).
#[derive(Debug, Clone, Copy)]
pub struct BodyRef<'a> {
    sample: &'a Arc<Vec<u8>>,
    start: usize,
    len: usize,
}

impl<'a> BodyRef<'a> {
    /// The bytes.
    pub fn as_slice(&self) -> &'a [u8] {
        &self.sample[self.start..self.start + self.len]
    }

    /// The whole sample the bytes lie in.
    pub fn sample(&self) -> &'a Arc<Vec<u8>> {
        self.sample
    }

    /// Where in the sample the bytes start.
    pub fn start(&self) -> usize {
        self.start
    }

    /// How many bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never, for a packet's body).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// An owned hold on the same bytes.
    pub fn to_body(&self) -> Body {
        Body { sample: Arc::clone(self.sample), start: self.start, len: self.len }
    }
}

/// A queued packet: its own bytes (the whole packet, or its headers when the payload stays in
/// the shared sample) and the rest from the sample.
#[derive(Debug, Clone, Copy)]
pub struct Queued<'a> {
    /// The stream it was queued on.
    pub stream: u8,
    /// The packet's first bytes (all of them when there is no body).
    pub head: &'a [u8],
    /// The payload bytes that follow, in the shared sample.
    pub body: Option<BodyRef<'a>>,
}

impl Queued<'_> {
    /// The packet's length.
    pub fn len(&self) -> usize {
        self.head.len() + self.body.map_or(0, |b| b.len())
    }

    /// Whether the packet is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The packet's bytes, copied (for tests and checks).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = self.head.to_vec();
        if let Some(b) = self.body {
            v.extend_from_slice(b.as_slice());
        }
        v
    }
}

/// A queued packet in 16 bytes: the loop reads every queued packet's entry back after its pacer
/// waited, by when 600 viewers' entries have left the cache, and a load of one was a third of
/// the time of the loop's send path at 40 bytes an entry. MP4 sample sizes are 32-bit, so a
/// body's range in its sample fits; a packet is at most an MTU.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Bytes of `data` (the head).
    len: u32,
    /// Where its payload starts in the oldest [`Held`] sample, and how long it is (0: none).
    body_start: u32,
    body_len: u32,
    stream: u8,
}

impl Entry {
    fn new(len: usize, stream: u8, body: Option<(usize, usize)>) -> Entry {
        let narrow = |n: usize| u32::try_from(n).expect("packets and MP4 samples are under 4 GiB");
        let (start, body_len) = body.unwrap_or((0, 0));
        Entry { len: narrow(len), body_start: narrow(start), body_len: narrow(body_len), stream }
    }

    fn len(&self) -> usize {
        self.len as usize
    }

    fn body(&self) -> Option<(usize, usize)> {
        (self.body_len > 0).then_some((self.body_start as usize, self.body_len as usize))
    }
}

/// A shared sample some queued packets' payloads lie in, and how many of them still do. The
/// packets of one sample are queued together and leave in order, so the oldest entry with a body
/// always refers to the oldest held sample.
#[derive(Debug, Clone)]
struct Held {
    sample: Arc<Vec<u8>>,
    bodies: usize,
}

/// A bounded FIFO of packets for one viewer, admitting whole frames only.
///
/// Packet bytes live back to back in one buffer that is compacted as it drains, so a viewer in
/// steady state allocates nothing per packet; a packet's payload that stays in its shared sample
/// (a [`Body`]) is held, not copied.
#[derive(Debug, Clone)]
pub struct ViewerQueue {
    limits: QueueLimits,
    data: Vec<u8>,
    /// Bytes of `data` already popped.
    head: usize,
    /// Bytes of the queued packets' bodies (in shared samples, not in `data`).
    body_bytes: usize,
    entries: VecDeque<Entry>,
    held: VecDeque<Held>,
    /// Streams that lost a frame and wait for a keyframe (bit `stream`).
    skipping: u64,
    dropped_frames: u64,
    dropped_packets: u64,
}

impl ViewerQueue {
    /// An empty queue with `limits`.
    pub fn new(limits: QueueLimits) -> ViewerQueue {
        ViewerQueue {
            limits,
            data: Vec::new(),
            head: 0,
            body_bytes: 0,
            entries: VecDeque::new(),
            held: VecDeque::new(),
            skipping: 0,
            dropped_frames: 0,
            dropped_packets: 0,
        }
    }

    /// Offers one frame (all packets of an access unit) of `stream` (`< MAX_STREAMS`, e.g. the
    /// RTP channel). A frame is dropped whole when it does not fit, and so is every frame of
    /// that stream after it until a keyframe fits; a keyframe never depends on what was lost.
    pub fn push_frame<'a>(
        &mut self,
        stream: u8,
        keyframe: bool,
        packets: impl IntoIterator<Item = &'a [u8]> + Clone,
    ) -> Offer {
        let (count, bytes) =
            packets.clone().into_iter().fold((0usize, 0usize), |(n, b), p| (n + 1, b + p.len()));
        if self.admit(stream, keyframe, count, bytes) == Offer::Dropped {
            return Offer::Dropped;
        }
        self.compact();
        for p in packets {
            self.data.extend_from_slice(p);
            self.entries.push_back(Entry::new(p.len(), stream, None));
        }
        Offer::Queued
    }

    /// Whether a frame of `count` packets and `bytes` bytes of `stream` is queued, counting a drop.
    fn admit(&mut self, stream: u8, keyframe: bool, count: usize, bytes: usize) -> Offer {
        let bit = 1u64 << (stream % MAX_STREAMS);
        let waiting = self.skipping & bit != 0 && !keyframe;
        let fits = self.entries.len() + count <= self.limits.max_packets
            && self.queued_bytes() + bytes <= self.limits.max_bytes;
        if waiting || !fits {
            self.skipping |= bit;
            self.dropped_frames += 1;
            self.dropped_packets += count as u64;
            return Offer::Dropped;
        }
        self.skipping &= !bit;
        Offer::Queued
    }

    /// [`ViewerQueue::push_frame`] for the packets a packetizer wrote for one sample; `packets`
    /// is left empty. A packet whose payload refers to the shared sample ([`Packets::reference`])
    /// keeps referring to it (a [`Body`]): only its headers are queued here, so the sample's bytes
    /// are copied once, by the kernel, however many viewers send them. Into an empty queue the
    /// packets' buffer is taken whole (swapped for the queue's own, which the packetizer reuses)
    /// rather than copied.
    pub fn push_packets(&mut self, stream: u8, keyframe: bool, packets: &mut Packets) -> Offer {
        let offer = match self.admit(stream, keyframe, packets.len(), packets.total_bytes()) {
            Offer::Dropped => Offer::Dropped,
            Offer::Queued => {
                let swap = self.entries.is_empty();
                if swap {
                    self.head = 0;
                } else {
                    self.compact();
                }
                let mut start = 0;
                let mut bodies = 0;
                for (i, &end) in packets.ends().iter().enumerate() {
                    // An empty body is no body (an entry of its own holds no sample).
                    let body = packets.body(i).filter(|&(_, len)| len > 0);
                    if let Some((_, len)) = body {
                        self.body_bytes += len;
                        bodies += 1;
                    }
                    self.entries.push_back(Entry::new(end - start, stream, body));
                    start = end;
                }
                if !swap {
                    // One copy of all the heads (they lie back to back), not one per packet.
                    self.data.extend_from_slice(packets.own_bytes());
                }
                if bodies > 0 {
                    let sample = Arc::clone(packets.sample().expect("a packet with a body has a sample"));
                    self.held.push_back(Held { sample, bodies });
                }
                if swap {
                    packets.swap_data(&mut self.data);
                }
                Offer::Queued
            }
        };
        packets.clear();
        offer
    }

    /// Offers one packet that stands alone (an RTCP sender report): queued if it fits, otherwise
    /// dropped without touching any stream's keyframe state (the next report replaces it).
    pub fn push_packet(&mut self, stream: u8, packet: &[u8]) -> Offer {
        if self.entries.len() < self.limits.max_packets
            && self.queued_bytes() + packet.len() <= self.limits.max_bytes
        {
            self.compact();
            self.data.extend_from_slice(packet);
            self.entries.push_back(Entry::new(packet.len(), stream, None));
            Offer::Queued
        } else {
            self.dropped_packets += 1;
            Offer::Dropped
        }
    }

    /// The oldest packet, if any.
    #[inline]
    pub fn front(&self) -> Option<Queued<'_>> {
        let e = self.entries.front()?;
        let body = e.body().map(|(start, len)| {
            let sample = &self.held.front().expect("a queued body's sample is held").sample;
            BodyRef { sample, start, len }
        });
        Some(Queued { stream: e.stream, head: &self.data[self.head..self.head + e.len()], body })
    }

    /// Removes the oldest packet (after the engine has sent it, or holds its body).
    #[inline]
    pub fn pop(&mut self) {
        if let Some(e) = self.entries.pop_front() {
            self.head += e.len();
            if let Some((_, len)) = e.body() {
                self.body_bytes -= len;
                if let Some(held) = self.held.front_mut() {
                    held.bodies -= 1;
                    if held.bodies == 0 {
                        self.held.pop_front();
                    }
                }
            }
            if self.entries.is_empty() {
                self.data.clear();
                self.head = 0;
            }
        }
    }

    /// Forgets every queued packet (not counted as dropped: the viewer is leaving).
    pub fn clear(&mut self) {
        self.entries.clear();
        self.held.clear();
        self.data.clear();
        self.head = 0;
        self.body_bytes = 0;
    }

    /// Packets queued.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes queued (the packets' whole length, shared payload included).
    pub fn queued_bytes(&self) -> usize {
        self.data.len() - self.head + self.body_bytes
    }

    /// Frames dropped so far (those that did not fit, and those after them up to a keyframe).
    pub fn dropped_frames(&self) -> u64 {
        self.dropped_frames
    }

    /// Packets dropped so far, in dropped frames and dropped stand-alone packets.
    pub fn dropped_packets(&self) -> u64 {
        self.dropped_packets
    }

    /// Moves the live bytes to the start once the popped prefix is the larger part, so the buffer
    /// never grows past about twice the byte limit.
    fn compact(&mut self) {
        if self.head > 0 && self.head >= self.data.len() / 2 {
            self.data.drain(..self.head);
            self.head = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize, size: usize, tag: u8) -> Vec<Vec<u8>> {
        (0..n).map(|i| vec![tag.wrapping_add(i as u8); size]).collect()
    }

    fn offer(q: &mut ViewerQueue, stream: u8, key: bool, packets: &[Vec<u8>]) -> Offer {
        q.push_frame(stream, key, packets.iter().map(Vec::as_slice))
    }

    fn drain(q: &mut ViewerQueue) -> Vec<(u8, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(p) = q.front() {
            out.push((p.stream, p.to_vec()));
            q.pop();
        }
        out
    }

    #[test]
    fn frames_queue_in_order_and_drain() {
        let mut q = ViewerQueue::new(QueueLimits { max_bytes: 1000, max_packets: 10 });
        assert_eq!(offer(&mut q, 0, true, &frame(2, 100, 1)), Offer::Queued);
        assert_eq!(q.push_packet(1, &[9; 28]), Offer::Queued);
        assert_eq!(offer(&mut q, 0, false, &frame(1, 50, 5)), Offer::Queued);
        assert_eq!((q.len(), q.queued_bytes()), (4, 278));
        let got = drain(&mut q);
        assert_eq!(
            got.iter().map(|(s, p)| (*s, p[0], p.len())).collect::<Vec<_>>(),
            [(0, 1, 100), (0, 2, 100), (1, 9, 28), (0, 5, 50)]
        );
        assert!(q.is_empty());
        assert_eq!(q.dropped_frames(), 0);
    }

    #[test]
    fn overflow_drops_whole_frames_up_to_the_next_keyframe() {
        let mut q = ViewerQueue::new(QueueLimits { max_bytes: 1000, max_packets: 100 });
        assert_eq!(offer(&mut q, 0, true, &frame(6, 100, 0)), Offer::Queued);
        // 600 + 500 > 1000: the frame is dropped whole, nothing of it is queued.
        assert_eq!(offer(&mut q, 0, false, &frame(5, 100, 0)), Offer::Dropped);
        assert_eq!(q.len(), 6);
        // A small delta frame would fit but refers to the lost one: dropped too.
        assert_eq!(offer(&mut q, 0, false, &frame(1, 10, 0)), Offer::Dropped);
        // Another stream (audio) is unaffected.
        assert_eq!(offer(&mut q, 2, true, &frame(1, 10, 0)), Offer::Queued);
        // The viewer catches up; deltas are still dropped until a keyframe.
        drain(&mut q);
        assert_eq!(offer(&mut q, 0, false, &frame(1, 10, 0)), Offer::Dropped);
        assert_eq!(offer(&mut q, 0, true, &frame(3, 100, 0)), Offer::Queued);
        assert_eq!(offer(&mut q, 0, false, &frame(1, 10, 0)), Offer::Queued);
        assert_eq!(q.dropped_frames(), 3);
        assert_eq!(q.dropped_packets(), 5 + 1 + 1);
    }

    #[test]
    fn packetizer_output_is_one_frame() {
        use crate::rtp::{AacPacketizer, StreamConfig};
        let config = StreamConfig { ssrc: 1, payload_type: 97, initial_sequence: 0 };
        let mut aac = AacPacketizer::new(config, 1400).unwrap();
        let mut packets = Packets::new();
        aac.packetize(&[1; 300], 0, &mut packets).unwrap();
        let mut q = ViewerQueue::new(QueueLimits { max_bytes: 400, max_packets: 10 });
        let copy = packets.clone();
        assert_eq!(q.push_packets(2, true, &mut packets), Offer::Queued);
        assert!(packets.is_empty(), "taken");
        packets = copy.clone();
        assert_eq!(q.push_packets(2, true, &mut packets), Offer::Dropped);
        assert_eq!(q.front().map(|p| (p.stream, p.to_vec())), Some((2, copy.get(0).unwrap().to_vec())));
        // Into a queue that holds something, the packets are copied behind it.
        let mut q = ViewerQueue::new(QueueLimits { max_bytes: 1000, max_packets: 10 });
        assert_eq!(q.push_packet(3, &[7; 20]), Offer::Queued);
        packets = copy.clone();
        assert_eq!(q.push_packets(2, true, &mut packets), Offer::Queued);
        assert!(packets.is_empty());
        assert_eq!(drain(&mut q), [(3, vec![7; 20]), (2, copy.get(0).unwrap().to_vec())]);
    }

    #[test]
    fn packets_referring_to_a_shared_sample_queue_their_headers_and_send_the_same_bytes() {
        use crate::rtp::{H264Packetizer, StreamConfig};
        let config = StreamConfig { ssrc: 7, payload_type: 96, initial_sequence: 100 };
        // One access unit: a NAL unit of 3,000 bytes (FU-A fragments) and a small one.
        let mut au = vec![0, 0, 0x0b, 0xb8, 0x65];
        au.extend((0..2999u32).map(|i| i as u8));
        au.extend_from_slice(&[0, 0, 0, 3, 0x41, 1, 2]);
        let sample = Arc::new(au);
        let (mut copied, mut referred) = (Packets::new(), Packets::new());
        H264Packetizer::new(config, 1400, 4).unwrap().packetize(&sample, 9, &mut copied).unwrap();
        referred.reference(&sample);
        H264Packetizer::new(config, 1400, 4).unwrap().packetize(&sample, 9, &mut referred).unwrap();
        assert_eq!((referred.len(), referred.total_bytes()), (copied.len(), copied.total_bytes()));
        for i in 0..copied.len() {
            assert_eq!(referred.to_vec(i).unwrap(), copied.get(i).unwrap(), "packet {i}");
            assert!(referred.body(i).is_some(), "packet {i} refers to the sample");
            assert!(referred.get(i).unwrap().len() <= 14, "only headers are copied");
        }
        let whole: Vec<Vec<u8>> = copied.iter().map(<[u8]>::to_vec).collect();
        // Into an empty queue and behind a queued packet, the packets leave as they were written.
        for ahead in [false, true] {
            let mut q = ViewerQueue::new(QueueLimits::default());
            if ahead {
                q.push_packet(1, &[1; 28]);
            }
            let mut packets = referred.clone();
            assert_eq!(q.push_packets(0, true, &mut packets), Offer::Queued);
            assert_eq!(q.queued_bytes(), copied.total_bytes() + if ahead { 28 } else { 0 });
            let got: Vec<Vec<u8>> =
                drain(&mut q).into_iter().filter(|(s, _)| *s == 0).map(|(_, p)| p).collect();
            assert_eq!(got, whole);
            assert_eq!(q.queued_bytes(), 0);
        }
        assert_eq!(
            Arc::strong_count(&sample),
            2,
            "the queue let go of the sample (one hold is `referred`'s)"
        );
    }

    #[test]
    fn each_frames_sample_is_held_until_its_last_packet_leaves_whatever_is_queued_between() {
        use crate::rtp::{H264Packetizer, StreamConfig};
        let config = StreamConfig { ssrc: 7, payload_type: 96, initial_sequence: 100 };
        // Two access units in samples of their own, each a NAL unit cut into FU-A fragments.
        let sample = |tag: u8| {
            let mut au = vec![0, 0, 0x0b, 0xb8, 0x65];
            au.extend((0..2999u32).map(|i| (i as u8).wrapping_add(tag)));
            Arc::new(au)
        };
        let (first, second) = (sample(0), sample(99));
        let mut packetizer = H264Packetizer::new(config, 1400, 4).unwrap();
        let mut packetize = |s: &Arc<Vec<u8>>| {
            let mut p = Packets::new();
            p.reference(s);
            packetizer.packetize(s, 9, &mut p).unwrap();
            p
        };
        let (mut a, mut b) = (packetize(&first), packetize(&second));
        let expected: Vec<Vec<u8>> = (0..a.len())
            .map(|i| a.to_vec(i).unwrap())
            .chain([vec![5; 28]])
            .chain((0..b.len()).map(|i| b.to_vec(i).unwrap()))
            .collect();
        let (a_packets, room) = (a.len(), a.len() + 1 + b.len());
        let mut q = ViewerQueue::new(QueueLimits { max_bytes: 1 << 20, max_packets: room });
        assert_eq!(q.push_packets(0, true, &mut a), Offer::Queued);
        assert_eq!(q.push_packet(1, &[5; 28]), Offer::Queued);
        // A frame of another stream that does not fit, between the two.
        assert_eq!(offer(&mut q, 2, true, &frame(room, 10, 0)), Offer::Dropped);
        assert_eq!(q.push_packets(0, true, &mut b), Offer::Queued);
        assert_eq!((Arc::strong_count(&first), Arc::strong_count(&second)), (2, 2), "one hold per frame");
        let mut got = Vec::new();
        while let Some(p) = q.front() {
            got.push(p.to_vec());
            q.pop();
            let held_first = Arc::strong_count(&first) == 2;
            assert_eq!(held_first, got.len() < a_packets, "the first sample is let go with its last packet");
        }
        assert_eq!(got, expected);
        assert_eq!(Arc::strong_count(&second), 1);
    }

    #[test]
    fn a_keyframe_that_does_not_fit_keeps_the_stream_waiting() {
        let mut q = ViewerQueue::new(QueueLimits { max_bytes: 10_000, max_packets: 4 });
        assert_eq!(offer(&mut q, 0, true, &frame(5, 10, 0)), Offer::Dropped, "over the packet bound");
        assert_eq!(offer(&mut q, 0, false, &frame(1, 10, 0)), Offer::Dropped);
        assert_eq!(offer(&mut q, 0, true, &frame(4, 10, 0)), Offer::Queued);
        assert_eq!(q.dropped_frames(), 2);
    }

    #[test]
    fn stand_alone_packets_drop_without_touching_keyframe_state() {
        let mut q = ViewerQueue::new(QueueLimits { max_bytes: 100, max_packets: 10 });
        assert_eq!(offer(&mut q, 0, true, &frame(1, 90, 0)), Offer::Queued);
        assert_eq!(q.push_packet(1, &[0; 28]), Offer::Dropped);
        assert_eq!(offer(&mut q, 0, false, &frame(1, 10, 0)), Offer::Queued);
        assert_eq!((q.dropped_frames(), q.dropped_packets()), (0, 1));
    }

    #[test]
    fn buffer_stays_bounded_under_steady_partial_draining() {
        let limits = QueueLimits { max_bytes: 1000, max_packets: 100 };
        let mut q = ViewerQueue::new(limits);
        for i in 0..10_000u32 {
            let _ = offer(&mut q, 0, i % 30 == 0, &frame(3, 97, i as u8));
            // Drain a bit less than arrives on average: the queue fills, frames drop, never grows.
            for _ in 0..(2 + i % 2) {
                q.pop();
            }
            assert!(q.queued_bytes() <= limits.max_bytes);
            assert!(q.data.capacity() <= 4 * limits.max_bytes, "buffer grew to {}", q.data.capacity());
        }
        assert!(q.dropped_frames() > 0);
        // What is queued is whole frames' packets in order: each packet's bytes are uniform.
        for (_, p) in drain(&mut q) {
            assert!(p.iter().all(|b| *b == p[0]));
        }
    }
}
