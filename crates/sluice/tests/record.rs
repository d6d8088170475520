//! Recording live paths into the library, on every engine: a `[[record]]` rule records what
//! ffmpeg publishes to `/live/r` (60 s, files of 20 s) into `recordings/live/r/`, `/streams`
//! names the file being written, an `EVENT` playlist and a dynamic MPD while it grows, and once published every recording file is a title: HTTP
//! HLS and DASH each play all the published frames across the files (RTSP, in real time, the
//! first file's), and a clip starts in
//! the middle of one; the admin listener's timeline lists the files, and a `/rec/` span
//! across two plays whole as HLS, as DASH (a Period a file) and as one MP4, which seeks. Then sluice is killed with SIGKILL while it records `/live/k`; started
//! again on the same library, the file it was writing plays, holding all it had written but
//! for the segment in flight. And a span is guarded by the policy of the recordings it is made
//! of: refused without the signature `/recordings/` asks for, played whole with it (carried on
//! to the segments its playlist lists).

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
#[macro_use]
mod common;

use std::path::Path;

use common::publisher::*;
use common::*;

rtsp_matrix!(published_streams_are_recorded_into_playable_files, a_span_is_guarded_as_its_recordings_are);

const CONFIG: &[u8] = b"[[access]]\nprefix = \"/live/\"\nmode = \"open\"\npublish = true\n\n\
    [[record]]\nprefix = \"/live/\"\nfile_duration = \"20s\"\n";

/// The recording files of live path `name`, as library paths, oldest first.
fn recordings(fx: &Fixture, name: &str) -> Vec<String> {
    let dir = fx.path(&format!("recordings/live/{name}"));
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    files.retain(|f| f.ends_with(".mp4") && !f.starts_with('.'));
    files.sort();
    files.into_iter().map(|f| format!("/recordings/live/{name}/{f}")).collect()
}

fn published_streams_are_recorded_into_playable_files(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("sluice.toml", CONFIG);
    let config = fx.path("sluice.toml");
    let args = ["--config", config.to_str().unwrap()];
    let mut server = Server::serve(engine, &fx, &args);
    let (http, rtsp) = (server.addr(), server.rtsp_addr());

    let mut publisher = publish(&format!("rtsp://{rtsp}/live/r"), &H264_AAC, "tcp", 60);
    assert!(
        poll_until(IO_TIMEOUT, || server.streams().contains("\"recording\":\"/recordings/live/r/")),
        "/streams names the file being written:\n{}\n{}",
        server.streams(),
        server.log_text()
    );
    assert_eq!(metric(&server.scrape(), "sluice_live_recordings"), 1, "one path is being recorded");
    // The file being written is an EVENT playlist and a dynamic MPD while it grows.
    let streams: serde_json::Value = serde_json::from_str(&server.streams()).unwrap();
    let growing = streams["live"][0]["recording"].as_str().unwrap().to_string();
    let playlist = fetch_get(http, &format!("{growing}/video.m3u8"), &[]).body_text();
    assert!(
        playlist.contains("#EXT-X-PLAYLIST-TYPE:EVENT") && !playlist.contains("#EXT-X-ENDLIST"),
        "{playlist}"
    );
    let mpd = fetch_get(http, &format!("{growing}/manifest.mpd"), &[]).body_text();
    assert!(mpd.contains("type=\"dynamic\"") && mpd.contains("availabilityStartTime="), "{mpd}");
    assert!(publisher.finished(), "the publisher finished cleanly");
    // The last segment is written once the publisher's end is seen (a recorder turn is 250 ms).
    let whole = || {
        let files = recordings(&fx, "r");
        files.len() == 3
            && files.iter().map(|f| video_frame_count(&format!("http://{http}{f}/master.m3u8"))).sum::<u64>()
                == 1500
    };
    assert!(
        poll_until(IO_TIMEOUT, whole),
        "60 s in files of 20 s are three files holding all 1,500 frames: {:?}\n{}",
        recordings(&fx, "r"),
        server.log_text()
    );
    let files = recordings(&fx, "r");
    let done = fetch_get(http, &format!("{}/video.m3u8", files[1]), &[]).body_text();
    assert!(
        done.contains("#EXT-X-PLAYLIST-TYPE:VOD") && done.contains("#EXT-X-ENDLIST"),
        "then VOD:\n{done}"
    );
    let dash: u64 = files.iter().map(|f| video_frame_count(&format!("http://{http}{f}/manifest.mpd"))).sum();
    assert_eq!(dash, 1500, "every recorded frame over DASH");
    // RTSP plays in real time: the first file (20 s) shows it.
    let (over_rtsp, tries) =
        server.without_rtsp_drops(|| video_frame_count(&format!("rtsp://{rtsp}{}", files[0])));
    assert_eq!(over_rtsp, 500, "every frame of the first file over RTSP ({tries:?})");
    // The timeline lists the files, and a span across two of them plays whole.
    let timeline = fetch_get(server.admin_addr(), "/recordings?path=/live/r", &[]);
    let timeline: serde_json::Value = serde_json::from_slice(&timeline.body).unwrap();
    let listed = timeline["recordings"].as_array().unwrap();
    let names: Vec<&str> = listed.iter().map(|f| f["file"].as_str().unwrap()).collect();
    assert_eq!(names, files.iter().map(String::as_str).collect::<Vec<_>>(), "{timeline}");
    let secs: f64 = listed.iter().map(|f| f["duration_secs"].as_f64().unwrap()).sum();
    assert!((59.8..=60.4).contains(&secs), "the files hold 60 s (audio a little more): {timeline}");
    let start = listed[0]["start"].as_str().unwrap().to_string();
    // 39 s from the first file's start: its 20 s and the second file's, whose segments all start
    // before the 39th second (the third file's first does not).
    let span = format!("http://{http}/rec/live/r/index.m3u8?start={start}&duration=39s");
    assert_eq!(video_frame_count(&span), 1000, "the span across two files plays whole");
    // The same span over DASH: a Period per file, each of its file's segments, all 1,000 frames.
    let mpd =
        fetch_get(http, &format!("/rec/live/r/manifest.mpd?start={start}&duration=39s"), &[]).body_text();
    assert!(mpd.contains("type=\"static\"") && mpd.matches("<Period ").count() == 2, "{mpd}");
    let periods = period_videos(http, &mpd);
    assert_eq!(periods.iter().map(|p| video_frame_count(p.to_str().unwrap())).sum::<u64>(), 1000, "{mpd}");
    // And as one MP4: from the first file's first keyframe, 39 s (975 frames at 25 fps) across
    // the two files, decoding without an error; a seek to 12.5 s starts at the keyframe at 12 s.
    let mp4 = format!("http://{http}/rec/live/r/clip.mp4?start={start}&duration=39s");
    let frames = video_frame_count(&mp4);
    // (A frame either way: the span's ends are wall-clock milliseconds.)
    assert!((974..=976).contains(&frames), "the span's MP4 holds 39 s of frames: {frames}");
    decodes_cleanly(&mp4);
    let later =
        chrono::DateTime::parse_from_rfc3339(&start).unwrap() + chrono::Duration::milliseconds(12_500);
    let later = later.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let seek = video_frame_count(&format!("http://{http}/rec/live/r/clip.mp4?start={later}&duration=20s"));
    assert!((512..=514).contains(&seek), "from the keyframe at 12 s to 32.5 s (513 frames): {seek}");
    let all = timeline["hls"].as_str().map(|p| format!("http://{http}{p}")).unwrap();
    assert_eq!(video_frame_count(&all), 1500, "the timeline's span of every recording");
    let all_mp4 = timeline["mp4"].as_str().map(|p| format!("http://{http}{p}")).unwrap();
    let frames = video_frame_count(&all_mp4);
    assert_eq!(frames, 1500, "the timeline's MP4 of every recording, to its end");
    let late = format!("http://{http}/rec/live/r/index.m3u8?start=2000-01-01T00:00:00Z&duration=1m");
    assert_eq!(fetch_get(http, &late[format!("http://{http}").len()..], &[]).status, 404, "nothing then");

    // A seek into the middle of the first file (its keyframes are a second apart): from 12.5 s
    // on (past its end), the clip starts at the keyframe at 12 s and holds its last 8 s.
    let clip = video_frame_count(&format!("http://{http}{}/clip/12.5-30/master.m3u8", files[0]));
    assert_eq!(clip, 200, "the clip of the recording from 12.5 s");

    // Killed mid-recording: at most the segment in flight is lost.
    let killed = publish(&format!("rtsp://{rtsp}/live/k"), &H264_AAC, "tcp", 30);
    assert!(
        poll_until(IO_TIMEOUT * 2, || recordings(&fx, "k").len() == 1
            && std::fs::metadata(fx.path(&recordings(&fx, "k")[0][1..])).is_ok_and(|m| m.len() > 100_000)),
        "/live/k is being recorded: {:?}",
        recordings(&fx, "k")
    );
    server.signal(libc::SIGKILL);
    let _ = server.wait_exit(IO_TIMEOUT);
    drop(killed);
    let file = recordings(&fx, "k").remove(0);
    let written = std::fs::metadata(fx.path(&file[1..])).unwrap().len();
    let server = Server::serve(engine, &fx, &args);
    let frames = video_frame_count(&format!("http://{}{file}/master.m3u8", server.addr()));
    assert!(
        frames >= 50 && frames.is_multiple_of(25),
        "the recording killed mid-way plays its whole segments ({frames} frames of {written} bytes)"
    );
    assert!(Path::new(&fx.path(&file[1..])).exists());
}

/// Each Period's video of a span's MPD: its init segment and the segments its template and
/// timeline list, fetched and joined into a file of its own (for ffprobe to count).
fn period_videos(http: std::net::SocketAddr, mpd: &str) -> Vec<tempfile::TempPath> {
    let attr = |element: &str, name: &str| -> String {
        let at = element.find(&format!(" {name}=\"")).unwrap_or_else(|| panic!("{name} in {element}"));
        element[at + name.len() + 3..].split('"').next().unwrap().to_string()
    };
    let mut out = Vec::new();
    for period in mpd.split("<Period ").skip(1) {
        let video = period.split("contentType=\"audio\"").next().unwrap();
        let template = video.split("<SegmentTemplate ").nth(1).unwrap();
        let head = template.split('>').next().unwrap();
        let (init, media) = (attr(head, "initialization"), attr(head, "media"));
        let first: u64 = attr(head, "startNumber").parse().unwrap();
        let count: u64 = template
            .split("</SegmentTimeline>")
            .next()
            .unwrap()
            .split("<S ")
            .skip(1)
            .map(|s| if s.contains(" r=\"") { attr(s, "r").parse::<u64>().unwrap() + 1 } else { 1 })
            .sum();
        let mut bytes = fetch_get(http, &init, &[]).body;
        for n in first..first + count {
            let segment = fetch_get(http, &media.replace("$Number$", &n.to_string()), &[]);
            assert_eq!(segment.status, 200, "{media} {n}");
            bytes.extend_from_slice(&segment.body);
        }
        let mut file = tempfile::Builder::new().suffix(".mp4").tempfile().unwrap();
        std::io::Write::write_all(&mut file, &bytes).unwrap();
        out.push(file.into_temp_path());
    }
    out
}

/// Recordings under a signed policy: their `/rec/` spans are refused without a signature for
/// them, whatever no policy says of `/rec/`, and play with one, carried on to the segments.
fn a_span_is_guarded_as_its_recordings_are(engine: &[&str]) {
    let fx = Fixture::new();
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("k1.key");
    std::fs::write(&key, "a-signing-key-for-the-span-tests\n").unwrap();
    let config = format!(
        "[[access]]\nprefix = \"/live/\"\nmode = \"open\"\npublish = true\n\n\
         [[access]]\nprefix = \"/recordings/\"\nmode = \"signed\"\nkeys = {{ k1 = \"{}\" }}\n\n\
         [[record]]\nprefix = \"/live/\"\nfile_duration = \"2s\"\n",
        key.display()
    );
    fx.write("sluice.toml", config.as_bytes());
    let config = fx.path("sluice.toml");
    let server = Server::serve(engine, &fx, &["--config", config.to_str().unwrap()]);
    let (http, rtsp) = (server.addr(), server.rtsp_addr());
    let mut publisher = publish(&format!("rtsp://{rtsp}/live/g"), &H264_AAC, "tcp", 4);
    assert!(publisher.finished(), "the publisher finished cleanly");
    assert!(
        poll_until(IO_TIMEOUT, || recordings(&fx, "g").len() == 2),
        "4 s in files of 2 s: {:?}\n{}",
        recordings(&fx, "g"),
        server.log_text()
    );
    // A signature of the recordings' prefix, on the name of a playlist under it.
    let sign = |prefix: &str| {
        let path = format!("{prefix}index.m3u8");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["sign", &path, "--expires", "1h", "--kid", "k1", "--prefix", prefix])
            .arg("--key-file")
            .arg(&key)
            .output()
            .unwrap();
        assert!(out.status.success(), "sluice sign: {}", String::from_utf8_lossy(&out.stderr));
        let signed = String::from_utf8(out.stdout).unwrap();
        signed.trim().split_once('?').unwrap().1.to_string()
    };
    for name in ["index.m3u8", "manifest.mpd", "clip.mp4"] {
        let status = fetch_get(http, &format!("/rec/live/g/{name}"), &[]).status;
        assert_eq!(status, 401, "{name} of recordings that need a signature, without one");
        let elsewhere = sign("/recordings/live/other/");
        let status = fetch_get(http, &format!("/rec/live/g/{name}?{elsewhere}"), &[]).status;
        assert_eq!(status, 403, "{name} with a signature for other recordings");
    }
    let query = sign("/recordings/live/g/");
    let playlist = fetch_get(http, &format!("/rec/live/g/index.m3u8?{query}"), &[]);
    assert_eq!(playlist.status, 200, "{}", playlist.body_text());
    let text = playlist.body_text();
    let segments: Vec<&str> = text.lines().filter(|l| l.contains(".m4s")).collect();
    assert!(!segments.is_empty() && segments.iter().all(|l| l.contains("sig=")), "carried on: {text}");
    let frames = video_frame_count(&format!("http://{http}/rec/live/g/index.m3u8?{query}"));
    assert_eq!(frames, 100, "the span of 4 s plays whole with the signature");
    let mp4 = video_frame_count(&format!("http://{http}/rec/live/g/clip.mp4?{query}"));
    assert_eq!(mp4, 100, "and as one MP4");
}
