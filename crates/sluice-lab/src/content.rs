//! The media file an RTSP experiment streams, generated with ffmpeg into the run's media
//! directory and kept there: a file whose name spells out its parameters is reused by the next
//! run, and only a missing one is encoded again (into a temporary name first, so an interrupted
//! encode never leaves a file that looks finished). Its video sample count comes from ffprobe,
//! not from arithmetic, so "perfect sending" means every sample the file really has. It streams
//! nothing (`runner`, `peer`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// What to encode: H.264 (x264, constant frame rate, a fixed GOP with no scene-cut keyframes,
/// capped bit rate) from ffmpeg's `testsrc2` pattern, optionally with an AAC tone, in an MP4 with
/// its index at the front.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContentSpec {
    /// Picture width.
    pub width: u32,
    /// Picture height.
    pub height: u32,
    /// Frames per second.
    pub fps: u32,
    /// Video bit rate (and its cap), kbit/s.
    pub bitrate_kbps: u32,
    /// Frames from one keyframe to the next.
    pub gop: u32,
    /// Length, seconds.
    pub seconds: u32,
    /// Add an AAC track (a 440 Hz tone, 128 kbit/s).
    #[serde(default)]
    pub audio: bool,
}

impl ContentSpec {
    /// Checks the numbers.
    pub fn check(&self) -> Result<(), String> {
        if [self.width, self.height, self.fps, self.bitrate_kbps, self.gop, self.seconds].contains(&0) {
            return Err("every content parameter must be at least 1".into());
        }
        if !self.width.is_multiple_of(2) || !self.height.is_multiple_of(2) {
            return Err("content width and height must be even (4:2:0)".into());
        }
        Ok(())
    }

    /// Video samples the file has when every frame is encoded: seconds × fps.
    pub fn video_samples(&self) -> u64 {
        u64::from(self.seconds) * u64::from(self.fps)
    }

    /// The file's name, which spells out every parameter (the cache key).
    pub fn file_name(&self) -> String {
        format!(
            "h264-{}x{}-{}fps-{}k-gop{}-{}s{}.mp4",
            self.width,
            self.height,
            self.fps,
            self.bitrate_kbps,
            self.gop,
            self.seconds,
            if self.audio { "-aac" } else { "" }
        )
    }

    /// One line for reports: `H.264 1920x1080, 30 fps, 23 Mbit/s, GOP 60, 30 s, AAC`.
    pub fn summary(&self) -> String {
        let rate = if self.bitrate_kbps.is_multiple_of(1000) {
            format!("{} Mbit/s", self.bitrate_kbps / 1000)
        } else {
            format!("{} kbit/s", self.bitrate_kbps)
        };
        format!(
            "H.264 {}x{}, {} fps, {rate}, GOP {}, {} s{}",
            self.width,
            self.height,
            self.fps,
            self.gop,
            self.seconds,
            if self.audio { ", AAC" } else { "" }
        )
    }

    /// ffmpeg's arguments writing the file to `out`.
    pub fn ffmpeg_args(&self, out: &Path) -> Vec<String> {
        let mut a: Vec<String> = vec!["-hide_banner".into(), "-loglevel".into(), "error".into(), "-y".into()];
        let video = format!("testsrc2=size={}x{}:rate={}", self.width, self.height, self.fps);
        a.extend(["-f".into(), "lavfi".into(), "-i".into(), video]);
        if self.audio {
            a.extend(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"].map(String::from));
        }
        let kbps = self.bitrate_kbps;
        a.extend(["-t".into(), self.seconds.to_string(), "-map".into(), "0:v".into()]);
        if self.audio {
            a.extend(["-map", "1:a", "-c:a", "aac", "-b:a", "128k"].map(String::from));
        }
        a.extend([
            "-c:v".into(),
            "libx264".into(),
            "-preset".into(),
            "veryfast".into(),
            "-b:v".into(),
            format!("{kbps}k"),
            "-maxrate".into(),
            format!("{kbps}k"),
            "-bufsize".into(),
            format!("{}k", kbps * 2),
            "-g".into(),
            self.gop.to_string(),
            "-keyint_min".into(),
            self.gop.to_string(),
            "-sc_threshold".into(),
            "0".into(),
            "-pix_fmt".into(),
            "yuv420p".into(),
            "-movflags".into(),
            "+faststart".into(),
            // The temporary name does not end in .mp4.
            "-f".into(),
            "mp4".into(),
        ]);
        a.push(out.display().to_string());
        a
    }

    /// The file in `dir`, encoded now unless it is already there; returns it with its video
    /// sample count (from ffprobe) and the command that made it.
    pub fn ensure(&self, dir: &Path) -> Result<Content, String> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let path = dir.join(self.file_name());
        let args = self.ffmpeg_args(&path);
        let command = format!("ffmpeg {}", args.join(" "));
        if !path.exists() {
            let tmp = dir.join(format!(".{}.partial", self.file_name()));
            let out = Command::new("ffmpeg")
                .args(self.ffmpeg_args(&tmp))
                .output()
                .map_err(|e| format!("ffmpeg could not run ({e}); scripts/test installs it"))?;
            if !out.status.success() {
                let _ = std::fs::remove_file(&tmp);
                return Err(format!(
                    "ffmpeg failed ({}): {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            std::fs::rename(&tmp, &path).map_err(|e| format!("renaming {}: {e}", tmp.display()))?;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644));
        }
        let video_samples = probe_video_samples(&path)?;
        Ok(Content { path, file_name: self.file_name(), video_samples, command, spec: self.clone() })
    }
}

/// A generated file, ready to serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    /// Where it is.
    pub path: PathBuf,
    /// Its name (the RTSP path it is served at).
    pub file_name: String,
    /// Video samples (access units) the file has.
    pub video_samples: u64,
    /// The ffmpeg command that encodes it.
    pub command: String,
    /// What it was made from.
    pub spec: ContentSpec,
}

/// The video stream's sample count, as ffprobe reads it from the MP4 index.
pub fn probe_video_samples(path: &Path) -> Result<u64, String> {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=nb_frames",
            "-of",
            "csv=p=0",
        ])
        .arg(path)
        .output()
        .map_err(|e| format!("ffprobe could not run ({e}); scripts/test installs ffmpeg"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| out.status.success() && *n > 0)
        .ok_or_else(|| format!("ffprobe found no video samples in {}: {}", path.display(), text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ContentSpec {
        ContentSpec { width: 160, height: 120, fps: 10, bitrate_kbps: 200, gop: 10, seconds: 1, audio: true }
    }

    #[test]
    fn names_and_arguments_follow_the_parameters() {
        let s = ContentSpec {
            width: 1920,
            height: 1080,
            fps: 30,
            bitrate_kbps: 23_000,
            gop: 60,
            seconds: 30,
            audio: true,
        };
        assert_eq!(s.file_name(), "h264-1920x1080-30fps-23000k-gop60-30s-aac.mp4");
        assert_eq!(s.summary(), "H.264 1920x1080, 30 fps, 23 Mbit/s, GOP 60, 30 s, AAC");
        assert_eq!(s.video_samples(), 900);
        let line = s.ffmpeg_args(Path::new("/o.mp4")).join(" ");
        for part in [
            "-b:v 23000k -maxrate 23000k -bufsize 46000k",
            "-g 60 -keyint_min 60 -sc_threshold 0",
            "+faststart",
            "-c:a aac",
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
        assert!(s.check().is_ok());
        assert!(ContentSpec { width: 161, ..s.clone() }.check().is_err());
        assert!(ContentSpec { fps: 0, ..s }.check().is_err());
    }

    #[test]
    fn a_file_is_encoded_once_and_then_reused() {
        // scripts/test installs ffmpeg.
        let dir = tempfile::tempdir().unwrap();
        let c = spec().ensure(dir.path()).unwrap();
        assert_eq!(c.video_samples, 10);
        assert_eq!(c.path, dir.path().join(spec().file_name()));
        let made = std::fs::metadata(&c.path).unwrap().modified().unwrap();
        let again = spec().ensure(dir.path()).unwrap();
        assert_eq!(std::fs::metadata(&again.path).unwrap().modified().unwrap(), made, "cached");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names.len(), 1, "no partial file left: {names:?}");
    }
}
