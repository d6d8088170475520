//! `sluice load rtsp`'s flags ([`RtspArgs`]): the viewers' options, the [`RtspConfig`] they
//! make and the command line that asks for them again. It runs nothing (`crate::rtsp`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{
    defaults, each, flag, option, parse_duration, parse_size_usize, value_name, ArgsError, CommonFlags, OnOff,
};
use crate::rtsp::{RtspConfig, RtspTransport};

/// `sluice load rtsp` flags.
#[derive(Args, Debug, Clone, PartialEq)]
#[command(after_help = "\
EXAMPLE
  sluice load rtsp --clients 50 --transport udp --ramp 5s rtsp://127.0.0.1:8554/sluice-demo.mp4

Each viewer does DESCRIBE, SETUP (video, plus audio when offered), PLAY, then counts complete video
samples until the stream ends (no media for --idle-end), --expect-samples arrive, or --duration
(from the run's start, ramp included; 1 h when not given) passes. A viewer is perfect when it
received --expect-samples samples, or without that flag every sample sent to it while it played
(judged from its RTP timestamps and RTP-Info), and lost no packet.

Over UDP each viewer's RTP arrives on its own sockets, read by --threads receiver threads with
epoll and recvmmsg; with --udp-gro on (the default) a burst the server sent as one GSO message is
read whole, with off every message is one datagram (the kernel splits the server's bursts on the
server's side, as for players without GRO). The summary and --json give the generator's own CPU
per datagram and per viewer-second.")]
pub struct RtspArgs {
    /// rtsp://host:port/path of the stream.
    #[arg(value_name = "URL")]
    pub url: String,
    /// Number of viewers.
    #[arg(long, short = 'c', default_value_t = 1, value_name = "N")]
    pub clients: usize,
    /// RTP transport.
    #[arg(long, value_enum, default_value = "tcp")]
    pub transport: RtspTransport,
    /// Start the viewers evenly spread over this span, e.g. 5s.
    #[arg(long, value_parser = parse_duration, default_value = "0s", value_name = "DURATION")]
    pub ramp: Duration,
    /// Stop every viewer this long after the run's start (ramp included).
    #[arg(long, short, value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Video samples a viewer must receive to count as perfect (it stops when it has them).
    #[arg(long, value_name = "N")]
    pub expect_samples: Option<u64>,
    /// A playing viewer that receives no media for this long has reached the stream's end.
    #[arg(long, value_parser = parse_duration, default_value = "3s", value_name = "DURATION")]
    pub idle_end: Duration,
    /// Deadline for connect, DESCRIBE, SETUP, PLAY and the first video sample.
    #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "DURATION")]
    pub setup_timeout: Duration,
    /// Set up only the video stream, not the audio stream.
    #[arg(long)]
    pub video_only: bool,
    /// Receive buffer of each viewer's UDP sockets (0: the kernel's default), e.g. 4M; SIZE:
    /// bytes, or K/M/G/T, KiB/MiB/GiB/TiB (powers of 1024), KB/MB/GB/TB (powers of 1000).
    #[arg(
        long,
        default_value_t = crate::rtsp::DEFAULT_UDP_RECEIVE_BUFFER,
        value_parser = parse_size_usize,
        value_name = "SIZE"
    )]
    pub udp_rcvbuf: usize,
    /// UDP GRO on the viewers' RTP sockets: on, or off to model players without it.
    #[arg(long, value_enum, default_value = "on", value_name = "on|off")]
    pub udp_gro: OnOff,
    /// Receiver threads (UDP) and runtime threads [default: the cores this process may use].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Pass/fail criterion, repeatable; a failed one exits 1: `perfect>99%`, `playing>=100%`,
    /// `samples_mean>=899`, `samples_min>0`, `perfect_clients>=50`, `failures==0`, `lost_packets==0`.
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,
    /// Write the full report (summary and every viewer) as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    // A doc comment here would become help text of its own.
    #[allow(missing_docs)]
    #[command(flatten)]
    pub common: CommonFlags,
}

impl RtspArgs {
    /// The flags at their defaults for viewers of `url`.
    pub fn new(url: &str) -> RtspArgs {
        defaults(&[url])
    }

    /// The viewers the flags ask for, validated.
    pub fn config(&self) -> Result<RtspConfig, ArgsError> {
        let mut config = RtspConfig::new(self.url.clone(), self.clients);
        config.transport = self.transport;
        config.ramp = self.ramp;
        config.duration = self.duration;
        config.expect_samples = self.expect_samples;
        config.idle_end = self.idle_end;
        config.setup_timeout = self.setup_timeout;
        config.udp_receive_buffer = self.udp_rcvbuf;
        config.udp_gro = self.udp_gro == OnOff::On;
        config.audio = !self.video_only;
        config.threads = self.threads.unwrap_or(config.threads);
        config.allow_non_loopback = self.common.allow_non_loopback;
        config.validate()?;
        Ok(config)
    }

    /// `sluice load rtsp` with [`RtspArgs::to_args`], quoted for a shell.
    pub fn command_line(&self) -> String {
        format!("sluice load rtsp {}", super::shell_line(&self.to_args()))
    }

    /// The flags that ask for these options again, after `sluice load rtsp`: what a report
    /// prints so a run can be repeated; flags at their defaults are left out.
    pub fn to_args(&self) -> Vec<String> {
        let d = crate::duration_text::format;
        let at_default = RtspArgs::new(&self.url);
        let changed = |same: bool| (!same).then_some(());
        let mut out = vec![self.url.clone()];
        option(&mut out, "--clients", changed(self.clients == at_default.clients).map(|_| self.clients));
        option(
            &mut out,
            "--transport",
            changed(self.transport == at_default.transport).map(|_| value_name(self.transport)),
        );
        option(&mut out, "--ramp", changed(self.ramp == at_default.ramp).map(|_| d(self.ramp)));
        option(&mut out, "--duration", self.duration.map(d));
        option(&mut out, "--expect-samples", self.expect_samples);
        option(
            &mut out,
            "--idle-end",
            changed(self.idle_end == at_default.idle_end).map(|_| d(self.idle_end)),
        );
        option(
            &mut out,
            "--setup-timeout",
            changed(self.setup_timeout == at_default.setup_timeout).map(|_| d(self.setup_timeout)),
        );
        option(&mut out, "--threads", self.threads);
        flag(&mut out, "--video-only", self.video_only);
        option(
            &mut out,
            "--udp-rcvbuf",
            changed(self.udp_rcvbuf == at_default.udp_rcvbuf)
                .map(|_| sluice_proto::size_text::format(self.udp_rcvbuf as u64)),
        );
        option(
            &mut out,
            "--udp-gro",
            changed(self.udp_gro == at_default.udp_gro).map(|_| value_name(self.udp_gro)),
        );
        each(&mut out, "--threshold", &self.thresholds);
        option(&mut out, "--json", self.json.as_ref().map(|p| p.display()));
        self.common.to_args(&mut out);
        out
    }
}
