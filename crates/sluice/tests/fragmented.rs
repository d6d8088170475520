//! Fragmented MP4s play as progressive ones do, on every engine: ffmpeg makes fragmented copies
//! of the demo here (`-movflags frag_keyframe+empty_moov+default_base_moof`, a fragment per
//! keyframe with the data based at the `moof`; and `-frag_duration`, fragments of 0.4 s cut
//! between keyframes, with explicit base offsets), and ffprobe reading each over HLS, DASH and
//! RTSP counts every video frame and audio packet it counts in the file. A copy cut in the middle
//! of its last fragment's `mdat` (a recording still being written) plays up to the fragment
//! before, and whole once the rest is written. The page offers them to play and `/streams` calls
//! them ready. An edge of an S3 store (SeaweedFS) reads the fragments of an object larger than a
//! cache slice, whole and cut short, as a local root does.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
#[macro_use]
mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::edge::{put_object, start_edge};
use common::*;

rtsp_matrix!(fragmented_files_play_over_hls_dash_and_rtsp, an_edge_reads_fragments_across_slices);

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");

/// A file served, and the file whose counts ffprobe must find over every protocol.
struct Case {
    name: &'static str,
    served: Vec<u8>,
    counted: Vec<u8>,
}

/// Offsets of the top-level `moof` boxes of `data`.
fn moof_offsets(data: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    for _ in 0..100_000 {
        if at + 8 > data.len() {
            break;
        }
        let size = u32::from_be_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        assert!(size >= 8, "ffmpeg writes 32-bit box sizes here");
        if &data[at + 4..at + 8] == b"moof" {
            offsets.push(at);
        }
        at += size;
    }
    offsets
}

fn cases() -> &'static Vec<Case> {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let make = |name: &str, args: &[&str]| {
            let out = dir.path().join(name);
            let mut cmd = tool("ffmpeg");
            cmd.args(["-nostdin", "-v", "error", "-y", "-i", DEMO, "-c", "copy"]).args(args).arg(&out);
            let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(60));
            assert!(status.success(), "ffmpeg {args:?}: {}", String::from_utf8_lossy(&err));
            std::fs::read(out).unwrap()
        };
        let keyframe = make("k.mp4", &["-movflags", "frag_keyframe+empty_moov+default_base_moof"]);
        let duration = make("d.mp4", &["-movflags", "empty_moov", "-frag_duration", "400000"]);
        let moofs = moof_offsets(&keyframe);
        assert!(moofs.len() >= 3, "a fragment per keyframe: {moofs:?}");
        let last = *moofs.last().unwrap();
        // Cut in the middle of the last fragment's mdat: it plays as the file before that moof.
        let cut = last + (keyframe.len() - last) / 2;
        vec![
            Case { name: "frag-keyframe.mp4", served: keyframe.clone(), counted: keyframe.clone() },
            Case { name: "frag-duration.mp4", served: duration.clone(), counted: duration },
            Case {
                name: "growing.mp4",
                served: keyframe[..cut].to_vec(),
                counted: keyframe[..last].to_vec(),
            },
        ]
    })
}

/// The demo 20 times over as fragments (5.4 MB, more than a 4 MiB cache slice), whole and cut
/// in the middle of its last fragment; the bytes ffprobe counts for each.
fn long_cases() -> &'static Vec<Case> {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("long.mp4");
        let mut cmd = tool("ffmpeg");
        cmd.args(["-nostdin", "-v", "error", "-y", "-stream_loop", "19", "-i", DEMO, "-c", "copy"])
            .args(["-movflags", "frag_keyframe+empty_moov+default_base_moof"])
            .arg(&out);
        let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(60));
        assert!(status.success(), "ffmpeg: {}", String::from_utf8_lossy(&err));
        let long = std::fs::read(out).unwrap();
        assert!(long.len() > 4 << 20, "{} bytes", long.len());
        let last = *moof_offsets(&long).last().unwrap();
        let cut = last + (long.len() - last) / 2;
        vec![
            Case { name: "long.mp4", served: long.clone(), counted: long.clone() },
            Case { name: "long-growing.mp4", served: long[..cut].to_vec(), counted: long[..last].to_vec() },
        ]
    })
}

/// An edge of an S3 store reads the fragment headers spread through an object of several cache
/// slices as a local root does: ffprobe counts every frame and packet over HLS and DASH.
fn an_edge_reads_fragments_across_slices(engine: &[&str]) {
    static PUT: OnceLock<()> = OnceLock::new();
    PUT.get_or_init(|| {
        for case in long_cases() {
            put_object("fragedge/lib", case.name, &case.served);
        }
    });
    let cache = tempfile::tempdir().unwrap();
    let server = start_edge(engine, "fragedge/lib", cache.path(), &[]);
    let addr = server.addr();
    let work = tempfile::tempdir().unwrap();
    for case in long_cases() {
        let counted = work.path().join(case.name);
        std::fs::write(&counted, &case.counted).unwrap();
        let expected = counts(counted.to_str().unwrap());
        for url in [
            format!("http://{addr}/{}/master.m3u8", case.name),
            format!("http://{addr}/{}/manifest.mpd", case.name),
        ] {
            assert_eq!(counts(&url), expected, "video frames and audio packets of {url} and of the file");
        }
    }
}

/// ffprobe's count of video frames (decoded) and audio packets of `target`, one stream at a time
/// (reading both, ffmpeg's DASH demuxer stops a packet short of the end of the audio).
fn counts(target: &str) -> (String, String) {
    let one = |select: &str, entry: &str, count: &str| {
        let mut cmd = tool("ffprobe");
        if target.starts_with("rtsp://") {
            cmd.args(["-rtsp_transport", "tcp"]);
        } else if target.starts_with("http://") {
            cmd.args(["-rw_timeout", "10000000"]);
        }
        cmd.args(["-v", "error", count, "-select_streams", select, "-show_entries", entry, "-of", "csv=p=0"]);
        let (status, out, err) = run_bounded(cmd.arg(target), Duration::from_secs(90));
        let err = String::from_utf8_lossy(&err);
        assert!(status.success() && err.trim().is_empty(), "ffprobe {target}: {status}: {err}");
        // A master playlist lists the stream under its program too: the same count twice.
        let out = String::from_utf8_lossy(&out);
        out.lines().next().unwrap_or_default().trim_end_matches(',').to_string()
    };
    (
        one("v:0", "stream=nb_read_frames", "-count_frames"),
        one("a:0", "stream=nb_read_packets", "-count_packets"),
    )
}

/// [`counts`] of an `rtsp://` URL from a try in which the server dropped nothing for ffprobe
/// ([`Server::without_rtsp_drops`]).
fn rtsp_counts(server: &Server, url: &str) -> (String, String) {
    let (counted, tries) = server.without_rtsp_drops(|| counts(url));
    if !tries.is_empty() {
        println!("{url}: tries before this one: {}", tries.join("; "));
    }
    counted
}

fn fragmented_files_play_over_hls_dash_and_rtsp(engine: &[&str]) {
    let fx = Fixture::new();
    for case in cases() {
        fx.write(case.name, &case.served);
    }
    let server = Server::serve(engine, &fx, &[]);
    let (addr, rtsp) = (server.addr(), server.rtsp_addr());
    let work = tempfile::tempdir().unwrap();
    for case in cases() {
        let counted = work.path().join(case.name);
        std::fs::write(&counted, &case.counted).unwrap();
        let expected = counts(counted.to_str().unwrap());
        assert!(expected.0.parse::<u32>().unwrap() > 0 && expected.1.parse::<u32>().unwrap() > 0);
        for url in [
            format!("http://{addr}/{}/master.m3u8", case.name),
            format!("http://{addr}/{}/manifest.mpd", case.name),
        ] {
            assert_eq!(counts(&url), expected, "video frames and audio packets of {url} and of the file");
        }
        let url = format!("rtsp://{rtsp}/{}", case.name);
        assert_eq!(
            rtsp_counts(&server, &url),
            expected,
            "video frames and audio packets of {url} and of the file"
        );
    }
    // The recording grows to its end: its next version plays whole.
    let whole = &cases()[0];
    fx.write("growing.mp4", &whole.served);
    let counted = work.path().join("whole.mp4");
    std::fs::write(&counted, &whole.counted).unwrap();
    let expected = counts(counted.to_str().unwrap());
    let url = format!("http://{addr}/growing.mp4/master.m3u8");
    assert_eq!(counts(&url), expected, "{url} once the file is whole");
    let url = format!("rtsp://{rtsp}/growing.mp4");
    assert_eq!(rtsp_counts(&server, &url), expected, "{url} once the file is whole");
    let page = fetch_get(addr, "/", &[]).body_text();
    let streams: serde_json::Value = serde_json::from_str(&server.streams()).unwrap();
    for case in cases() {
        let item = page.split("<li").find(|li| li.contains(&format!(">{}</a>", case.name))).unwrap();
        assert!(item.contains("class=\"play\"") && !item.contains("Cannot be played"), "{item}");
        let text = streams.to_string();
        let entry =
            find_item(&streams, case.name).unwrap_or_else(|| panic!("{} in /streams: {text}", case.name));
        assert_eq!(entry["ready"], true, "{entry}");
    }
}

/// The object of `/streams` whose fields name `name`.
fn find_item<'a>(value: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    match value {
        serde_json::Value::Object(map) => {
            if map.values().any(|v| v.as_str().is_some_and(|s| s.ends_with(name)))
                && map.contains_key("ready")
            {
                return Some(value);
            }
            map.values().find_map(|v| find_item(v, name))
        }
        serde_json::Value::Array(items) => items.iter().find_map(|v| find_item(v, name)),
        _ => None,
    }
}
