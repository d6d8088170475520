//! I-frame (trick-play) tracks, from the sample tables alone: what a player shows while it
//! scrubs or fast-forwards.
//!
//! This module owns the keyframe fragments and their manifests: each keyframe of the video
//! track is a fragment of its own (`video-iframe-N.m4s`: a `moof` with one sample and its
//! `mdat`, the sample's bytes sent from the file), which decodes with the video's own init
//! segment (`video-init.mp4`); the HLS `EXT-X-I-FRAMES-ONLY` playlist
//! (`video-iframes.m3u8`, one entry per keyframe, `EXT-X-BYTERANGE` the whole fragment,
//! `EXTINF` the time to the next keyframe), the master's `EXT-X-I-FRAME-STREAM-INF` line, and
//! DASH's trick-mode `AdaptationSet` (DASH-IF IOP §3.2.9, `EssentialProperty` scheme
//! `http://dashif.org/guidelines/trickmode`, the same fragments). Each fragment's sample lasts
//! until the next keyframe, so the fragments played in order are a continuous timeline whose
//! `tfdt`s are the keyframes' own decode times. It decodes nothing, and does not cut the
//! regular segments ([`super::index`]) or answer requests.

use std::fmt::Write;

use m3u8_rs::{ByteRange, MediaPlaylist, MediaPlaylistType, MediaSegment};
use mp4_atom::{Encode, Mfhd, Moof, Tfdt, Tfhd, Traf, Trun, TrunEntry, TrunSamples};

use super::fmp4::{SegmentPlan, SYNC_FLAGS};
use super::index::{sample_duration, Packaged, SegmentIndex};
use super::playlist::track_init_name;
use super::HlsError;
use crate::mp4::{Mp4File, Track};

/// The I-frame playlist's name.
pub const IFRAME_PLAYLIST: &str = "video-iframes.m3u8";

/// What a name under a file's URL asks for of its trick-play track.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IFrameResource {
    /// The `EXT-X-I-FRAMES-ONLY` playlist.
    Playlist,
    /// The fragment of keyframe `n` (from 0, in decode order).
    Fragment(usize),
}

impl IFrameResource {
    /// The resource `name` names; `None` for any other name.
    pub fn parse(name: &str) -> Option<IFrameResource> {
        if name == IFRAME_PLAYLIST {
            return Some(IFrameResource::Playlist);
        }
        super::playlist::numbered(name, "video-iframe-", ".m4s").map(IFrameResource::Fragment)
    }

    /// Its `Content-Type`.
    pub fn content_type(&self) -> &'static str {
        match self {
            IFrameResource::Playlist => "application/vnd.apple.mpegurl",
            IFrameResource::Fragment(_) => "video/iso.segment",
        }
    }
}

/// Fragment `number`'s name (`"$Number$"` gives the DASH template).
pub fn fragment_name(number: impl std::fmt::Display) -> String {
    format!("video-iframe-{number}.m4s")
}

/// The keyframes of a file's video track: which samples, and where each one's fragment starts
/// and ends in the track's decode time.
#[derive(Debug, Clone)]
pub struct KeyFrames<'f> {
    track: &'f Track,
    /// Sample index of each keyframe, in decode order.
    samples: Vec<usize>,
    /// Decode time of each keyframe, then where the track's last sample ends.
    times: Vec<u64>,
}

impl<'f> KeyFrames<'f> {
    /// The keyframes of the video track `index` packages in `file`; `None` without video (or
    /// without a keyframe).
    pub fn of(file: &'f Mp4File, index: &SegmentIndex) -> Option<KeyFrames<'f>> {
        let track = index.tracks(file).find(|(_, w)| *w == Packaged::Video).map(|(t, _)| t)?;
        let samples: Vec<usize> = (0..track.samples.len()).filter(|&i| track.samples[i].is_sync()).collect();
        let last = track.samples.len().checked_sub(1)?;
        let mut times: Vec<u64> = samples.iter().map(|&i| track.samples[i].decode_time()).collect();
        times.push(track.samples[last].decode_time() + u64::from(sample_duration(track, last)));
        (!samples.is_empty()).then_some(KeyFrames { track, samples, times })
    }

    /// The timescale of the video track the keyframes are in.
    pub fn timescale(&self) -> u32 {
        self.track.timescale
    }

    /// Decode time of each keyframe, then where the track's last sample ends: the fragments'
    /// boundaries, one more than there are fragments.
    pub fn boundaries(&self) -> &[u64] {
        &self.times
    }

    /// How many keyframes.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether there are none (never: [`KeyFrames::of`] gives `None` then).
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// How long keyframe `n` stands for, in the track's ticks: until the next one.
    fn ticks(&self, n: usize) -> u64 {
        self.times[n + 1].saturating_sub(self.times[n])
    }

    /// How long keyframe `n` stands for, in seconds.
    pub fn duration(&self, n: usize) -> f64 {
        self.ticks(n) as f64 / f64::from(self.track.timescale)
    }

    /// Keyframe `n`'s presentation time in seconds (its composition time less the edit's start).
    pub fn time(&self, n: usize) -> f64 {
        let s = &self.track.samples[self.samples[n]];
        s.composition_time().saturating_sub(self.track.edit_start) as f64 / f64::from(self.track.timescale)
    }

    /// Keyframe `n`'s fragment: a `moof` with its one sample (lasting until the next keyframe)
    /// and the `mdat` header, then the sample's bytes in the file.
    pub fn fragment(&self, n: usize) -> Result<SegmentPlan, HlsError> {
        let Some(&i) = self.samples.get(n) else { return Err(HlsError::NoSuchSegment(n)) };
        let when = (self.track.samples[i].decode_time(), self.ticks(n));
        self.fragment_at(n, n as u32 + 1, when)
    }

    /// Keyframe `n`'s fragment as [`KeyFrames::fragment`] writes it, but numbered `sequence`
    /// and placed at `(decode time, duration)` in the track's ticks: a strip of chosen
    /// keyframes (thumbnails, [`super::thumbs`]) then reads as one gapless, rising timeline,
    /// even when one keyframe stands for two places.
    pub fn fragment_at(
        &self,
        n: usize,
        sequence: u32,
        (at, ticks): (u64, u64),
    ) -> Result<SegmentPlan, HlsError> {
        let Some(&i) = self.samples.get(n) else { return Err(HlsError::NoSuchSegment(n)) };
        let s = &self.track.samples[i];
        let entry = TrunEntry {
            duration: Some(u32::try_from(ticks).unwrap_or(u32::MAX).max(1)),
            size: Some(s.size()),
            flags: Some(SYNC_FLAGS),
            cts: Some(i64::from(s.composition_offset())),
        };
        let mut moof = Moof {
            mfhd: Mfhd { sequence_number: sequence },
            traf: vec![Traf {
                tfhd: Tfhd { track_id: 1, default_base_is_moof: true, ..Default::default() },
                tfdt: Some(Tfdt { base_media_decode_time: at }),
                trun: vec![Trun { data_offset: Some(0), samples: TrunSamples::Explicit(vec![entry]) }],
                ..Default::default()
            }],
        };
        let mut header = Vec::new();
        moof.encode(&mut header)?;
        // A sample is below 2 GiB (the demuxer's bound), so the mdat header is 8 bytes.
        let data_offset = header.len() as i32 + 8;
        moof.traf[0].trun[0].data_offset = Some(data_offset);
        header.clear();
        moof.encode(&mut header)?;
        header.extend_from_slice(&(s.size() + 8).to_be_bytes());
        header.extend_from_slice(b"mdat");
        Ok(SegmentPlan { header, ranges: vec![s.range()] })
    }

    /// Each fragment's length in bytes, without writing it.
    fn fragment_len(&self, n: usize) -> u64 {
        self.fragment(n).map_or(0, |plan| plan.len())
    }

    /// Peak and average bits per second of the fragments over the time each stands for.
    pub fn bandwidth(&self) -> (u64, u64) {
        let (mut peak, mut bytes) = (0u64, 0u64);
        for n in 0..self.len() {
            let len = self.fragment_len(n);
            bytes += len;
            let secs = self.duration(n);
            if secs > 0.0 {
                peak = peak.max((len as f64 * 8.0 / secs).ceil() as u64);
            }
        }
        let total = (self.times[self.len()] - self.times[0]) as f64 / f64::from(self.track.timescale);
        let average = if total > 0.0 { (bytes as f64 * 8.0 / total).ceil() as u64 } else { peak };
        (peak.max(average).max(1), average.max(1))
    }

    /// The `EXT-X-I-FRAMES-ONLY` playlist: the video's init segment as `EXT-X-MAP`, then each
    /// keyframe's fragment, whole, as an `EXT-X-BYTERANGE` (RFC 8216 §4.3.3.6 wants the
    /// I-frame's byte range; here the fragment is the I-frame), lasting until the next one.
    pub fn playlist(&self) -> String {
        let segments: Vec<MediaSegment> = (0..self.len())
            .map(|n| MediaSegment {
                uri: fragment_name(n),
                duration: self.duration(n) as f32,
                byte_range: Some(ByteRange { length: self.fragment_len(n), offset: Some(0) }),
                map: (n == 0)
                    .then(|| m3u8_rs::Map { uri: track_init_name(Packaged::Video), ..Default::default() }),
                ..Default::default()
            })
            .collect();
        let longest = segments.iter().map(|s| s.duration).fold(0.0f32, f32::max);
        let playlist = MediaPlaylist {
            version: Some(7),
            target_duration: (longest.round() as u64).max(1),
            media_sequence: 0,
            playlist_type: Some(MediaPlaylistType::Vod),
            i_frames_only: true,
            independent_segments: true,
            end_list: true,
            segments,
            ..Default::default()
        };
        let mut out = Vec::new();
        playlist.write_to(&mut out).expect("writing to memory");
        String::from_utf8(out).expect("m3u8-rs writes UTF-8")
    }
}

/// The master playlist's `EXT-X-I-FRAME-STREAM-INF` line for one rendition whose resources
/// are at `prefix` (`""`, or `"../film.720p.mp4/"`), or an empty string without video.
pub fn stream_inf(file: &Mp4File, index: &SegmentIndex, prefix: &str) -> String {
    let Some(keyframes) = KeyFrames::of(file, index) else { return String::new() };
    let (peak, average) = keyframes.bandwidth();
    let mut line = format!("#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH={peak},AVERAGE-BANDWIDTH={average}");
    if let Some(codecs) = index.track_codecs(Packaged::Video) {
        let _ = write!(line, ",CODECS=\"{codecs}\"");
    }
    if let Some(supplemental) = index.supplemental_codecs() {
        let _ = write!(line, ",SUPPLEMENTAL-CODECS=\"{supplemental}\"");
    }
    if let Some((w, h)) = index.resolution() {
        let _ = write!(line, ",RESOLUTION={w}x{h}");
    }
    let _ = writeln!(line, ",URI=\"{prefix}{IFRAME_PLAYLIST}\"");
    line
}

#[cfg(test)]
mod tests;
