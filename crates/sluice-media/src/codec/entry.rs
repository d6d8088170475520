//! A sample entry (ISO/IEC 14496-12 §8.5.2) of the codecs this module reads: its fields, its
//! configuration record, and for video its colour (`colr`), mastering display (`mdcv`) and
//! content light level (`clli`) boxes, and Dolby Vision (`dvcC`, `dvvC`, `dvwC`). The entry's
//! bytes are kept whole for the packager.

use super::dovi::dolby_vision_fourcc;
use super::{
    Ac3Record, Av1Record, Bytes, ConfigError, DolbyVision, Eac3Record, HevcRecord, OpusRecord, Vp9Record,
};

/// Colour description: ISO/IEC 23091-2 code points, from an `nclx` (or QuickTime `nclc`)
/// `colr` box or from a `vpcC`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Colour {
    /// ColourPrimaries (1 BT.709, 9 BT.2020).
    pub primaries: u16,
    /// TransferCharacteristics (1 BT.709, 16 PQ, 18 HLG).
    pub transfer: u16,
    /// MatrixCoefficients (1 BT.709, 9 BT.2020 non-constant).
    pub matrix: u16,
    /// Full range (else limited, "TV" range).
    pub full_range: bool,
}

impl Colour {
    /// Whether every code point names something (none is 0 or 2, "unspecified").
    pub fn is_specified(&self) -> bool {
        [self.primaries, self.transfer, self.matrix].iter().all(|&v| v != 2 && v != 0)
    }

    /// Whether it is what codec strings assume by default: BT.709, limited range.
    pub fn is_default(&self) -> bool {
        (self.primaries, self.transfer, self.matrix, self.full_range) == (1, 1, 1, false)
    }

    /// The HLS `VIDEO-RANGE` of the transfer characteristics.
    pub fn video_range(&self) -> VideoRange {
        match self.transfer {
            16 => VideoRange::Pq,
            18 => VideoRange::Hlg,
            _ => VideoRange::Sdr,
        }
    }
}

/// The HLS `VIDEO-RANGE` of a video track (RFC 8216bis §4.4.6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VideoRange {
    /// Standard dynamic range.
    Sdr,
    /// SMPTE ST 2084 (perceptual quantizer).
    Pq,
    /// ARIB STD-B67 (hybrid log-gamma).
    Hlg,
}

impl VideoRange {
    /// As HLS writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            VideoRange::Sdr => "SDR",
            VideoRange::Pq => "PQ",
            VideoRange::Hlg => "HLG",
        }
    }
}

/// Mastering display colour volume (`mdcv`, SMPTE ST 2086), in the box's units: chromaticities
/// in 0.00002, luminance in 0.0001 cd/m².
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MasteringDisplay {
    /// x, y of the three primaries (G, B, R as HEVC orders them).
    pub primaries: [(u16, u16); 3],
    /// x, y of the white point.
    pub white_point: (u16, u16),
    /// Maximum luminance.
    pub max_luminance: u32,
    /// Minimum luminance.
    pub min_luminance: u32,
}

/// Content light level (`clli`, CTA-861.3), in cd/m².
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentLightLevel {
    /// MaxCLL.
    pub max_content: u16,
    /// MaxFALL.
    pub max_frame_average: u16,
}

/// A video codec's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VideoCodec {
    /// HEVC, from `hvcC` (sample entry `hvc1` or `hev1`).
    Hevc(HevcRecord),
    /// AV1, from `av1C` (`av01`).
    Av1(Av1Record),
    /// VP9, from `vpcC` (`vp09`).
    Vp9(Vp9Record),
}

/// Whether an `hev1` track's samples carry parameter sets, as far as its first keyframe shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InBandParameterSets {
    /// Not looked at (not `hev1`, or the sample could not be read).
    Unknown,
    /// The first keyframe carries none.
    None,
    /// Those it carries are all in the `hvcC`.
    SameAsRecord,
    /// It carries one the `hvcC` does not hold.
    Different,
}

/// A video track's sample entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoEntry {
    /// The codec and its record.
    pub codec: VideoCodec,
    /// Width in pixels, from the sample entry.
    pub width: u16,
    /// Height in pixels.
    pub height: u16,
    /// Colour, from `colr` (or a VP9 track's `vpcC`).
    pub colour: Option<Colour>,
    /// Mastering display, from `mdcv`.
    pub mastering: Option<MasteringDisplay>,
    /// Content light level, from `clli`.
    pub light_level: Option<ContentLightLevel>,
    /// Dolby Vision, from `dvcC`, `dvvC` or `dvwC` (HEVC and AV1 only).
    pub dolby_vision: Option<DolbyVision>,
    /// The whole sample entry box, header included.
    pub sample_entry: Vec<u8>,
    /// What an `hev1` track's first keyframe carries ([`InBandParameterSets::Unknown`] until
    /// the demuxer has looked).
    pub in_band: InBandParameterSets,
}

impl VideoEntry {
    /// The sample entry type in the file (`hvc1`, `hev1`, `av01`, `vp09`).
    pub fn fourcc(&self) -> [u8; 4] {
        self.sample_entry[4..8].try_into().expect("a sample entry has a header")
    }

    /// The sample entry type a CMAF init segment carries: `hvc1` for an `hev1` track whose
    /// `hvcC` holds every parameter set its keyframe carries (ISO/IEC 14496-15 §8.4.1.1.1:
    /// `hvc1` keeps them in the sample entry, which is what HLS requires), else the file's; for
    /// Dolby Vision without a base layer a player can decode alone (profile 5), the Dolby Vision
    /// type of that (`dvh1`, `dvhe`, `dav1`), which its `CODECS` names.
    pub fn carried_fourcc(&self) -> [u8; 4] {
        let base = self.base_fourcc();
        match self.dolby_vision {
            Some(dv) if dv.dolby_vision_only() => dolby_vision_fourcc(&base).unwrap_or(base),
            _ => base,
        }
    }

    /// [`VideoEntry::carried_fourcc`] but for Dolby Vision.
    fn base_fourcc(&self) -> [u8; 4] {
        match &self.codec {
            VideoCodec::Hevc(rec)
                if &self.fourcc() == b"hev1"
                    && rec.has_parameter_sets()
                    && matches!(
                        self.in_band,
                        InBandParameterSets::None | InBandParameterSets::SameAsRecord
                    ) =>
            {
                *b"hvc1"
            }
            _ => self.fourcc(),
        }
    }

    /// The sample entry for an init segment: the file's, its type [`VideoEntry::carried_fourcc`].
    pub fn carried_sample_entry(&self) -> Vec<u8> {
        let mut entry = self.sample_entry.clone();
        entry[4..8].copy_from_slice(&self.carried_fourcc());
        entry
    }

    /// The RFC 6381 codec string of the carried sample entry: the Dolby Vision string for a
    /// profile 5 stream, else the base codec's.
    pub fn codec_string(&self) -> String {
        if let Some(dv) = self.dolby_vision.filter(DolbyVision::dolby_vision_only) {
            return dv.codec_string(&String::from_utf8_lossy(&self.carried_fourcc()));
        }
        match &self.codec {
            VideoCodec::Hevc(rec) => rec.codec_string(&String::from_utf8_lossy(&self.carried_fourcc())),
            VideoCodec::Av1(rec) => rec.codec_string(self.colour.as_ref()),
            VideoCodec::Vp9(rec) => rec.codec_string(),
        }
    }

    /// HLS `SUPPLEMENTAL-CODECS` of a backward-compatible Dolby Vision stream: its codec string
    /// and brand, `dvh1.08.07/db1p` (Apple's HLS authoring specification).
    pub fn supplemental_codecs(&self) -> Option<String> {
        let dv = self.dolby_vision.filter(DolbyVision::backward_compatible)?;
        let fourcc = dolby_vision_fourcc(&self.carried_fourcc())?;
        Some(format!("{}/{}", dv.codec_string(&String::from_utf8_lossy(&fourcc)), dv.brand()?))
    }

    /// The HLS `VIDEO-RANGE`, when the entry says how its transfer is: the `colr`'s (of the base
    /// layer, for Dolby Vision), else what the Dolby Vision record says of it; PQ for profile 5.
    pub fn video_range(&self) -> Option<VideoRange> {
        if let Some(dv) = self.dolby_vision.filter(DolbyVision::dolby_vision_only) {
            return dv.video_range();
        }
        let colour = self.colour.filter(|c| c.transfer != 2 && c.transfer != 0).map(|c| c.video_range());
        colour.or_else(|| self.dolby_vision.filter(DolbyVision::backward_compatible)?.video_range())
    }

    /// A short name for people (`HEVC`, `AV1`, `VP9`).
    pub fn name(&self) -> &'static str {
        match self.codec {
            VideoCodec::Hevc(_) => "HEVC",
            VideoCodec::Av1(_) => "AV1",
            VideoCodec::Vp9(_) => "VP9",
        }
    }
}

/// An audio codec's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AudioCodec {
    /// Opus, from `dOps` (`Opus`).
    Opus(OpusRecord),
    /// AC-3, from `dac3` (`ac-3`).
    Ac3(Ac3Record),
    /// E-AC-3, from `dec3` (`ec-3`).
    Eac3(Eac3Record),
}

/// An audio track's sample entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AudioEntry {
    /// The codec and its record.
    pub codec: AudioCodec,
    /// Sampling rate in Hz (the entry's; Opus is always 48 kHz).
    pub sample_rate: u32,
    /// Channels, from the record.
    pub channels: u16,
    /// The whole sample entry box, header included.
    pub sample_entry: Vec<u8>,
}

impl AudioEntry {
    /// The RFC 6381 codec string.
    pub fn codec_string(&self) -> &'static str {
        match self.codec {
            AudioCodec::Opus(_) => "opus",
            AudioCodec::Ac3(_) => "ac-3",
            AudioCodec::Eac3(_) => "ec-3",
        }
    }

    /// The Dolby channel configuration DASH announces (`F801`); `None` for Opus.
    pub fn dolby_channel_configuration(&self) -> Option<String> {
        match &self.codec {
            AudioCodec::Opus(_) => None,
            AudioCodec::Ac3(r) => Some(r.channel_configuration()),
            AudioCodec::Eac3(r) => Some(r.channel_configuration()),
        }
    }

    /// A short name for people.
    pub fn name(&self) -> &'static str {
        match self.codec {
            AudioCodec::Opus(_) => "Opus",
            AudioCodec::Ac3(_) => "AC-3",
            AudioCodec::Eac3(_) => "E-AC-3",
        }
    }
}

/// A parsed sample entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodecEntry {
    /// HEVC, AV1 or VP9.
    Video(VideoEntry),
    /// Opus, AC-3 or E-AC-3.
    Audio(AudioEntry),
}

/// ISO/IEC 14496-12 §12.1.3: a visual sample entry's fields take 78 bytes after the header.
const VISUAL_FIELDS: usize = 78;

/// Parses a whole sample entry box (header included). `Ok(None)` for a type this module does
/// not read (`avc1`, `mp4a`, `mp4v`, …): the caller handles those or skips the track.
pub fn parse_sample_entry(data: &[u8]) -> Result<Option<CodecEntry>, ConfigError> {
    let mut r = Bytes::new(data, "sample entry");
    let size = r.u32()? as usize;
    let fourcc: [u8; 4] = r.take(4)?.try_into().expect("4 bytes");
    if size < 8 || size > data.len() {
        return Err(r.invalid("box size does not match its bytes"));
    }
    let entry = &data[..size];
    let body = &entry[8..];
    let entry_name: &'static str = match &fourcc {
        b"hvc1" => "hvc1",
        b"hev1" => "hev1",
        b"dvh1" => "dvh1",
        b"dvhe" => "dvhe",
        b"av01" => "av01",
        b"dav1" => "dav1",
        b"vp09" => "vp09",
        b"Opus" => "Opus",
        b"ac-3" => "ac-3",
        b"ec-3" => "ec-3",
        _ => return Ok(None),
    };
    let missing = |record| ConfigError::Missing { entry: entry_name, record };
    if matches!(&fourcc, b"hvc1" | b"hev1" | b"dvh1" | b"dvhe" | b"av01" | b"dav1" | b"vp09") {
        let mut f = Bytes::new(body, "visual sample entry");
        f.take(24)?;
        let (width, height) = (f.u16()?, f.u16()?);
        let children = body.get(VISUAL_FIELDS..).ok_or_else(|| f.truncated())?;
        let mut config = None;
        let (mut colour, mut mastering, mut light_level, mut dolby_vision) = (None, None, None, None);
        for (kind, payload) in boxes(children)? {
            match (&kind, &fourcc) {
                (b"hvcC", b"hvc1" | b"hev1" | b"dvh1" | b"dvhe") => {
                    config = Some(VideoCodec::Hevc(HevcRecord::parse(payload)?))
                }
                (b"av1C", b"av01" | b"dav1") => config = Some(VideoCodec::Av1(Av1Record::parse(payload)?)),
                (b"vpcC", b"vp09") => config = Some(VideoCodec::Vp9(Vp9Record::parse(payload)?)),
                (b"colr", _) => colour = colour.or(parse_colr(payload)?),
                (b"mdcv", _) => mastering = Some(parse_mdcv(payload)?),
                (b"clli", _) => light_level = Some(parse_clli(payload)?),
                (b"dvcC" | b"dvvC" | b"dvwC", b"hvc1" | b"hev1" | b"dvh1" | b"dvhe" | b"av01" | b"dav1") => {
                    dolby_vision = Some(DolbyVision::parse(payload)?)
                }
                _ => {}
            }
        }
        let codec = config.ok_or_else(|| {
            missing(match &fourcc {
                b"av01" | b"dav1" => "av1C",
                b"vp09" => "vpcC",
                _ => "hvcC",
            })
        })?;
        if let (None, VideoCodec::Vp9(rec)) = (colour, &codec) {
            colour = Some(rec.colour);
        }
        return Ok(Some(CodecEntry::Video(VideoEntry {
            codec,
            width,
            height,
            colour,
            mastering,
            light_level,
            dolby_vision,
            sample_entry: entry.to_vec(),
            in_band: InBandParameterSets::Unknown,
        })));
    }
    // ISO/IEC 14496-12 §12.2.3, with QuickTime's versions 1 and 2 (16 and 36 more bytes).
    let mut f = Bytes::new(body, "audio sample entry");
    f.take(8)?;
    let version = f.u16()?;
    f.take(6)?;
    let entry_channels = f.u16()?;
    f.take(6)?;
    let rate = f.u16()?;
    let fields = match version {
        0 => 28,
        1 => 44,
        2 => 64,
        _ => return Err(f.invalid("unknown sound sample description version")),
    };
    let children = body.get(fields..).ok_or_else(|| f.truncated())?;
    let mut config = None;
    for (kind, payload) in boxes(children)? {
        config = match (&kind, &fourcc) {
            (b"dOps", b"Opus") => Some(AudioCodec::Opus(OpusRecord::parse(payload)?)),
            (b"dac3", b"ac-3") => Some(AudioCodec::Ac3(Ac3Record::parse(payload)?)),
            (b"dec3", b"ec-3") => Some(AudioCodec::Eac3(Eac3Record::parse(payload)?)),
            _ => continue,
        };
    }
    let codec = config.ok_or_else(|| {
        missing(match &fourcc {
            b"Opus" => "dOps",
            b"ac-3" => "dac3",
            _ => "dec3",
        })
    })?;
    let channels = match &codec {
        AudioCodec::Opus(r) => u16::from(r.channels),
        AudioCodec::Ac3(r) => r.channels(),
        AudioCodec::Eac3(r) => r.channels(),
    };
    let sample_rate = match &codec {
        AudioCodec::Opus(_) => 48_000,
        _ => u32::from(rate),
    };
    if sample_rate == 0 || channels == 0 || entry_channels == 0 {
        return Err(f.invalid("no sample rate or no channels"));
    }
    Ok(Some(CodecEntry::Audio(AudioEntry { codec, sample_rate, channels, sample_entry: entry.to_vec() })))
}

/// A child box: its type and payload.
type ChildBox<'a> = ([u8; 4], &'a [u8]);

/// The child boxes of `data`, each checked to lie inside it.
fn boxes(data: &[u8]) -> Result<Vec<ChildBox<'_>>, ConfigError> {
    let mut out = Vec::new();
    let mut r = Bytes::new(data, "sample entry child box");
    // Some muxers pad an entry with up to 7 zero bytes: fewer than a box header ends the list.
    while r.rest().len() >= 8 {
        let size = r.u32()? as usize;
        let kind: [u8; 4] = r.take(4)?.try_into().expect("4 bytes");
        if size == 0 && kind == [0; 4] {
            break;
        }
        let payload =
            r.take(size.checked_sub(8).ok_or_else(|| r.invalid("a box smaller than its header"))?)?;
        out.push((kind, payload));
    }
    Ok(out)
}

/// An `nclx`/`nclc` colour box; `None` for an ICC profile.
fn parse_colr(data: &[u8]) -> Result<Option<Colour>, ConfigError> {
    let mut r = Bytes::new(data, "colr");
    let kind = r.take(4)?;
    if kind != b"nclx" && kind != b"nclc" {
        return Ok(None);
    }
    let (primaries, transfer, matrix) = (r.u16()?, r.u16()?, r.u16()?);
    let full_range = kind == b"nclx" && r.u8()? & 0x80 != 0;
    Ok(Some(Colour { primaries, transfer, matrix, full_range }))
}

fn parse_mdcv(data: &[u8]) -> Result<MasteringDisplay, ConfigError> {
    let mut r = Bytes::new(data, "mdcv");
    let mut primaries = [(0, 0); 3];
    for p in &mut primaries {
        *p = (r.u16()?, r.u16()?);
    }
    let white_point = (r.u16()?, r.u16()?);
    Ok(MasteringDisplay { primaries, white_point, max_luminance: r.u32()?, min_luminance: r.u32()? })
}

fn parse_clli(data: &[u8]) -> Result<ContentLightLevel, ConfigError> {
    let mut r = Bytes::new(data, "clli");
    Ok(ContentLightLevel { max_content: r.u16()?, max_frame_average: r.u16()? })
}

#[cfg(test)]
mod tests;
