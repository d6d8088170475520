//! One virtual viewer: fetches the manifest, the media playlists and init segments it plays,
//! then the segments of its rendition (and of the separate audio track, interleaved by media
//! time) in order, paced as a player or as fast as allowed, switching renditions by measured
//! throughput when asked to. It owns one viewer's clock (start-up, playhead, stalls) and counts;
//! the shared histograms and live counters belong to the run.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::report::{EndReason, ViewerResult};
use super::{Abr, Pacing, Plan, PlanTrack};
use crate::client::{Connection, ConnectionMode, ExpectedStatus};
use crate::stats::Outcome;
use crate::target::Target;

/// What a request was for: segments have their own latency histogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Document,
    Init,
    Segment,
}

/// A finished request.
struct Fetched {
    ok: bool,
    body_bytes: u64,
    took: Duration,
    at: Instant,
}

/// The viewer's connections, one per server address (a manifest may point elsewhere).
struct Fetcher<'a> {
    plan: &'a Plan,
    conns: Vec<(SocketAddr, Connection)>,
}

impl Fetcher<'_> {
    /// Fetches `target`; `None` when the run's deadline came first.
    async fn get(&mut self, target: &Target, kind: Kind, v: &mut ViewerResult) -> Option<Fetched> {
        let now = Instant::now();
        if now >= self.plan.deadline {
            return None;
        }
        let conn = match self.conns.iter().position(|(a, _)| *a == target.addr) {
            Some(i) => &mut self.conns[i].1,
            None => {
                self.conns
                    .push((target.addr, Connection::new(ConnectionMode::KeepAlive, ExpectedStatus::Success)));
                let last = self.conns.len() - 1;
                &mut self.conns[last].1
            }
        };
        let deadline = (now + self.plan.timeout).min(self.plan.deadline);
        let record = conn.request(target, now, deadline).await;
        let at = Instant::now();
        let body_bytes = conn.body_bytes();
        let ok = record.outcome == Outcome::Ok;
        let live = &self.plan.live;
        if !ok && at >= self.plan.deadline {
            // Cut by the end of the run, not failed.
            return None;
        }
        live.bytes.fetch_add(body_bytes, Ordering::Relaxed);
        v.requests += 1;
        if ok {
            match kind {
                Kind::Segment => {
                    v.segments += 1;
                    v.segment_bytes += body_bytes;
                    live.segments.fetch_add(1, Ordering::Relaxed);
                }
                Kind::Init => v.init_bytes += body_bytes,
                Kind::Document => v.document_bytes += body_bytes,
            }
        } else {
            v.failed_requests += 1;
            live.viewers.failed.fetch_add(1, Ordering::Relaxed);
            if v.error.is_none() {
                let why = match (record.outcome, record.status) {
                    (Outcome::Failed(k), Some(s)) => format!("{} (status {s})", k.name()),
                    (Outcome::Failed(k), None) => k.name().to_string(),
                    _ => "dropped".to_string(),
                };
                v.error = Some(format!("{why}: {}", target.url));
            }
        }
        {
            let mut stats = self.plan.stats.lock().unwrap_or_else(|p| p.into_inner());
            match kind {
                Kind::Segment if ok => stats.segment_latency.record(record.latency),
                Kind::Document | Kind::Init if ok => stats.document_latency.record(record.latency),
                _ => {}
            }
            if let Outcome::Failed(k) = record.outcome {
                stats.errors.add(k);
            }
        }
        Some(Fetched { ok, body_bytes, took: record.latency, at })
    }
}

/// The position of one track being played.
struct Cursor {
    /// Next segment index in the track.
    next: usize,
    /// Media time up to which segments have been fetched (or skipped after failing).
    buffered_end: f64,
}

/// The viewer's playback clock.
struct Clock {
    playing_since: Option<Instant>,
    /// Time spent stalled since playback began.
    stalled: Duration,
}

impl Clock {
    /// The wall-clock instant at which media time `t` plays, when playing.
    fn plays_at(&self, t: f64) -> Option<Instant> {
        self.playing_since.map(|s| s + self.stalled + Duration::from_secs_f64(t.max(0.0)))
    }
}

/// Runs viewer `index` from `at` until its stream ends or the run's deadline.
pub(crate) async fn run_viewer(index: usize, at: Instant, plan: &Plan) -> ViewerResult {
    let mut v = ViewerResult::new(
        index,
        at.saturating_duration_since(plan.run_start).as_millis() as u64,
        plan.renditions.len(),
    );
    tokio::time::sleep_until(at).await;
    plan.live.viewers.started.fetch_add(1, Ordering::Relaxed);
    v.end = play(plan, &mut v).await;
    v
}

async fn play(plan: &Plan, v: &mut ViewerResult) -> EndReason {
    let started = Instant::now();
    let mut fetcher = Fetcher { plan, conns: Vec::new() };
    let Some(manifest) = fetcher.get(&plan.manifest, Kind::Document, v).await else {
        return EndReason::Deadline;
    };
    if !manifest.ok {
        return EndReason::Failed;
    }
    // Switching viewers start at the first rendition listed, as HLS players do.
    let mut current = plan.fixed.unwrap_or(0);
    let bandwidths: Vec<u64> = plan.renditions.iter().map(|r| r.bandwidth).collect();
    let mut playlist_fetched = vec![false; plan.renditions.len()];
    let mut init_fetched = vec![false; plan.renditions.len()];
    let audio: Option<&PlanTrack> = plan.renditions[current].audio.and_then(|a| plan.audio.get(a));
    // Start-up: the rendition's media playlist and init, and the audio's.
    if !prepare(&mut fetcher, plan, current, &mut playlist_fetched, &mut init_fetched, v).await {
        return EndReason::Deadline;
    }
    if let Some(a) = audio {
        let steps =
            a.playlist.iter().map(|t| (t, Kind::Document)).chain(a.init.iter().map(|t| (t, Kind::Init)));
        for (target, kind) in steps {
            if fetcher.get(target, kind, v).await.is_none() {
                return EndReason::Deadline;
            }
        }
    }
    let total = plan.renditions[current].segments.last().map_or(0.0, |s| s.start + s.duration);
    let startup_buffer = plan.buffer.min(total);
    let mut video = Cursor { next: 0, buffered_end: 0.0 };
    let mut sound = Cursor { next: 0, buffered_end: 0.0 };
    let mut clock = Clock { playing_since: None, stalled: Duration::ZERO };
    let mut abr = Abr::new();
    loop {
        let video_track = &plan.renditions[current];
        let video_next = video_track.segments.get(video.next);
        let audio_next = audio.and_then(|a| a.segments.get(sound.next));
        // The track whose next segment starts first; video on a tie.
        let (segment, is_audio) = match (video_next, audio_next) {
            (None, None) => break,
            (Some(s), None) => (s, false),
            (None, Some(a)) => (a, true),
            (Some(s), Some(a)) => {
                if a.start < s.start {
                    (a, true)
                } else {
                    (s, false)
                }
            }
        };
        if plan.pacing == Pacing::RealTime {
            // Asked for when the playhead comes within the buffer of it.
            if let Some(when) = clock.plays_at(segment.start - plan.buffer) {
                if when >= plan.deadline {
                    return EndReason::Deadline;
                }
                tokio::time::sleep_until(when).await;
            }
        }
        let Some(got) = fetcher.get(&segment.target, Kind::Segment, v).await else {
            return EndReason::Deadline;
        };
        let cursor = if is_audio { &mut sound } else { &mut video };
        cursor.next += 1;
        cursor.buffered_end = segment.start + segment.duration;
        if got.ok {
            if plan.pacing == Pacing::RealTime {
                if let Some(due) = clock.plays_at(segment.start) {
                    if got.at > due {
                        // The playhead reached this segment before it arrived: playback waited.
                        v.stalls += 1;
                        let waited = got.at - due;
                        v.stall_ms += waited.as_millis() as u64;
                        clock.stalled += waited;
                        plan.live.stalls.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            if !is_audio {
                v.segments_by_rendition[current] += 1;
            }
        }
        if clock.playing_since.is_none() {
            let buffered = match audio {
                Some(a) if sound.next < a.segments.len() || video.next < video_track.segments.len() => {
                    video.buffered_end.min(sound.buffered_end)
                }
                _ => video.buffered_end,
            };
            let done = video.next >= video_track.segments.len()
                && audio.is_none_or(|a| sound.next >= a.segments.len());
            if buffered + 1e-6 >= startup_buffer || done {
                clock.playing_since = Some(got.at);
                v.startup_ms = Some(got.at.saturating_duration_since(started).as_millis() as u64);
                plan.live.viewers.playing.fetch_add(1, Ordering::Relaxed);
                let mut stats = plan.stats.lock().unwrap_or_else(|p| p.into_inner());
                stats.startup.record(got.at.saturating_duration_since(started));
            }
        }
        if !is_audio && got.ok && plan.fixed.is_none() {
            abr.sample(got.took, got.body_bytes);
            let next = abr.choose(&bandwidths, current);
            if next != current {
                if bandwidths[next] > bandwidths[current] {
                    v.switches_up += 1;
                } else {
                    v.switches_down += 1;
                }
                current = next;
                if !prepare(&mut fetcher, plan, current, &mut playlist_fetched, &mut init_fetched, v).await {
                    return EndReason::Deadline;
                }
                // Carry on from the media time already buffered, in the new rendition.
                let segments = &plan.renditions[current].segments;
                video.next = segments
                    .iter()
                    .position(|s| s.start + 1e-3 >= video.buffered_end)
                    .unwrap_or(segments.len());
            }
        }
    }
    if clock.playing_since.is_none() {
        // Nothing arrived to play (every segment failed).
        return EndReason::Failed;
    }
    if plan.pacing == Pacing::RealTime {
        // Every segment is in; the viewer stays until its playhead reaches the end, as a player
        // does, so that a run lasts as long as the stream plays.
        let end = video.buffered_end.max(sound.buffered_end);
        if let Some(at) = clock.plays_at(end) {
            tokio::time::sleep_until(at.min(plan.deadline)).await;
        }
    }
    EndReason::Complete
}

/// Fetches rendition `r`'s media playlist and init segment, each the first time it is played;
/// `false` when the deadline came first.
async fn prepare(
    fetcher: &mut Fetcher<'_>,
    plan: &Plan,
    r: usize,
    playlist_fetched: &mut [bool],
    init_fetched: &mut [bool],
    v: &mut ViewerResult,
) -> bool {
    let track = &plan.renditions[r];
    if let Some(p) = &track.playlist {
        if !playlist_fetched[r] {
            playlist_fetched[r] = true;
            if fetcher.get(p, Kind::Document, v).await.is_none() {
                return false;
            }
        }
    }
    if let Some(i) = &track.init {
        if !init_fetched[r] {
            init_fetched[r] = true;
            if fetcher.get(i, Kind::Init, v).await.is_none() {
                return false;
            }
        }
    }
    true
}
