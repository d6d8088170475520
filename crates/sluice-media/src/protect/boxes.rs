//! The boxes of Common Encryption, added to what [`crate::hls::fmp4`] writes.
//!
//! Owns two rewrites. [`protect_init`] turns an init segment's `avc1`/`mp4a` sample entries into
//! `encv`/`enca` with a `sinf` (`frma` with the original format, `schm`, `schi`/`tenc` with the
//! default KID and the scheme's IV and pattern) and appends a `pssh` per system to the `moov`:
//! the W3C common one listing the KID, then any the configuration gives. [`protect_segment`]
//! encrypts each sample of a media segment in place and adds to its `traf` a `senc` (per-sample
//! IVs for `cenc`, subsample maps for video), a `saiz` and a `saio` whose offset points at the
//! `senc`'s first sample entry (from the start of the `moof`, as `default-base-is-moof` makes
//! every `traf` offset); each `traf`'s samples are laid out together under one `trun`. The `moof` is
//! decoded and written again with `mp4-atom`; the init segment, whose boxes `mp4-atom` cannot
//! all write (`encv`, `sinf`, `pssh`), is spliced: the new boxes are inserted and their
//! ancestors' sizes grown. It does not choose keys or cut segments.

use mp4_atom::{Decode, Encode, Moof, Saio, Saiz, Senc, SencBoxVersion, Trun, TrunSamples};

use super::cipher::{cbcs_sample, cenc_sample};
use super::slice::SliceHeaders;
use super::subsample::subsamples;
use super::{ProtectError, Scheme, SystemData, TitleKey, COMMON_SYSTEM_ID};

/// A track of a segment to encrypt: its fMP4 track id and what its samples are.
#[derive(Debug, Clone, Copy)]
pub struct TrackCrypt<'a> {
    /// The `tfhd` track id.
    pub track_id: u32,
    /// H.264 with NAL lengths of this many bytes (encrypted by subsample), or `None` for audio
    /// (encrypted whole).
    pub nal_length_size: Option<u8>,
    /// Its parameter sets, to keep whole slice headers clear (else the first 32 bytes of each
    /// slice are).
    pub slices: Option<&'a SliceHeaders>,
    /// The first byte of every `cenc` IV of the track: its kind (1 video, 2 audio), so two tracks
    /// under one key never share an IV, in the muxed and the per-track segments alike.
    pub iv_tag: u8,
}

/// The `cbcs` pattern of video (1 block encrypted in 10), and of audio (every block).
const VIDEO_PATTERN: (u8, u8) = (1, 9);
const AUDIO_PATTERN: (u8, u8) = (0, 0);

/// A box of `kind` around `body`.
fn boxed(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 8);
    out.extend_from_slice(&(body.len() as u32 + 8).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(body);
    out
}

/// A full box (version and flags) of `kind` around `body`.
fn full_box(kind: &[u8; 4], version: u8, flags: u32, body: &[u8]) -> Vec<u8> {
    let mut inner = (flags & 0x00ff_ffff | u32::from(version) << 24).to_be_bytes().to_vec();
    inner.extend_from_slice(body);
    boxed(kind, &inner)
}

/// The `sinf` of a sample entry whose format was `original`.
fn sinf(original: [u8; 4], title: &TitleKey, video: bool) -> Vec<u8> {
    let frma = boxed(b"frma", &original);
    let mut schm_body = title.scheme.name().as_bytes().to_vec();
    schm_body.extend_from_slice(&0x0001_0000u32.to_be_bytes());
    let schm = full_box(b"schm", 0, 0, &schm_body);
    let tenc = match title.scheme {
        Scheme::Cenc => {
            let mut body = vec![0, 0, 1, 8];
            body.extend_from_slice(&title.kid);
            full_box(b"tenc", 0, 0, &body)
        }
        Scheme::Cbcs => {
            let (crypt, skip) = if video { VIDEO_PATTERN } else { AUDIO_PATTERN };
            let mut body = vec![0, crypt << 4 | skip, 1, 0];
            body.extend_from_slice(&title.kid);
            body.push(16);
            body.extend_from_slice(&title.constant_iv());
            full_box(b"tenc", 1, 0, &body)
        }
    };
    let schi = boxed(b"schi", &tenc);
    boxed(b"sinf", &[frma, schm, schi].concat())
}

/// The `pssh` boxes of `title`: the W3C common system's (version 1, listing the KID), then one
/// per configured system that has one.
pub fn pssh_boxes(title: &TitleKey) -> Vec<Vec<u8>> {
    let mut common = COMMON_SYSTEM_ID.to_vec();
    common.extend_from_slice(&1u32.to_be_bytes());
    common.extend_from_slice(&title.kid);
    common.extend_from_slice(&0u32.to_be_bytes());
    let mut out = vec![full_box(b"pssh", 1, 0, &common)];
    out.extend(title.systems.iter().filter_map(system_pssh));
    out
}

/// The `pssh` box of a configured system, as given (version 1 when it lists KIDs, else 0);
/// `None` for a system without one.
pub fn system_pssh(system: &SystemData) -> Option<Vec<u8>> {
    let pssh = system.pssh.as_ref()?;
    let mut body = system.system_id.to_vec();
    if !pssh.kids.is_empty() {
        body.extend_from_slice(&(pssh.kids.len() as u32).to_be_bytes());
        pssh.kids.iter().for_each(|kid| body.extend_from_slice(kid));
    }
    body.extend_from_slice(&(pssh.data.len() as u32).to_be_bytes());
    body.extend_from_slice(&pssh.data);
    Some(full_box(b"pssh", u8::from(!pssh.kids.is_empty()), 0, &body))
}

/// A box found in a buffer: its type, where it starts, where its body starts and where it ends.
#[derive(Debug, Clone, Copy)]
struct Span {
    kind: [u8; 4],
    start: usize,
    body: usize,
    end: usize,
}

/// The boxes lying back to back in `buf[from..to]` (32-bit sizes: an init segment's).
fn children(buf: &[u8], from: usize, to: usize) -> Result<Vec<Span>, ProtectError> {
    let mut out = Vec::new();
    let mut at = from;
    while at + 8 <= to {
        let size = u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
        if size < 8 || at + size > to {
            return Err(ProtectError::Malformed("a box runs past its parent"));
        }
        let kind = [buf[at + 4], buf[at + 5], buf[at + 6], buf[at + 7]];
        out.push(Span { kind, start: at, body: at + 8, end: at + size });
        at += size;
    }
    Ok(out)
}

fn find(buf: &[u8], parent: Span, kind: &[u8; 4]) -> Result<Span, ProtectError> {
    children(buf, parent.body, parent.end)?
        .into_iter()
        .find(|s| &s.kind == kind)
        .ok_or(ProtectError::Malformed("a box is missing from the init segment"))
}

/// `init` (`ftyp` + `moov`, as `hls` writes it) with its H.264 and AAC tracks protected under
/// `title` and the `pssh` boxes appended to the `moov`. Other tracks are left as they are.
pub fn protect_init(init: &[u8], title: &TitleKey) -> Result<Vec<u8>, ProtectError> {
    let whole = Span { kind: *b"root", start: 0, body: 0, end: init.len() };
    let moov = find(init, whole, b"moov")?;
    // (where, what, the boxes that grow by it)
    let mut inserts: Vec<(usize, Vec<u8>, Vec<usize>)> = Vec::new();
    let mut renames: Vec<(usize, [u8; 4])> = Vec::new();
    for trak in children(init, moov.body, moov.end)?.into_iter().filter(|s| &s.kind == b"trak") {
        let mdia = find(init, trak, b"mdia")?;
        let minf = find(init, mdia, b"minf")?;
        let stbl = find(init, minf, b"stbl")?;
        let stsd = find(init, stbl, b"stsd")?;
        // stsd is a full box with an entry count before its entries.
        let Some(entry) = children(init, stsd.body + 8, stsd.end)?.into_iter().next() else { continue };
        let (protected, video) = match &entry.kind {
            b"avc1" | b"avc3" => (*b"encv", true),
            b"mp4a" => (*b"enca", false),
            _ => continue,
        };
        renames.push((entry.start + 4, protected));
        let grown = vec![moov.start, trak.start, mdia.start, minf.start, stbl.start, stsd.start, entry.start];
        inserts.push((entry.end, sinf(entry.kind, title, video), grown));
    }
    inserts.push((moov.end, pssh_boxes(title).concat(), vec![moov.start]));
    let mut out = init.to_vec();
    for (at, kind) in renames {
        out[at..at + 4].copy_from_slice(&kind);
    }
    // From the last insert back, so the places of the earlier ones have not moved.
    inserts.sort_by_key(|(at, ..)| std::cmp::Reverse(*at));
    for (at, bytes, grown) in inserts {
        for start in grown {
            let size = u32::from_be_bytes([out[start], out[start + 1], out[start + 2], out[start + 3]]);
            out[start..start + 4].copy_from_slice(&(size + bytes.len() as u32).to_be_bytes());
        }
        out.splice(at..at, bytes);
    }
    Ok(out)
}

/// A media segment (`header`, the `moof` and `mdat` header `hls` wrote, then `payload`, the
/// `mdat`'s bytes) with its samples encrypted under `title`: the whole segment's bytes. Each
/// `traf`'s samples are laid out together in one `trun` (`hls` writes a `trun` per run of samples
/// lying together in the file, and ffmpeg 5 indexes `senc` entries from the last `trun` of a
/// `traf`, so several would misplace them). `tracks` says which `traf`s to encrypt and how; the
/// `cenc` IVs take the segment's sequence number from the `mfhd`.
pub fn protect_segment(
    header: &[u8],
    payload: &[u8],
    title: &TitleKey,
    tracks: &[TrackCrypt<'_>],
) -> Result<Vec<u8>, ProtectError> {
    let mut mdat = payload.to_vec();
    let mut out = protect_segment_in_place(header, &mut mdat, title, tracks)?;
    out.extend_from_slice(&mdat);
    Ok(out)
}

/// [`protect_segment`] with `payload` encrypted where it lies: the answer is the new header
/// (the `moof` and the `mdat` header), to be sent before `payload`. A segment's payload is
/// megabytes: a copy of it costs a fresh allocation (pages faulted in and zeroed) and a pass
/// over memory, which measured 4× the AES work itself (perf, a quarter core, 720p segments).
/// The samples must lie in `trun` order, back to back, as `hls` writes them.
pub fn protect_segment_in_place(
    header: &[u8],
    payload: &mut [u8],
    title: &TitleKey,
    tracks: &[TrackCrypt<'_>],
) -> Result<Vec<u8>, ProtectError> {
    let mut rest = header;
    let mut moof = Moof::decode(&mut rest)?;
    let mdat_header = rest;
    let sequence = moof.mfhd.sequence_number;
    // The next sample's place in the payload: each must start where the one before ended.
    let mut laid = 0usize;
    // Where each traf's samples start in the mdat payload.
    let mut starts = Vec::with_capacity(moof.traf.len());
    for traf in &mut moof.traf {
        starts.push(laid);
        let track = tracks.iter().find(|t| t.track_id == traf.tfhd.track_id);
        let mut all = Vec::new();
        let mut entries = Vec::new();
        let mut sizes = Vec::new();
        for trun in std::mem::take(&mut traf.trun) {
            let offset = usize::try_from(trun.data_offset.unwrap_or(0)).unwrap_or(0);
            let at = offset
                .checked_sub(header.len())
                .ok_or(ProtectError::Malformed("a trun points before the mdat"))?;
            if at != laid {
                return Err(ProtectError::Malformed("the samples do not lie in trun order"));
            }
            let TrunSamples::Explicit(samples) = trun.samples else {
                return Err(ProtectError::Malformed("a trun without sample sizes"));
            };
            for entry in &samples {
                let size = entry.size.ok_or(ProtectError::Malformed("a trun without sample sizes"))? as usize;
                let sample = payload
                    .get_mut(laid..laid + size)
                    .ok_or(ProtectError::Malformed("a trun points past the mdat"))?;
                laid += size;
                if let Some(track) = track {
                    let before = entries.len();
                    encrypt_sample(title, track, sequence, sizes.len() as u32, sample, &mut entries);
                    // saiz sizes are 8 bits: 41 slices (8-byte IV, 6 bytes each) at most.
                    let info = u8::try_from(entries.len() - before)
                        .map_err(|_| ProtectError::Malformed("a sample has too many slices for saiz"))?;
                    sizes.push(info);
                }
            }
            all.extend(samples);
        }
        traf.trun = vec![Trun { data_offset: Some(0), samples: TrunSamples::Explicit(all) }];
        if entries.is_empty() {
            // Clear, or cbcs audio: a constant IV and no subsamples leave nothing per sample.
            continue;
        }
        let mut data = (sizes.len() as u32).to_be_bytes().to_vec();
        data.extend_from_slice(&entries);
        let use_subsamples = track.is_some_and(|t| t.nal_length_size.is_some());
        traf.senc = Some(Senc { version: SencBoxVersion::V0, use_subsamples, data });
        let same = sizes.iter().all(|&s| s == sizes[0]);
        traf.saiz = vec![Saiz {
            aux_info: None,
            default_sample_info_size: if same { sizes[0] } else { 0 },
            sample_count: sizes.len() as u32,
            sample_info_size: if same { Vec::new() } else { sizes },
        }];
        traf.saio = vec![Saio { aux_info: None, offsets: vec![0] }];
    }
    if laid != payload.len() {
        return Err(ProtectError::Malformed("the truns do not cover the mdat"));
    }
    let mut out = Vec::with_capacity(header.len() + 1024);
    moof.encode(&mut out)?;
    let base = out.len() + mdat_header.len();
    for (traf, start) in moof.traf.iter_mut().zip(&starts) {
        let offset =
            i32::try_from(base + start).map_err(|_| ProtectError::Malformed("segment of 2 GiB or more"))?;
        traf.trun[0].data_offset = Some(offset);
    }
    // Where each traf's senc sample data landed: past the senc's header, version and flags, and
    // sample count, counted from the moof's first byte (default-base-is-moof).
    let root = Span { kind: *b"moof", start: 0, body: 8, end: out.len() };
    let trafs = children(&out, root.body, root.end)?.into_iter().filter(|s| &s.kind == b"traf");
    for (traf, span) in moof.traf.iter_mut().zip(trafs) {
        if traf.senc.is_some() {
            let senc = find(&out, span, b"senc")?;
            traf.saio = vec![Saio { aux_info: None, offsets: vec![(senc.start + 16) as u64] }];
        }
    }
    let first_len = out.len();
    out.clear();
    moof.encode(&mut out)?;
    if out.len() != first_len {
        return Err(ProtectError::Malformed("the moof changed size when its offsets were set"));
    }
    out.extend_from_slice(mdat_header);
    Ok(out)
}

/// Encrypts one sample of `track` and appends its `senc` entry (IV, subsamples) to `entries`.
fn encrypt_sample(
    title: &TitleKey,
    track: &TrackCrypt<'_>,
    sequence: u32,
    index: u32,
    sample: &mut [u8],
    entries: &mut Vec<u8>,
) {
    let map = track.nal_length_size.map(|n| subsamples(sample, n, track.slices));
    match title.scheme {
        Scheme::Cenc => {
            let mut iv = [0u8; 8];
            iv[0] = track.iv_tag;
            iv[1..5].copy_from_slice(&sequence.to_be_bytes());
            iv[5..].copy_from_slice(&index.to_be_bytes()[1..]);
            cenc_sample(&title.key, &iv, sample, map.as_deref());
            entries.extend_from_slice(&iv);
        }
        Scheme::Cbcs => {
            let pattern = if map.is_some() { VIDEO_PATTERN } else { AUDIO_PATTERN };
            cbcs_sample(&title.key, &title.constant_iv(), sample, map.as_deref(), pattern);
        }
    }
    if let Some(map) = map {
        entries.extend_from_slice(&(map.len() as u16).to_be_bytes());
        for s in &map {
            entries.extend_from_slice(&s.clear.to_be_bytes());
            entries.extend_from_slice(&s.protected.to_be_bytes());
        }
    }
}
