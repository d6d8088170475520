//! The HLS playlists of one packaged file, written with `m3u8-rs`.
//!
//! This module owns the text of the master playlist (one variant: `BANDWIDTH`,
//! `AVERAGE-BANDWIDTH`, `CODECS`, `RESOLUTION`) and the VOD media playlist (`EXT-X-MAP` to the
//! init segment, one `EXTINF` per segment, `EXT-X-ENDLIST`), and the names of the resources they
//! point at, relative to the file's URL (`/film.mp4/` + name). It does not decide where segments
//! start ([`super::index`]) or answer requests.

use m3u8_rs::{MasterPlaylist, MediaPlaylist, MediaPlaylistType, MediaSegment, Resolution, VariantStream};

use super::index::SegmentIndex;

/// The master playlist's name.
pub const MASTER: &str = "master.m3u8";
/// The media playlist's name.
pub const MEDIA: &str = "media.m3u8";
/// The init segment's name.
pub const INIT: &str = "init.mp4";

/// What a name under `/film.mp4/` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// The master playlist.
    Master,
    /// The media playlist.
    Media,
    /// The init segment.
    Init,
    /// Media segment `n` (from 0).
    Segment(usize),
}

impl Resource {
    /// The resource a name under the file's URL names; `None` for anything else.
    pub fn parse(name: &str) -> Option<Resource> {
        match name {
            MASTER => Some(Resource::Master),
            MEDIA => Some(Resource::Media),
            INIT => Some(Resource::Init),
            _ => {
                let digits = name.strip_prefix("seg-")?.strip_suffix(".m4s")?;
                // Canonical numbers only, so one segment has one URL (and one cache entry).
                if digits.is_empty() || digits.len() > 9 || (digits.len() > 1 && digits.starts_with('0')) {
                    return None;
                }
                if !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                digits.parse().ok().map(Resource::Segment)
            }
        }
    }

    /// The `Content-Type` of the resource.
    pub fn content_type(self) -> &'static str {
        match self {
            Resource::Master | Resource::Media => "application/vnd.apple.mpegurl",
            Resource::Init => "video/mp4",
            Resource::Segment(_) => "video/iso.segment",
        }
    }
}

/// Media segment `n`'s name.
pub fn segment_name(n: usize) -> String {
    format!("seg-{n}.m4s")
}

/// The master playlist.
pub fn master_playlist(index: &SegmentIndex) -> String {
    let variant = VariantStream {
        uri: MEDIA.to_string(),
        bandwidth: index.peak_bandwidth(),
        average_bandwidth: Some(index.average_bandwidth()),
        codecs: Some(index.codecs().to_string()),
        resolution: index.resolution().map(|(w, h)| Resolution { width: u64::from(w), height: u64::from(h) }),
        ..Default::default()
    };
    let playlist = MasterPlaylist {
        version: Some(7),
        independent_segments: true,
        variants: vec![variant],
        ..Default::default()
    };
    write(|out| playlist.write_to(out))
}

/// The VOD media playlist.
pub fn media_playlist(index: &SegmentIndex) -> String {
    let segments: Vec<MediaSegment> = (0..index.segments())
        .map(|n| MediaSegment {
            uri: segment_name(n),
            duration: index.segment_duration(n) as f32,
            map: (n == 0).then(|| m3u8_rs::Map { uri: INIT.to_string(), ..Default::default() }),
            ..Default::default()
        })
        .collect();
    // EXTINF rounded to the nearest integer may not exceed the target duration (RFC 8216
    // §4.3.3.1); rounding up is always safe.
    let longest = (0..index.segments()).map(|n| index.segment_duration(n)).fold(0.0, f64::max);
    let playlist = MediaPlaylist {
        version: Some(7),
        target_duration: longest.ceil().max(1.0) as u64,
        media_sequence: 0,
        playlist_type: Some(MediaPlaylistType::Vod),
        independent_segments: true,
        end_list: true,
        segments,
        ..Default::default()
    };
    write(|out| playlist.write_to(out))
}

fn write(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, and m3u8-rs writes only UTF-8.
    let _ = f(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mp4::Mp4File;
    use std::time::Duration;

    #[test]
    fn names_parse_canonically() {
        assert_eq!(Resource::parse("master.m3u8"), Some(Resource::Master));
        assert_eq!(Resource::parse("media.m3u8"), Some(Resource::Media));
        assert_eq!(Resource::parse("init.mp4"), Some(Resource::Init));
        assert_eq!(Resource::parse("seg-0.m4s"), Some(Resource::Segment(0)));
        assert_eq!(Resource::parse("seg-12.m4s"), Some(Resource::Segment(12)));
        for bad in ["seg-.m4s", "seg-01.m4s", "seg--1.m4s", "seg-1x.m4s", "seg-9999999999.m4s", "x.m3u8", ""]
        {
            assert_eq!(Resource::parse(bad), None, "{bad}");
        }
        assert_eq!(Resource::parse(&segment_name(7)), Some(Resource::Segment(7)));
    }

    #[test]
    fn playlists_of_the_demo() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
        let file = Mp4File::from_bytes(&std::fs::read(path).unwrap()).unwrap();
        let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
        let master = master_playlist(&index);
        assert!(master.starts_with("#EXTM3U\n"), "{master}");
        assert!(master.contains("CODECS=\"avc1.4d401e,mp4a.40.2\""), "{master}");
        assert!(master.contains("RESOLUTION=640x360"), "{master}");
        assert!(master.contains("BANDWIDTH="), "{master}");
        assert!(master.contains("\nmedia.m3u8\n"), "{master}");
        let media = media_playlist(&index);
        for line in [
            "#EXT-X-PLAYLIST-TYPE:VOD",
            "#EXT-X-TARGETDURATION:2",
            "#EXT-X-MAP:URI=\"init.mp4\"",
            "seg-0.m4s",
            "seg-2.m4s",
            "#EXT-X-ENDLIST",
        ] {
            assert!(media.contains(line), "{line} in {media}");
        }
        assert!(!media.contains("seg-3.m4s"));
    }
}
