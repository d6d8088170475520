//! `sluice load rtsp`'s own UDP receivers against sluice's RTSP server, on every engine: viewers
//! whose sockets take GRO messages whole (`--udp-gro on`) and viewers that read one datagram at
//! a time (`--udp-gro off`) count the same samples, audio frames and losses of the built-in demo
//! (180 video frames); one video datagram dropped on its way is counted lost, and the access unit
//! it belonged to incomplete, by both; and viewers started over a ramp and stopped by the
//! deadline are each judged against what they were sent, so every one is perfect. On a machine
//! so busy that the server drops frames (its `degrade` policy, counted in its metrics), samples go
//! missing without a sequence gap and the sample counts are then not compared; the losses are.
//!
//! The dropped datagram: the test puts a small relay between the server and the generator. It
//! forwards the RTSP connection, rewriting each SETUP's `client_port` to a UDP port pair of its
//! own, and forwards every RTP datagram it receives there to the generator's real ports, except
//! the 60th video datagram. Nothing in the server or the generator is replaced, no privileges are
//! needed (as a network namespace or an nft rule would), and exactly one datagram goes missing.
//! The relay forwards datagram by datagram, so through it the GRO viewer reads single datagrams;
//! the direct runs are where its sockets get the server's GSO messages whole.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use sluice_load::rtsp::RtspReport;

rtsp_matrix!(gro_and_plain_viewers_count_the_same_samples_and_the_same_loss,);

const DEMO: &str = "sluice-demo.mp4";
const DEMO_VIDEO_FRAMES: u64 = 180;
/// The video datagram the relay drops (1-based).
const DROPPED: u64 = 60;

/// Starts `sluice load rtsp` over UDP with `args`; returns the child and its JSON report's path.
fn start_load(url: &str, name: &str, gro: &str, args: &[&str]) -> (std::process::Child, std::path::PathBuf) {
    // The engines' tests run side by side in one process: `name` includes the engine.
    let json = std::env::temp_dir().join(format!("sluice-rtsp-gen-{}-{name}.json", std::process::id()));
    let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["load", "rtsp", url, "--transport", "udp", "--udp-gro", gro, "--threads", "1"])
        .args(["--idle-end", "2s", "--quiet", "--no-progress", "--json"])
        .arg(&json)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start sluice load rtsp");
    (child, json)
}

/// Waits (at most 60 s) for a started run and reads its report.
fn finish(child: std::process::Child, json: &std::path::Path) -> RtspReport {
    let mut child = child;
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "sluice load rtsp ran past 60 s");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    assert!(status.success(), "sluice load rtsp failed ({status}): {err}");
    let text = std::fs::read_to_string(json).unwrap_or_else(|e| panic!("{}: {e}\n{err}", json.display()));
    let _ = std::fs::remove_file(json);
    RtspReport::from_json(&text).unwrap()
}

/// Frames the server dropped (its `degrade` policy, when its RTSP loop falls behind on a busy
/// machine), and a line saying so with the machine's load for messages.
fn server_drops(server: &Server) -> (u64, String) {
    let dropped = metric(&server.scrape(), "sluice_rtp_frames_dropped_total");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    (dropped, format!("the server dropped {dropped} frames; load average {}", load.trim()))
}

/// An RTSP relay on a free loopback port: see the module docs. Video is the first SETUP.
struct Relay {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
}

impl Relay {
    fn start(server: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::spawn(move || {
            // One viewer: one connection.
            let Ok((client, _)) = listener.accept() else { return };
            let upstream = TcpStream::connect(server).unwrap();
            let (mut down_read, mut up_write) = (upstream.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut down_read, &mut up_write);
            });
            relay_requests(client, upstream, &flag);
        });
        Relay { addr, stop }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Forwards the viewer's requests, giving each SETUP a relay port pair.
fn relay_requests(mut client: TcpStream, mut upstream: TcpStream, stop: &Arc<AtomicBool>) {
    let mut pending = Vec::new();
    let mut buf = [0u8; 4096];
    let mut setups = 0;
    loop {
        let Ok(n) = client.read(&mut buf) else { return };
        if n == 0 {
            return;
        }
        pending.extend_from_slice(&buf[..n]);
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let request: Vec<u8> = pending.drain(..end + 4).collect();
            let mut text = String::from_utf8(request).unwrap();
            if let Some(at) = text.find("client_port=") {
                let rest = &text[at + "client_port=".len()..];
                let digits: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
                let viewer_rtp: u16 = digits.split('-').next().unwrap().parse().unwrap();
                let (rtp, rtcp) = rtsp::udp_port_pair();
                let ports =
                    format!("{}-{}", rtp.local_addr().unwrap().port(), rtcp.local_addr().unwrap().port());
                text = text.replacen(&format!("client_port={digits}"), &format!("client_port={ports}"), 1);
                let drop_one = setups == 0;
                setups += 1;
                let stop = stop.clone();
                std::thread::spawn(move || forward(rtp, rtcp, viewer_rtp, drop_one, &stop));
            }
            if upstream.write_all(text.as_bytes()).is_err() {
                return;
            }
        }
    }
}

/// Forwards RTP from the relay's port to the viewer's, skipping the [`DROPPED`]th datagram of
/// the video stream. RTCP is taken and not forwarded (the generator does not count it).
fn forward(rtp: UdpSocket, _rtcp: UdpSocket, viewer_rtp: u16, drop_one: bool, stop: &AtomicBool) {
    rtp.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let to = SocketAddr::from(([127, 0, 0, 1], viewer_rtp));
    let out = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut buf = vec![0u8; 65536];
    let mut seen = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let Ok(n) = rtp.recv(&mut buf) else { continue };
        seen += 1;
        if drop_one && seen == DROPPED {
            continue;
        }
        let _ = out.send_to(&buf[..n], to);
    }
}

fn gro_and_plain_viewers_count_the_same_samples_and_the_same_loss(engine: &[&str]) {
    let server = Server::start(engine, &[]);
    let url = format!("rtsp://{}/{DEMO}", server.rtsp_addr());
    let tag = engine[1];
    let name = |what: &str| format!("{tag}-{what}");
    let whole = ["--clients", "3", "--ramp", "1s", "--duration", "30s"];
    let (gro, gro_json) = start_load(&url, &name("gro"), "on", &whole);
    let (plain, plain_json) = start_load(&url, &name("plain"), "off", &whole);
    let relays = [Relay::start(server.rtsp_addr()), Relay::start(server.rtsp_addr())];
    let relayed = |r: &Relay| format!("rtsp://{}/{DEMO}", r.addr);
    let one = ["--clients", "1", "--duration", "30s", "--video-only"];
    let (gro_lossy, gro_lossy_json) = start_load(&relayed(&relays[0]), &name("gro-lossy"), "on", &one);
    let (plain_lossy, plain_lossy_json) = start_load(&relayed(&relays[1]), &name("plain-lossy"), "off", &one);
    // A ramp cut off by the deadline: each viewer played a different share of the file.
    let ramp = ["--clients", "10", "--ramp", "2s", "--duration", "4s"];
    let (ramped, ramped_json) = start_load(&url, &name("ramp"), "on", &ramp);

    let reports = [
        ("gro", finish(gro, &gro_json)),
        ("plain", finish(plain, &plain_json)),
        ("gro through the relay", finish(gro_lossy, &gro_lossy_json)),
        ("plain through the relay", finish(plain_lossy, &plain_lossy_json)),
        ("ramp", finish(ramped, &ramped_json)),
    ];
    drop(relays);
    let (dropped, load) = server_drops(&server);
    for (name, report) in &reports {
        let s = &report.summary;
        assert_eq!(s.failures.total(), 0, "{name}: {s:#?}\n{load}");
        assert_eq!(report.settings.udp_gro, !name.starts_with("plain"), "{name}");
        assert!(s.generator.datagrams > 0 && s.generator.cpu_s > 0.0, "{name}: {:?}", s.generator);
        // Without GRO every message is one datagram; with it a message may hold many.
        for v in &report.viewers {
            assert!(v.reads > 0 && v.reads <= v.datagrams, "{name} viewer {}: {v:?}", v.index);
            if name.starts_with("plain") {
                assert_eq!(v.reads, v.datagrams, "{name} viewer {}: {v:?}", v.index);
            }
        }
    }
    let [(_, gro), (_, plain), (_, gro_lossy), (_, plain_lossy), (_, ramped)] = &reports;
    // No packet goes missing on loopback except the one the relay drops.
    for (name, r) in [("gro", gro), ("plain", plain), ("ramp", ramped)] {
        assert_eq!(r.summary.lost_packets, 0, "{name}: {:#?}\n{load}", r.viewers);
    }
    for (name, r) in [("gro", gro_lossy), ("plain", plain_lossy)] {
        let v = &r.viewers[0];
        assert_eq!(
            (v.lost_packets, v.video_lost_packets),
            (1, 1),
            "{name} through the relay: {v:#?}\n{load}"
        );
    }
    // Frames the server dropped on a busy machine are missing samples without a sequence gap:
    // then the counts below differ for that reason, which the server reports.
    if dropped > 0 {
        eprintln!("sample counts not compared: {load}");
        return;
    }
    // Directly: every viewer gets every sample, without GRO as with it.
    for (name, r) in [("gro", gro), ("plain", plain)] {
        let detail = || format!("{name}: {:#?}\n{:#?}\n{load}", r.summary, r.viewers);
        for v in &r.viewers {
            assert_eq!((v.samples, v.video_lost_packets), (DEMO_VIDEO_FRAMES, 0), "{}", detail());
        }
        assert_eq!(r.summary.perfect_clients, 3, "{}", detail());
    }
    let audio = |r: &RtspReport| r.viewers.iter().map(|v| v.audio_frames).collect::<Vec<_>>();
    assert_eq!(audio(gro), audio(plain), "the same audio frames");
    assert!(audio(gro).iter().all(|&a| a > 0));
    // Through the relay: the one dropped datagram is one lost packet and one or two incomplete
    // samples (two when it carried a sample's marker: that sample never ends, and the next one
    // starts after a gap), the same for both.
    for (name, r) in [("gro", gro_lossy), ("plain", plain_lossy)] {
        let v = &r.viewers[0];
        let detail = || format!("{name} through the relay: {v:#?}\n{load}");
        assert!((DEMO_VIDEO_FRAMES - 2..DEMO_VIDEO_FRAMES).contains(&v.samples), "{}", detail());
        assert_eq!(r.summary.perfect_clients, 0, "{}", detail());
    }
    assert_eq!(
        gro_lossy.viewers[0].samples, plain_lossy.viewers[0].samples,
        "the same datagram, the same samples"
    );
    // The ramp: each viewer judged by what it was sent while it played.
    let s = &ramped.summary;
    let detail = || format!("{s:#?}\n{:#?}\n{load}", ramped.viewers);
    assert_eq!(s.ends.deadline, 10, "{}", detail());
    assert!(s.samples_max - s.samples_min >= 30, "{}", detail());
    assert_eq!(s.perfect_clients, 10, "{}", detail());
}
