//! A protected title's packaging, as [`crate::http::hls`] answers it: its manifests with their key
//! signalling, its init segments with their `sinf` and `pssh`, its media segments encrypted.
//!
//! Owns which rendition gets which protection: under `cenc` and `cbcs` the per-track CMAF
//! segments (`video-*`, `audio-*`, which DASH and the HLS master share) are Common-Encrypted,
//! and the muxed rendition (`media.m3u8`, `seg-N.m4s`) is encrypted whole with AES-128 for HLS
//! players without EME (its init segment stays clear); under `aes-128` every HLS segment is
//! encrypted whole and there is no DASH. An encrypted segment is bytes in memory: its samples
//! are read from the library and encrypted here, which the app runs off the event loop. It does
//! not write boxes or ciphers (`sluice_media::protect`) or decide who gets a key.

use percent_encoding::utf8_percent_encode;
use sluice_media::hls::{Packaged, SegmentIndex, SegmentPlan};
use sluice_media::mp4::{Mp4File, TrackKind};
use sluice_media::protect::slice::SliceHeaders;
use sluice_media::protect::{cipher, manifest, protect_init, protect_segment_in_place, TrackCrypt};
use sluice_proto::conn::Segment;

use super::licence::{AES_KEY, CLEARKEY};
use super::TitleProtection;
use crate::library::{FileVersion, Library, LibraryError};

/// The master playlist with its `EXT-X-SESSION-KEY`.
pub fn master(text: &str, title: &TitleProtection) -> String {
    let key = match title.scheme.cenc() {
        Some(_) => {
            let ours = manifest::sample_aes_key("EXT-X-SESSION-KEY", &title.key);
            ours + &manifest::system_key_lines(&title.key, true)
        }
        None => manifest::aes128_key("EXT-X-SESSION-KEY", AES_KEY),
    };
    manifest::keyed_master_playlist(text, &key)
}

/// The muxed rendition's media playlist, its segments AES-128 whole under every scheme.
pub fn media(text: &str) -> String {
    manifest::keyed_media_playlist(text, &manifest::aes128_key("EXT-X-KEY", AES_KEY))
}

/// A track's media playlist: `SAMPLE-AES`(`-CTR`) for CENC, AES-128 otherwise.
pub fn track_playlist(text: &str, title: &TitleProtection) -> String {
    match title.scheme.cenc() {
        Some(_) => {
            let ours = manifest::sample_aes_key("EXT-X-KEY", &title.key);
            manifest::keyed_media_playlist(text, &(ours + &manifest::system_key_lines(&title.key, false)))
        }
        None => media(text),
    }
}

/// The MPD of the title at library path `relative` with its `ContentProtection`; `None` under
/// `aes-128`, which has no DASH.
pub fn mpd(text: &str, relative: &str, title: &TitleProtection) -> Option<String> {
    title.scheme.cenc()?;
    // The licence URL is absolute on this host: players resolve it against the page, not the MPD.
    let mut url = String::new();
    for segment in relative.split('/') {
        url.push('/');
        url.extend(utf8_percent_encode(segment, crate::library::names::SEGMENT));
    }
    url.push('/');
    url.push_str(CLEARKEY);
    Some(manifest::protected_mpd(text, &title.key, &url))
}

/// A track's init segment: with `sinf` and `pssh` under CENC, as it is under AES-128.
pub fn track_init(init: &[u8], title: &TitleProtection) -> Result<Vec<u8>, String> {
    match title.scheme.cenc() {
        Some(_) => protect_init(init, &title.key).map_err(|e| e.to_string()),
        None => Ok(init.to_vec()),
    }
}

/// Media segment `n` of `only` (a track, or the muxed rendition) planned as `plan`, read from
/// the library and encrypted, as the parts of the response (a CENC segment's payload is encrypted
/// where it was read, and goes out after its new header, never copied); `Ok(Err(reason))` when it
/// cannot be.
#[allow(clippy::too_many_arguments)]
pub fn segment(
    library: &Library,
    version: &FileVersion,
    tables: &Mp4File,
    index: &SegmentIndex,
    plan: &SegmentPlan,
    n: usize,
    only: Option<Packaged>,
    title: &TitleProtection,
) -> Result<Result<Vec<Segment>, String>, LibraryError> {
    let mut payload = library.read_ranges(version, &plan.ranges)?;
    match (only, title.scheme.cenc()) {
        (Some(which), Some(_)) => {
            let h264 = index.tracks(tables).find(|(_, w)| *w == which).and_then(|(t, _)| match &t.kind {
                TrackKind::H264(h) => Some(h),
                _ => None,
            });
            let slices = h264.map(|h| SliceHeaders::new(&h.sps, &h.pps));
            let nal_length_size = h264.map(|h| h.nal_length_size);
            let track =
                TrackCrypt { track_id: 1, nal_length_size, slices: slices.as_ref(), iv_tag: which as u8 + 1 };
            Ok(match protect_segment_in_place(&plan.header, &mut payload, &title.key, &[track]) {
                Ok(head) => Ok(vec![Segment::Bytes(head), Segment::Bytes(payload)]),
                Err(e) => Err(e.to_string()),
            })
        }
        _ => {
            let mut whole = plan.header.clone();
            whole.extend_from_slice(&payload);
            sluice_proto::buffers::give(payload);
            Ok(Ok(vec![Segment::Bytes(cipher::aes128_segment(&title.key.key, n as u64, &whole))]))
        }
    }
}
