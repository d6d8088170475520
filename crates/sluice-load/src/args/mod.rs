//! The load generator's options as one typed definition: the flags of `sluice load http` and
//! `sluice load rtsp` (clap derives their parsing and `--help` from these types), what they turn
//! into ([`LoadConfig`](crate::LoadConfig), [`PlayerConfig`](crate::player::PlayerConfig),
//! [`RtspConfig`](crate::rtsp::RtspConfig)), and the command line that asks for them again
//! ([`HttpArgs::to_args`], [`RtspArgs::to_args`]).
//!
//! The binary parses these types; the lab builds them field by field, so every option is
//! spelled once, here. It runs nothing and prints nothing (the binary's `load` command does).

mod http;
mod rtsp;
mod values;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, FromArgMatches, ValueEnum};

pub use http::HttpArgs;
pub use rtsp::RtspArgs;

use crate::LoadError;

/// Why the flags do not make a run.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// Flags that contradict each other or leave the run without what it needs.
    #[error("{0}")]
    Flags(String),
    /// A value the library refuses (a target, a stage, a header, the settings as a whole).
    #[error(transparent)]
    Load(#[from] LoadError),
}

/// Flags every protocol takes.
#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct CommonFlags {
    /// No live progress line.
    #[arg(long)]
    pub no_progress: bool,
    /// No end-of-run summary on stdout.
    #[arg(long, short)]
    pub quiet: bool,
    /// Allow targets outside loopback (never point this at a machine you do not own).
    #[arg(long)]
    pub allow_non_loopback: bool,
    /// Serve a live dashboard of the run at this address (open http://ADDR/ in a browser).
    #[arg(long, value_name = "ADDR")]
    pub dashboard: Option<std::net::SocketAddr>,
    /// Write the run's charts to this HTML file at the end (one file, works offline).
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
}

impl CommonFlags {
    fn to_args(&self, out: &mut Vec<String>) {
        flag(out, "--no-progress", self.no_progress);
        flag(out, "--quiet", self.quiet);
        flag(out, "--allow-non-loopback", self.allow_non_loopback);
        option(out, "--dashboard", self.dashboard);
        option(out, "--report", self.report.as_ref().map(|p| p.display()));
    }
}

/// Whether the viewers' UDP sockets take GRO messages whole.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnOff {
    /// `UDP_GRO` on: a burst the server sends as one GSO message arrives as one message.
    On,
    /// Every read is one datagram, as for players without GRO.
    Off,
}

/// The flags of `T` at their defaults, as clap gives them for a command line without them.
fn defaults<T: Args + FromArgMatches>(positional: &[&str]) -> T {
    let command = T::augment_args(clap::Command::new("defaults").no_binary_name(true));
    let matches = command.get_matches_from(positional);
    T::from_arg_matches(&matches).unwrap_or_else(|e| panic!("defaults of the load flags: {e}"))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::duration_text::parse(s)
}

/// The one size parser, for flags that are buffer lengths.
fn parse_size_usize(s: &str) -> Result<usize, String> {
    sluice_proto::size_text::parse_usize(s)
}

/// `name` when `on`.
fn flag(out: &mut Vec<String>, name: &str, on: bool) {
    if on {
        out.push(name.to_string());
    }
}

/// `name value` when there is a value.
fn option(out: &mut Vec<String>, name: &str, value: Option<impl std::fmt::Display>) {
    if let Some(v) = value {
        out.extend([name.to_string(), v.to_string()]);
    }
}

/// `name value` for each value of a repeatable flag.
fn each(out: &mut Vec<String>, name: &str, values: &[String]) {
    for v in values {
        out.extend([name.to_string(), v.clone()]);
    }
}

/// The value-enum's spelling on the command line.
fn value_name(v: impl ValueEnum) -> String {
    v.to_possible_value().map(|p| p.get_name().to_string()).unwrap_or_default()
}

/// `word` as a shell reads it back: quoted when it has spaces or quotes, so a report's command
/// can be pasted as it is.
pub fn shell_word(word: &str) -> String {
    if !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./,:=@+%".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Words joined for a shell, each as [`shell_word`] writes it.
pub fn shell_line(words: &[String]) -> String {
    words.iter().map(|w| shell_word(w)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::player::{Pacing, RenditionChoice};
    use crate::rtsp::RtspTransport;
    use crate::{ConnectionMode, Method};

    fn parse<T: Args + FromArgMatches>(words: &[String]) -> T {
        let command = T::augment_args(clap::Command::new("t").no_binary_name(true));
        let matches = command.try_get_matches_from(words).unwrap_or_else(|e| panic!("{words:?}: {e}"));
        T::from_arg_matches(&matches).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn http_flags_written_back_parse_to_the_same_options() {
        let mut given = HttpArgs {
            urls: vec!["2=http://127.0.0.1:1/a".into(), "http://127.0.0.1:1/b c".into()],
            vus: Some(3),
            duration: Some(Duration::from_millis(1500)),
            requests: Some(9),
            think: Some(Duration::from_millis(100)),
            rate: Some(2.5),
            stages: vec!["rate:10:5s".into(), "pause:1s".into()],
            start_at: Some(Duration::from_secs(2)),
            connections: Some(ConnectionMode::PerRequest),
            max_connections: Some(7),
            max_pending: Some(8),
            timeout: Some(Duration::from_secs(30)),
            threads: Some(2),
            method: Method::Head,
            headers: vec!["Range: bytes=0-1".into()],
            expect_status: Some(206),
            thresholds: vec!["p99<50ms".into()],
            json: Some("out it's.json".into()),
            csv: Some("s.csv".into()),
            ..HttpArgs::default()
        };
        given.common.quiet = true;
        given.common.dashboard = Some("127.0.0.1:9".parse().unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(parse::<HttpArgs>(&given.to_args()), given);
        let player = HttpArgs {
            hls: Some("http://127.0.0.1:1/m.m3u8".into()),
            ramp: Some(Duration::from_secs(10)),
            pace: Some(Pacing::Fast),
            buffer: Some(Duration::from_secs(4)),
            rendition: Some(RenditionChoice::MaxBandwidth(3_000_000)),
            ..HttpArgs::default()
        };
        assert_eq!(parse::<HttpArgs>(&player.to_args()), player);
        assert!(HttpArgs::default().to_args().is_empty(), "defaults are left out");
    }

    #[test]
    fn rtsp_flags_written_back_parse_to_the_same_options() {
        let mut given = RtspArgs::new("rtsp://127.0.0.1:1/a.mp4");
        assert_eq!(given.to_args(), ["rtsp://127.0.0.1:1/a.mp4"]);
        given.clients = 5;
        given.transport = RtspTransport::Udp;
        given.ramp = Duration::from_secs(2);
        given.duration = Some(Duration::from_secs(60));
        given.expect_samples = Some(899);
        given.idle_end = Duration::from_secs(1);
        given.setup_timeout = Duration::from_secs(4);
        given.video_only = true;
        given.udp_rcvbuf = 1 << 20;
        given.udp_gro = OnOff::Off;
        given.threads = Some(3);
        given.thresholds = vec!["perfect>99%".into()];
        let words = given.to_args();
        assert_eq!(parse::<RtspArgs>(&words), given);
        assert!(given
            .command_line()
            .starts_with("sluice load rtsp rtsp://127.0.0.1:1/a.mp4 --clients 5 --transport udp"));
    }
}
