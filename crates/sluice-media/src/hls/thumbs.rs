//! Thumbnails for scrubbing, planned from the sample tables: which keyframe shows each
//! thumbnail, how thumbnails are packed into tiles (one JPEG holds a grid of them), and the
//! three ways players find them.
//!
//! A thumbnail stands every `interval` seconds from 0 (the last keyframe at or before that
//! time shows it: no decoding past a keyframe, so one keyframe per thumbnail is all a decoder
//! is given); `columns × rows` of them, in reading order, make tile `N` (`tile-N.jpg`, from 1,
//! the DASH `$Number$` default). Tiles are described as:
//! - an HLS image media playlist (`images.m3u8`: `#EXT-X-IMAGES-ONLY`, each tile an entry with
//!   `#EXT-X-TILES:RESOLUTION=WxH,LAYOUT=CxR,DURATION=D`, Apple's and Roku's image-stream
//!   form) and its master line `#EXT-X-IMAGE-STREAM-INF` (`CODECS="jpeg"`);
//! - a WebVTT thumbnails track (`thumbnails.vtt`: a cue per thumbnail whose text is
//!   `tile-N.jpg#xywh=x,y,w,h`, the media fragment video.js, Shaka and JW-style players read);
//! - a DASH image `AdaptationSet` (DASH-IF IOP §6.2.6: `contentType="image"`, `EssentialProperty`
//!   `http://dashif.org/thumbnail_tile` with `CxR`, a `SegmentTemplate` of one tile's duration).
//!
//! It also writes what a decoder reads to make a tile: the video's init segment followed by
//! the tile's keyframes as fragments ([`super::iframes::KeyFrames::fragment_at`]), placed one
//! thumbnail interval apart so the strip is a rising timeline. It does not decode, scale or
//! keep tiles, nor answer requests (the server does).

use std::fmt::Write;

use sluice_proto::markup::escape;

use super::fmp4::SegmentPlan;
use super::iframes::KeyFrames;
use super::HlsError;

/// The folder of a file's thumbnails, under its URL (`film.mp4/thumbs/…`).
pub const THUMBS_DIR: &str = "thumbs";
/// The HLS image media playlist's name.
pub const IMAGE_PLAYLIST: &str = "images.m3u8";
/// The WebVTT thumbnails track's name.
pub const THUMBNAILS_VTT: &str = "thumbnails.vtt";

/// How thumbnails are made: every `interval` seconds, `width` pixels wide (the height keeps
/// the video's shape), `columns × rows` to a tile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThumbLayout {
    /// Seconds between thumbnails.
    pub interval: f64,
    /// A thumbnail's width in pixels.
    pub width: u32,
    /// Thumbnails across a tile.
    pub columns: u32,
    /// Thumbnails down a tile.
    pub rows: u32,
}

/// What a name under a file's `thumbs/` folder asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThumbResource {
    /// The HLS image media playlist.
    ImagePlaylist,
    /// The WebVTT thumbnails track.
    Vtt,
    /// Tile `n` (from 1).
    Tile(usize),
}

impl ThumbResource {
    /// The resource `name` names; `None` for any other name (and for tile 0).
    pub fn parse(name: &str) -> Option<ThumbResource> {
        match name {
            IMAGE_PLAYLIST => Some(ThumbResource::ImagePlaylist),
            THUMBNAILS_VTT => Some(ThumbResource::Vtt),
            _ => super::playlist::numbered(name, "tile-", ".jpg").filter(|&n| n > 0).map(ThumbResource::Tile),
        }
    }

    /// Its `Content-Type`.
    pub fn content_type(&self) -> &'static str {
        match self {
            ThumbResource::ImagePlaylist => "application/vnd.apple.mpegurl",
            ThumbResource::Vtt => "text/vtt; charset=utf-8",
            ThumbResource::Tile(_) => "image/jpeg",
        }
    }

    /// Whether it is a list of tiles (revalidated) rather than a tile (kept).
    pub fn is_manifest(&self) -> bool {
        !matches!(self, ThumbResource::Tile(_))
    }
}

/// Tile `number`'s name (`"$Number$"` gives the DASH template).
pub fn tile_name(number: impl std::fmt::Display) -> String {
    format!("tile-{number}.jpg")
}

/// A file's thumbnails: which keyframe shows each one, and how they are packed into tiles.
#[derive(Debug, Clone)]
pub struct ThumbPlan {
    layout: ThumbLayout,
    /// A thumbnail's height in pixels (even, as 4:2:0 JPEG wants).
    height: u32,
    /// The presentation's duration in seconds.
    duration: f64,
    /// For each thumbnail, the keyframe (its number in decode order) that shows it.
    picks: Vec<usize>,
}

impl ThumbPlan {
    /// The thumbnails of a video `duration` seconds long whose pictures are `(width, height)`
    /// and whose keyframes are `keyframes`; `None` for an empty video or a degenerate layout.
    pub fn new(
        keyframes: &KeyFrames<'_>,
        duration: f64,
        (source_width, source_height): (u16, u16),
        layout: ThumbLayout,
    ) -> Option<ThumbPlan> {
        if !(duration > 0.0 && layout.interval > 0.0)
            || layout.width < 2
            || layout.columns == 0
            || layout.rows == 0
        {
            return None;
        }
        if source_width == 0 || source_height == 0 {
            return None;
        }
        let height = f64::from(layout.width) * f64::from(source_height) / f64::from(source_width);
        let height = ((height / 2.0).round() as u32 * 2).max(2);
        let count = (duration / layout.interval - 1e-9).ceil().max(1.0) as usize;
        // The last keyframe at or before each thumbnail's time (a millisecond's slack for times
        // that are whole in the tables but not in binary), the first one before any.
        let mut picks = Vec::with_capacity(count);
        let mut k = 0;
        for i in 0..count {
            let at = i as f64 * layout.interval + 0.001;
            while k + 1 < keyframes.len() && keyframes.time(k + 1) <= at {
                k += 1;
            }
            picks.push(k);
        }
        Some(ThumbPlan { layout, height, duration, picks })
    }

    /// How thumbnails are made.
    pub fn layout(&self) -> ThumbLayout {
        self.layout
    }

    /// A thumbnail's size in pixels.
    pub fn cell(&self) -> (u32, u32) {
        (self.layout.width, self.height)
    }

    /// A tile's size in pixels (its grid of thumbnails; a last tile not filled is padded).
    pub fn tile_size(&self) -> (u32, u32) {
        (self.layout.width * self.layout.columns, self.height * self.layout.rows)
    }

    /// How many thumbnails.
    pub fn thumbnails(&self) -> usize {
        self.picks.len()
    }

    fn per_tile(&self) -> usize {
        (self.layout.columns * self.layout.rows) as usize
    }

    /// How many tiles: ⌈thumbnails ÷ thumbnails per tile⌉.
    pub fn tiles(&self) -> usize {
        self.picks.len().div_ceil(self.per_tile())
    }

    /// The thumbnails of tile `n` (from 1), in reading order; `None` past the last.
    fn tile_range(&self, n: usize) -> Option<std::ops::Range<usize>> {
        if n == 0 || n > self.tiles() {
            return None;
        }
        let first = (n - 1) * self.per_tile();
        Some(first..(first + self.per_tile()).min(self.picks.len()))
    }

    /// Where thumbnail `i` starts, in seconds.
    fn start(&self, i: usize) -> f64 {
        i as f64 * self.layout.interval
    }

    /// How long tile `n` (from 1) stands for, in seconds.
    fn tile_duration(&self, n: usize) -> f64 {
        self.tile_range(n).map_or(0.0, |r| self.duration.min(self.start(r.end)) - self.start(r.start))
    }

    /// What a decoder reads to make tile `n` (from 1): the video's init segment (`init`, given
    /// by the caller), then a fragment per thumbnail of its keyframe, each lasting one interval.
    pub fn decoder_input(&self, keyframes: &KeyFrames<'_>, n: usize) -> Result<Vec<SegmentPlan>, HlsError> {
        let range = self.tile_range(n).ok_or(HlsError::NoSuchSegment(n))?;
        let ticks = (self.layout.interval * f64::from(keyframes.timescale())).round().max(1.0) as u64;
        range.map(|i| keyframes.fragment_at(self.picks[i], i as u32 + 1, (i as u64 * ticks, ticks))).collect()
    }

    /// A nominal bit rate of the tiles, for manifests that must state one: a JPEG thumbnail
    /// takes about a bit per pixel at the quality the server asks for, over a tile's duration.
    pub fn bandwidth(&self) -> u64 {
        let (w, h) = self.tile_size();
        let secs = self.layout.interval * self.per_tile() as f64;
        ((f64::from(w) * f64::from(h)) / secs).ceil().max(1.0) as u64
    }

    /// The HLS image media playlist: each tile an entry lasting the thumbnails it holds, with
    /// its `#EXT-X-TILES` (a thumbnail's resolution, the grid, a thumbnail's duration).
    pub fn image_playlist(&self) -> String {
        let longest = (1..=self.tiles()).map(|n| self.tile_duration(n)).fold(0.0, f64::max);
        let (w, h) = self.cell();
        let ThumbLayout { columns, rows, interval, .. } = self.layout;
        let mut out = String::with_capacity(128 + self.tiles() * 96);
        let _ = write!(
            out,
            "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:{}\n#EXT-X-MEDIA-SEQUENCE:1\n\
             #EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-IMAGES-ONLY\n",
            (longest.ceil() as u64).max(1)
        );
        for n in 1..=self.tiles() {
            let _ = write!(
                out,
                "#EXTINF:{:.3},\n#EXT-X-TILES:RESOLUTION={w}x{h},LAYOUT={columns}x{rows},DURATION={interval:.3}\n{}\n",
                self.tile_duration(n),
                tile_name(n)
            );
        }
        out.push_str("#EXT-X-ENDLIST\n");
        out
    }

    /// The master playlist's `#EXT-X-IMAGE-STREAM-INF` line for tiles at `prefix` (`""`, or
    /// `"../film.720p.mp4/"`): the tile's resolution, as the image stream's.
    pub fn stream_inf(&self, prefix: &str) -> String {
        let (w, h) = self.tile_size();
        format!(
            "#EXT-X-IMAGE-STREAM-INF:BANDWIDTH={},RESOLUTION={w}x{h},CODECS=\"jpeg\",URI=\"{prefix}{THUMBS_DIR}/{IMAGE_PLAYLIST}\"\n",
            self.bandwidth()
        )
    }

    /// The WebVTT thumbnails track: a cue per thumbnail, from its time to the next one's (the
    /// last to the end), naming its tile (at `prefix`, relative to the track) and its cell.
    pub fn vtt(&self, prefix: &str) -> String {
        let (w, h) = self.cell();
        let mut out = String::from("WEBVTT\n");
        for i in 0..self.thumbnails() {
            let (from, to) = (self.start(i), self.duration.min(self.start(i + 1)));
            let cell = (i % self.per_tile()) as u32;
            let (x, y) = ((cell % self.layout.columns) * w, (cell / self.layout.columns) * h);
            let tile = i / self.per_tile() + 1;
            let _ = write!(
                out,
                "\n{} --> {}\n{prefix}{}#xywh={x},{y},{w},{h}\n",
                vtt_time(from),
                vtt_time(to),
                tile_name(tile)
            );
        }
        out
    }

    /// DASH's image `AdaptationSet` (id `set_id`) for tiles at `prefix`, as DASH-IF IOP §6.2.6
    /// writes it: one `Representation` whose size is the tile's, the grid as an essential
    /// `thumbnail_tile` property, and a template of one tile per tile's duration.
    pub fn mpd_set(&self, prefix: &str, set_id: u32) -> String {
        let (w, h) = self.tile_size();
        let ThumbLayout { columns, rows, interval, .. } = self.layout;
        let tile_ms = (interval * self.per_tile() as f64 * 1000.0).round() as u64;
        let media = escape(&format!("{prefix}{THUMBS_DIR}/{}", tile_name("$Number$")));
        format!(
            "  <AdaptationSet id=\"{set_id}\" contentType=\"image\" mimeType=\"image/jpeg\">\n   \
             <SegmentTemplate media=\"{media}\" timescale=\"1000\" duration=\"{tile_ms}\" startNumber=\"1\"/>\n   \
             <Representation id=\"thumbnails\" bandwidth=\"{}\" width=\"{w}\" height=\"{h}\">\n    \
             <EssentialProperty schemeIdUri=\"http://dashif.org/thumbnail_tile\" value=\"{columns}x{rows}\"/>\n   \
             </Representation>\n  </AdaptationSet>\n",
            self.bandwidth()
        )
    }
}

/// `mpd` (an MPD the packager wrote) with `plan`'s image set added to its period, numbered
/// after the sets already there.
pub fn with_image_set(mpd: &str, plan: &ThumbPlan, prefix: &str) -> String {
    let Some(end) = mpd.rfind(" </Period>") else { return mpd.to_string() };
    let set_id = mpd.matches("<AdaptationSet ").count() as u32;
    let mut out = String::with_capacity(mpd.len() + 512);
    out.push_str(&mpd[..end]);
    out.push_str(&plan.mpd_set(prefix, set_id));
    out.push_str(&mpd[end..]);
    out
}

/// A WebVTT timestamp (`hh:mm:ss.ttt`).
fn vtt_time(secs: f64) -> String {
    let ms = (secs * 1000.0).round() as u64;
    format!("{:02}:{:02}:{:02}.{:03}", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
}

#[cfg(test)]
mod tests;
