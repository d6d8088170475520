//! Whether an RTSP viewer is admitted or refused, and why: every refusal for lack of capacity is
//! decided here, with the status it is answered with, and the loop's room comes from here.
//!
//! A new session (`SETUP` without a `Session` header) is refused with 503 Service Unavailable when
//! its connection holds [`RtspConfig::max_sessions_per_connection`], the loop's table holds
//! [`RtspConfig::max_sessions`], or its client address holds [`RtspConfig::max_sessions_per_ip`]
//! ([`Refused::ConnectionFull`], [`Refused::LoopFull`], [`Refused::AddressFull`]); with 453 Not
//! Enough Bandwidth when the loop has no room, [`RtspConfig::max_viewers`] places are held over
//! every loop, or the last place went to another loop before this one took it
//! ([`Refused::NoRoom`]). A session's first `PLAY` is refused 453 too when the room shrank since
//! its `SETUP` below the streams already started ([`Refused::NoRoom`]: those come first). Only
//! [`Refused::NoRoom`] counts as a viewer refused (`sluice_rtsp_viewers_refused_total`,
//! [`is_viewer_refused`]). The session code asks [`new_session`], [`take_place`] and
//! [`first_play`]; the server core sets the room from [`first_room`] and [`room`].
//!
//! Not decided here: refusals of a presentation (not found, not streamable, still warming: the
//! catalogue's and [`crate::playable::playable`]'s), of a path the access policy does not allow
//! (the server's catalogue), and the per-session bounds on tracks and interleaved channels (the
//! session's own SETUP).
//!
//! The room under [`Overload::Refuse`] comes from the loop's load window by window: a cost model,
//! sans-I/O (the windows' numbers are arguments).
//!
//! A viewer's cost is what one more streaming viewer adds to the loop's busy share at the current
//! bit rate mix. Two estimates of it, each smoothed over windows: the mean (busy share over the
//! viewers the window held on average, weighted by time, so a ramp's newcomers count for the part
//! of the window they streamed), and the marginal (the change in busy share over the change in
//! viewers between windows far enough apart), which is the larger when the cost per viewer grows
//! with their number (the kernel's UDP path near a core's limit). The larger of the two, the
//! marginal bounded to [`MARGINAL_MAX`] times the mean so one noisy pair of windows does not shut
//! the door, is what each more viewer is counted at, from the load the loop has now: the room is
//! the viewers streaming plus what is left of [`ADMIT_BUSY`] over that cost. The marginal is
//! never taken below the mean, though a turn of the loop has a cost of its own and a viewer more
//! costs less than the average one: taken down to half the mean, the room grew from 453 viewers at
//! 0.61 busy to 633, the loop's real cost rose from 0.61 to 0.85 at 589 and it fell behind
//! (shared machine, 2026-11-26), where the mean stops at 594. What a viewer costs is now almost
//! all the kernel's: at 100 viewers of the 23 Mbps file (2,167 RTP packets a second each) the
//! epoll loop spent 1.0 us of CPU per packet, 5.5 of its 6.6 s in system time, so a viewer is
//! about 0.2% of the loop, read from the busy share as before (2026-11-26, shared machine).
//! Every session held counts at full cost, those set
//! up or just started included (pending admissions are load before it shows), and at most
//! [`NEWCOMERS_SHARE`] of the sessions held (at least [`FIRST_ADMITS`]) are admitted a window,
//! before anything is known too: a fast ramp waits a window for its cost to show rather than
//! overshooting on an old estimate. Late sends stop admission until the loop keeps time again. It
//! owns the estimates, not the windows' measurement (the [`RtspServer`](crate::RtspServer) does
//! that) or the sessions held (the [`SessionTable`]'s).

use std::net::IpAddr;

use sluice_proto::rtsp::RtspError;

use crate::config::{Overload, RtspConfig};
use crate::table::SessionTable;

/// Why a viewer is refused for lack of capacity; see the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Its connection holds [`RtspConfig::max_sessions_per_connection`] sessions: 503.
    ConnectionFull,
    /// The loop's table holds [`RtspConfig::max_sessions`]: 503.
    LoopFull,
    /// Its client address holds [`RtspConfig::max_sessions_per_ip`]: 503.
    AddressFull,
    /// No room on the loop or no place of [`RtspConfig::max_viewers`] left: 453.
    NoRoom,
}

impl From<Refused> for RtspError {
    fn from(refused: Refused) -> RtspError {
        match refused {
            Refused::ConnectionFull | Refused::LoopFull | Refused::AddressFull => RtspError::Overloaded,
            Refused::NoRoom => RtspError::NotEnoughBandwidth,
        }
    }
}

/// Whether a new session from `peer`, whose connection holds `connection_sessions` live
/// sessions, may be set up on `table` (its place is taken by [`take_place`] once the
/// presentation is known to be playable).
pub fn new_session(table: &SessionTable, connection_sessions: usize, peer: IpAddr) -> Result<(), Refused> {
    let config = &table.config;
    if connection_sessions >= config.max_sessions_per_connection {
        return Err(Refused::ConnectionFull);
    }
    if table.sessions.len() >= config.max_sessions {
        return Err(Refused::LoopFull);
    }
    let per_ip = config.max_sessions_per_ip;
    if per_ip > 0 && table.sessions.values().filter(|s| s.peer == peer).count() >= per_ip {
        return Err(Refused::AddressFull);
    }
    // This loop's room, then the server's bound (taken for real by `take_place`: the other loops
    // may have taken the last place since).
    if table.sessions.len() >= table.admits() || table.budget.is_full() {
        return Err(Refused::NoRoom);
    }
    Ok(())
}

/// Takes one of the server's [`RtspConfig::max_viewers`] places for a new session.
pub fn take_place(table: &SessionTable) -> Result<(), Refused> {
    if table.budget.take() {
        Ok(())
    } else {
        Err(Refused::NoRoom)
    }
}

/// Whether a session's first `PLAY` (its streams not started yet) may start them: the room may
/// have shrunk since its `SETUP`, and the streams already started come first.
pub fn first_play(table: &SessionTable) -> Result<(), Refused> {
    if table.started() >= table.admits() {
        return Err(Refused::NoRoom);
    }
    Ok(())
}

/// Whether a request refused with `error` counts as a viewer refused for lack of room.
pub fn is_viewer_refused(error: &RtspError) -> bool {
    *error == RtspError::NotEnoughBandwidth
}

/// The room of a loop under `config` before its first load window closes: [`FIRST_ADMITS`] under
/// [`Overload::Refuse`], the table's own (no bound but [`RtspConfig::max_viewers`]) under
/// [`Overload::Degrade`].
pub fn first_room(config: &RtspConfig) -> Option<usize> {
    match config.overload {
        Overload::Degrade => None,
        Overload::Refuse => Some(FIRST_ADMITS),
    }
}

/// The room of a loop under `config` after `window` closed: everyone under
/// [`Overload::Degrade`] (up to [`RtspConfig::max_viewers`], which [`new_session`] checks),
/// the cost model's estimate under [`Overload::Refuse`].
pub fn room(config: &RtspConfig, admission: &mut Admission, window: Window) -> usize {
    match config.overload {
        Overload::Degrade => usize::MAX,
        Overload::Refuse => admission.room(window),
    }
}

/// Share of the loop's time (CPU time over wall time) the refuse policy fills with viewers. The
/// rest absorbs keyframes arriving together and the ramp's own SETUPs. At 0.9 the estimate admitted 190 epoll viewers of whom 1 stayed perfect, and 175 io_uring
/// viewers, all perfect (2026-11-24): the loop's edge lies in between.
pub const ADMIT_BUSY: f64 = 0.8;
/// Viewers (time-weighted mean over a window) the first estimate of a viewer's cost needs: fewer
/// are mostly the loop's fixed cost.
pub const ESTIMATE_VIEWERS: f64 = 16.0;
/// Newcomers admitted in a window at least, and all that are admitted while no cost is known: a
/// fifth of the 23 Mbps viewers one loop of this project's machine carried perfectly (189 and 175,
/// docs/BENCHMARKS.md), about a window and a half of the lab's 4 s ramp of 300.
pub const FIRST_ADMITS: usize = 48;
/// Newcomers admitted in one window at most, as a share of the sessions held: 48, 96, 144, 216,
/// 324, 486, 729 and 1,093 places window by window, room for about 900 of 1,500 viewers ramped
/// over 4 s. Doubling a window (tried, with the load from CPU time alone) overshot on a shared
/// machine: 497 to 646 admitted where 491 stayed perfect (2026-11-26).
pub const NEWCOMERS_SHARE: f64 = 0.5;
/// Change in the mean viewers between two windows that makes a marginal cost sample; closer ones
/// are mostly noise.
pub const MARGINAL_SPREAD: f64 = 8.0;
/// The marginal cost counts up to this many times the mean cost.
pub const MARGINAL_MAX: f64 = 1.5;

/// One closed load window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    /// Share of the window the loop spent working.
    pub busy: f64,
    /// Viewers streaming, on average over the window (weighted by time).
    pub viewers: f64,
    /// Samples queued late in the window.
    pub late_sends: usize,
    /// Sessions held at its end (set up or streaming).
    pub sessions: usize,
}

/// The cost estimates; see the module docs.
#[derive(Debug, Default, Clone)]
pub struct Admission {
    /// Mean busy share of one viewer, smoothed.
    mean: Option<f64>,
    /// Marginal busy share of one more viewer, smoothed.
    marginal: Option<f64>,
    /// The last window a marginal sample was taken against: (viewers, busy).
    anchor: Option<(f64, f64)>,
}

impl Admission {
    /// The busy share one more viewer is counted at now, if known.
    pub fn cost(&self) -> Option<f64> {
        let mean = self.mean?;
        let marginal = self.marginal.map_or(0.0, |m| m.min(MARGINAL_MAX * mean));
        Some(mean.max(marginal).max(1e-6))
    }

    /// Takes a closed window into the estimates; returns the sessions admitted at most until the
    /// next one closes.
    pub fn room(&mut self, w: Window) -> usize {
        if w.viewers >= ESTIMATE_VIEWERS {
            let sample = w.busy / w.viewers;
            self.mean = Some(self.mean.map_or(sample, |m| (m + sample) / 2.0));
            match self.anchor {
                Some((viewers, busy)) if (w.viewers - viewers).abs() >= MARGINAL_SPREAD => {
                    let sample = (w.busy - busy) / (w.viewers - viewers);
                    if sample > 0.0 {
                        self.marginal = Some(self.marginal.map_or(sample, |m| (m + sample) / 2.0));
                    }
                    self.anchor = Some((w.viewers, w.busy));
                }
                Some(_) => {}
                None => self.anchor = Some((w.viewers, w.busy)),
            }
        }
        let newcomers = FIRST_ADMITS.max((w.sessions as f64 * NEWCOMERS_SHARE) as usize);
        match self.cost() {
            None => w.sessions + newcomers,
            // Late already: no newcomer until the loop keeps time again.
            Some(_) if w.late_sends > 0 => w.sessions,
            // From the load now, each more viewer at its cost (the mean alone gives ADMIT_BUSY /
            // mean, as busy is then the viewers times the mean).
            Some(cost) => {
                let more = ((ADMIT_BUSY - w.busy) / cost).max(-w.viewers);
                ((w.viewers + more).max(0.0) as usize).min(w.sessions + newcomers)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_has_its_status_and_only_no_room_counts_as_a_viewer_refused() {
        use Refused::*;
        for (refused, status) in [(ConnectionFull, 503), (LoopFull, 503), (AddressFull, 503), (NoRoom, 453)] {
            let error = RtspError::from(refused);
            assert_eq!(u16::from(error.status()), status, "{refused:?}");
            assert_eq!(is_viewer_refused(&error), refused == NoRoom, "{refused:?}");
        }
    }

    #[test]
    fn a_new_session_meets_the_connection_bound_then_the_room_then_the_servers_places() {
        let config = RtspConfig { max_sessions_per_connection: 2, max_viewers: 1, ..RtspConfig::default() };
        let mut table = SessionTable::with_entropy(config, || 1);
        let peer = IpAddr::from([127, 0, 0, 1]);
        assert_eq!(new_session(&table, 1, peer), Ok(()));
        assert_eq!(new_session(&table, 2, peer), Err(Refused::ConnectionFull));
        table.set_room(0);
        assert_eq!(new_session(&table, 1, peer), Err(Refused::NoRoom));
        assert_eq!(first_play(&table), Err(Refused::NoRoom), "no stream started, no room for one");
        table.set_room(1);
        assert_eq!(first_play(&table), Ok(()));
        // The one place of max_viewers, taken (by this loop or another sharing the budget).
        assert_eq!(take_place(&table), Ok(()));
        assert_eq!(take_place(&table), Err(Refused::NoRoom));
        assert_eq!(new_session(&table, 1, peer), Err(Refused::NoRoom));
        table.budget.give_back(1);
    }

    #[test]
    fn the_room_is_the_cost_models_under_refuse_only() {
        let refuse = RtspConfig { overload: Overload::Refuse, ..RtspConfig::default() };
        let degrade = RtspConfig { overload: Overload::Degrade, ..RtspConfig::default() };
        assert_eq!(first_room(&refuse), Some(FIRST_ADMITS));
        assert_eq!(first_room(&degrade), None);
        let late = Window { busy: 0.5, viewers: 50.0, late_sends: 3, sessions: 50 };
        assert_eq!(room(&degrade, &mut Admission::default(), late), usize::MAX);
        assert_eq!(room(&refuse, &mut Admission::default(), late), 50, "late: no newcomer");
    }

    fn window(busy: f64, viewers: f64, sessions: usize) -> Window {
        Window { busy, viewers, late_sends: 0, sessions }
    }

    #[test]
    fn admits_in_steps_until_the_cost_is_known_then_to_the_projected_limit() {
        let mut a = Admission::default();
        assert_eq!(a.room(window(0.05, 4.0, 8)), 8 + FIRST_ADMITS, "too few viewers to estimate");
        // 0.5% a viewer: room for 160, but no more than FIRST_ADMITS (or half again the sessions
        // held) newcomers a window.
        assert_eq!(a.room(window(0.2, 40.0, 40)), 40 + FIRST_ADMITS);
        // 1% now: the mean is 0.75%, the margin 2%, bounded to 1.5 times the mean (1.125%); from
        // 0.6 busy at 60 viewers that leaves room for 17 more.
        assert_eq!(a.room(window(0.6, 60.0, 80)), 77);
        // Late: no newcomer, whatever the estimate.
        let late = Window { late_sends: 3, ..window(0.5, 50.0, 50) };
        assert_eq!(a.room(late), 50);
    }

    #[test]
    fn a_cost_that_grows_with_the_viewers_counts_at_its_margin() {
        let mut a = Admission::default();
        // busy = v/100 + (v/100)^2 / 2: 0.29 at 26, 0.57 at 46; the mean cost is 1.23% at 46,
        // the margin 1.36%.
        let busy = |v: f64| v / 100.0 + (v / 100.0).powi(2) / 2.0;
        a.room(window(busy(26.0), 26.0, 26));
        let room = a.room(window(busy(46.0), 46.0, 46));
        let mean = busy(46.0) / 46.0;
        assert!(room < (ADMIT_BUSY / mean) as usize, "room {room} from the mean alone");
        assert!(busy(room as f64) <= 1.0, "room {room} costs {}", busy(room as f64));
    }

    #[test]
    fn one_noisy_pair_of_windows_bounds_the_margin() {
        let mut a = Admission::default();
        a.room(window(0.2, 20.0, 20));
        // A keyframe-heavy window: +0.4 for +10 viewers.
        let room = a.room(window(0.6, 30.0, 30));
        assert!(room >= (ADMIT_BUSY / (MARGINAL_MAX * 0.015)) as usize, "{room}");
    }

    #[test]
    fn a_viewer_more_is_never_counted_below_the_mean() {
        let mut a = Admission::default();
        // busy = 0.1 + v/1000: the loop's own 10% makes the mean 0.2% at 100 viewers and 0.15% at
        // 200 (smoothed: 0.175%), where one more viewer costs 0.1%; counted at the mean, the room
        // is 200 + (0.8 - 0.3) / 0.175% = 485 sessions (the 400 held included).
        let busy = |v: f64| 0.1 + v / 1000.0;
        a.room(window(busy(100.0), 100.0, 100));
        let room = a.room(window(busy(200.0), 200.0, 400));
        assert_eq!(room, 485);
    }
}
