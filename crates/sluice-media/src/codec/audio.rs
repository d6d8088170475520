//! The audio configuration records: Opus (`dOps`, Encapsulation of Opus in ISO BMFF §4.3.2),
//! AC-3 (`dac3`) and E-AC-3 (`dec3`, ETSI TS 102 366 Annex F), and the channel configuration
//! DASH announces for Dolby audio (the 16-bit channel mask of
//! `urn:dolby:dash:audio_channel_configuration:2011`, ETSI TS 102 366 Table I.1.1), and the
//! fields of an AAC AudioSpecificConfig a live publisher sends (RTMP's sequence header).

use super::{Bits, Bytes, ConfigError};

/// What a `dOps` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpusRecord {
    /// OutputChannelCount.
    pub channels: u8,
    /// PreSkip: samples (at 48 kHz) the decoder drops first.
    pub pre_skip: u16,
    /// InputSampleRate: the rate of the source, informational.
    pub input_sample_rate: u32,
    /// ChannelMappingFamily (0: mono or stereo, 1: Vorbis order up to 8 channels).
    pub mapping_family: u8,
}

impl OpusRecord {
    /// An `Opus` sample entry carrying this record as its `dOps`: what a track whose
    /// configuration came another way (a live publisher's SDP) is packaged with.
    pub fn sample_entry(&self) -> Vec<u8> {
        use mp4_atom::{Audio, Dops, Encode, Opus};
        let entry = Opus {
            audio: Audio {
                data_reference_index: 1,
                channel_count: u16::from(self.channels),
                sample_size: 16,
                sample_rate: 48_000u16.into(),
            },
            dops: Dops {
                output_channel_count: self.channels,
                pre_skip: self.pre_skip,
                input_sample_rate: self.input_sample_rate,
                output_gain: 0,
                channel_mapping: None,
            },
            btrt: None,
        };
        let mut out = Vec::new();
        // Encoding into a Vec fails only for fields out of range, which these are not.
        let _ = entry.encode(&mut out);
        out
    }

    /// Parses the body of a `dOps` box.
    pub fn parse(data: &[u8]) -> Result<OpusRecord, ConfigError> {
        let mut r = Bytes::new(data, "dOps");
        let version = r.u8()?;
        if version != 0 {
            return Err(ConfigError::Version { record: "dOps", version });
        }
        let channels = r.u8()?;
        let pre_skip = r.u16()?;
        let input_sample_rate = r.u32()?;
        r.u16()?; // OutputGain
        let mapping_family = r.u8()?;
        if channels == 0 {
            return Err(r.invalid("no output channels"));
        }
        if mapping_family == 0 && channels > 2 {
            return Err(r.invalid("mapping family 0 with more than two channels"));
        }
        if mapping_family != 0 {
            let streams = r.u8()?;
            let coupled = r.u8()?;
            if streams == 0 || coupled > streams {
                return Err(r.invalid("a channel mapping with no streams or more coupled than streams"));
            }
            r.take(usize::from(channels))?;
        }
        Ok(OpusRecord { channels, pre_skip, input_sample_rate, mapping_family })
    }
}

/// The sampling rates of an AudioSpecificConfig's (and ADTS's) frequency index (ISO/IEC
/// 14496-3 §1.6.3.4).
pub const AAC_SAMPLING_RATES: [u32; 13] =
    [96_000, 88_200, 64_000, 48_000, 44_100, 32_000, 24_000, 22_050, 16_000, 12_000, 11_025, 8_000, 7_350];

/// The leading fields of an AAC AudioSpecificConfig (ISO/IEC 14496-3 §1.6.2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AudioSpecificConfig {
    /// audioObjectType (2: AAC LC, 5: SBR, 29: PS).
    pub object_type: u8,
    /// The sampling rate, by its index or written out.
    pub sample_rate: u32,
    /// Channels of the channel configuration.
    pub channels: u16,
}

impl AudioSpecificConfig {
    /// Reads the object type, sampling rate and channel configuration. Channel configuration 0
    /// (the layout in a program config element) is refused: the encoders publishers use do
    /// not send it.
    pub fn parse(data: &[u8]) -> Result<AudioSpecificConfig, ConfigError> {
        const RECORD: &str = "AudioSpecificConfig";
        let invalid = |what| ConfigError::Invalid { record: RECORD, what };
        let mut bits = Bits::new(data, RECORD);
        let mut object_type = bits.read(5)?;
        if object_type == 31 {
            object_type = 32 + bits.read(6)?;
        }
        if object_type == 0 {
            return Err(invalid("audio object type 0"));
        }
        let sample_rate = match bits.read(4)? {
            15 => bits.read(24)?,
            index => *AAC_SAMPLING_RATES
                .get(index as usize)
                .ok_or_else(|| invalid("a reserved sampling frequency index"))?,
        };
        let channels = match bits.read(4)? {
            0 => return Err(invalid("channel configuration 0 (a program config element) is not read")),
            c @ 1..=6 => c as u16,
            11 => 7,
            7 | 12 | 14 => 8,
            13 => 24,
            _ => return Err(invalid("a reserved channel configuration")),
        };
        if sample_rate == 0 {
            return Err(invalid("a sampling rate of 0"));
        }
        Ok(AudioSpecificConfig { object_type: object_type as u8, sample_rate, channels })
    }
}

/// Channels of each AC-3 `acmod` (ETSI TS 102 366 Table 4.3), without the LFE.
const ACMOD_CHANNELS: [u16; 8] = [2, 1, 2, 3, 3, 4, 4, 5];

/// The channel mask of each `acmod` (L 0x8000, C 0x4000, R 0x2000, Ls 0x1000, Rs 0x0800,
/// Cs 0x0100); the LFE is 0x0001.
const ACMOD_MASK: [u16; 8] = [0xA000, 0x4000, 0xA000, 0xE000, 0xA100, 0xE100, 0xB800, 0xF800];

/// What a `dac3` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ac3Record {
    /// fscod: 0 48 kHz, 1 44.1 kHz, 2 32 kHz.
    pub fscod: u8,
    /// bsid (8 for AC-3).
    pub bsid: u8,
    /// bsmod: the service type.
    pub bsmod: u8,
    /// acmod: the channel layout.
    pub acmod: u8,
    /// Whether there is an LFE channel.
    pub lfe: bool,
    /// bit_rate_code (ETSI TS 102 366 Table F.2.1).
    pub bit_rate_code: u8,
}

impl Ac3Record {
    /// Parses the body of a `dac3` box.
    pub fn parse(data: &[u8]) -> Result<Ac3Record, ConfigError> {
        let mut b = Bits::new(data, "dac3");
        let fscod = b.read(2)? as u8;
        let bsid = b.read(5)? as u8;
        let bsmod = b.read(3)? as u8;
        let acmod = b.read(3)? as u8;
        let lfe = b.read(1)? == 1;
        let bit_rate_code = b.read(5)? as u8;
        if fscod == 3 {
            return Err(ConfigError::Invalid { record: "dac3", what: "reserved sample rate code" });
        }
        Ok(Ac3Record { fscod, bsid, bsmod, acmod, lfe, bit_rate_code })
    }

    /// Channels, the LFE counted.
    pub fn channels(&self) -> u16 {
        ACMOD_CHANNELS[usize::from(self.acmod & 7)] + u16::from(self.lfe)
    }

    /// The Dolby channel configuration value for DASH (4 hexadecimal digits, `F801` for 5.1).
    pub fn channel_configuration(&self) -> String {
        format!("{:04X}", ACMOD_MASK[usize::from(self.acmod & 7)] | u16::from(self.lfe))
    }
}

/// One independent substream of a `dec3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eac3Substream {
    /// fscod.
    pub fscod: u8,
    /// bsid (16 for E-AC-3).
    pub bsid: u8,
    /// acmod.
    pub acmod: u8,
    /// Whether there is an LFE channel.
    pub lfe: bool,
    /// Dependent substreams.
    pub dependents: u8,
    /// chan_loc of the dependent substreams: the channels they add.
    pub chan_loc: u16,
}

/// What a `dec3` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Eac3Record {
    /// data_rate in kbit/s.
    pub data_rate: u16,
    /// The independent substreams (at least one).
    pub substreams: Vec<Eac3Substream>,
}

/// The mask bit of each `chan_loc` bit (ETSI TS 102 366 Table F.6.1 to Table I.1.1): Lc/Rc,
/// Lrs/Rrs, Cs, Ts, Lsd/Rsd, Lw/Rw, Lvh/Rvh, Cvh, LFE2.
const CHAN_LOC_MASK: [u16; 9] = [0x0400, 0x0200, 0x0100, 0x0080, 0x0040, 0x0020, 0x0010, 0x0008, 0x0002];

/// Channels each `chan_loc` bit adds.
const CHAN_LOC_CHANNELS: [u16; 9] = [2, 2, 1, 1, 2, 2, 2, 1, 1];

impl Eac3Record {
    /// Parses the body of a `dec3` box.
    pub fn parse(data: &[u8]) -> Result<Eac3Record, ConfigError> {
        let mut b = Bits::new(data, "dec3");
        let data_rate = b.read(13)? as u16;
        let count = b.read(3)? + 1;
        let mut substreams = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let fscod = b.read(2)? as u8;
            let bsid = b.read(5)? as u8;
            b.read(1 + 1 + 3)?; // reserved, asvc, bsmod
            let acmod = b.read(3)? as u8;
            let lfe = b.read(1)? == 1;
            b.read(3)?;
            let dependents = b.read(4)? as u8;
            let chan_loc = if dependents > 0 { b.read(9)? as u16 } else { b.read(1).map(|_| 0)? };
            if fscod == 3 {
                return Err(ConfigError::Invalid { record: "dec3", what: "reserved sample rate code" });
            }
            substreams.push(Eac3Substream { fscod, bsid, acmod, lfe, dependents, chan_loc });
        }
        Ok(Eac3Record { data_rate, substreams })
    }

    fn bits(&self) -> impl Iterator<Item = usize> + '_ {
        let loc = self.substreams[0].chan_loc;
        (0..9).filter(move |i| loc & (1 << (8 - i)) != 0)
    }

    /// Channels of the first independent substream with its dependents, the LFE counted.
    pub fn channels(&self) -> u16 {
        let s = &self.substreams[0];
        ACMOD_CHANNELS[usize::from(s.acmod & 7)]
            + u16::from(s.lfe)
            + self.bits().map(|i| CHAN_LOC_CHANNELS[i]).sum::<u16>()
    }

    /// The Dolby channel configuration value for DASH of the first independent substream with
    /// its dependents.
    pub fn channel_configuration(&self) -> String {
        let s = &self.substreams[0];
        let mask = self
            .bits()
            .fold(ACMOD_MASK[usize::from(s.acmod & 7)] | u16::from(s.lfe), |m, i| m | CHAN_LOC_MASK[i]);
        format!("{mask:04X}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opus_stereo_and_surround() {
        let stereo = [0, 2, 0x01, 0x38, 0, 0, 0xBB, 0x80, 0, 0, 0];
        let rec = OpusRecord::parse(&stereo).unwrap();
        assert_eq!(
            (rec.channels, rec.pre_skip, rec.input_sample_rate, rec.mapping_family),
            (2, 312, 48000, 0)
        );
        for cut in 0..stereo.len() {
            assert!(OpusRecord::parse(&stereo[..cut]).is_err());
        }
        let six = [0, 6, 0x01, 0x38, 0, 0, 0xBB, 0x80, 0, 0, 1, 4, 2, 0, 4, 1, 2, 3, 5];
        assert_eq!(OpusRecord::parse(&six).unwrap().channels, 6);
        assert!(OpusRecord::parse(&six[..18]).is_err());
        let bad = [0, 6, 0x01, 0x38, 0, 0, 0xBB, 0x80, 0, 0, 0];
        assert!(matches!(OpusRecord::parse(&bad), Err(ConfigError::Invalid { .. })));
        assert!(matches!(OpusRecord::parse(&[1; 11]), Err(ConfigError::Version { version: 1, .. })));
    }

    #[test]
    fn audio_specific_configs() {
        // AAC LC, 44.1 kHz, mono (what ffmpeg's aac encoder writes for the sine source).
        let lc = AudioSpecificConfig::parse(&[0x12, 0x08]).unwrap();
        assert_eq!((lc.object_type, lc.sample_rate, lc.channels), (2, 44_100, 1));
        // AAC LC, 48 kHz, stereo.
        assert_eq!(AudioSpecificConfig::parse(&[0x11, 0x90]).unwrap().sample_rate, 48_000);
        // An explicit rate (index 15): 0x00BB80 is 48,000.
        let explicit = AudioSpecificConfig::parse(&[0x17, 0x80, 0x5D, 0xC0, 0x10]).unwrap();
        assert_eq!((explicit.sample_rate, explicit.channels), (48_000, 2));
        assert!(AudioSpecificConfig::parse(&[0x12]).is_err());
        assert!(matches!(AudioSpecificConfig::parse(&[0x12, 0x00]), Err(ConfigError::Invalid { .. })));
        assert!(matches!(AudioSpecificConfig::parse(&[0x16, 0x88]), Err(ConfigError::Invalid { .. })));
    }

    /// ffmpeg's `ac3` encoder, 48 kHz stereo at 192 kbit/s: fscod 0, bsid 8, bsmod 0, acmod 2,
    /// no LFE, bit_rate_code 10.
    #[test]
    fn ac3_stereo_and_five_one() {
        let rec = Ac3Record::parse(&[0x10, 0x11, 0x40]).unwrap();
        assert_eq!((rec.fscod, rec.bsid, rec.acmod, rec.lfe, rec.bit_rate_code), (0, 8, 2, false, 10));
        assert_eq!((rec.channels(), rec.channel_configuration().as_str()), (2, "A000"));
        // acmod 7 with LFE: 5.1.
        let five_one = Ac3Record::parse(&[0x10, 0x3D, 0xE0]).unwrap();
        assert_eq!((five_one.acmod, five_one.lfe), (7, true));
        assert_eq!((five_one.channels(), five_one.channel_configuration().as_str()), (6, "F801"));
        assert!(Ac3Record::parse(&[0x10, 0x11]).is_err());
        assert!(matches!(Ac3Record::parse(&[0xD0, 0x11, 0x40]), Err(ConfigError::Invalid { .. })));
    }

    /// ffmpeg's `eac3` encoder, 48 kHz 5.1: one independent substream, bsid 16, acmod 7, LFE.
    #[test]
    fn eac3_five_one_and_a_dependent_substream() {
        // data_rate 256 (0x100 << 3), one substream; fscod 0, bsid 16, asvc 0, bsmod 0,
        // acmod 7, lfe 1, reserved, no dependents, reserved bit.
        let raw = [0x08, 0x00, 0x20, 0x0F, 0x00];
        let rec = Eac3Record::parse(&raw).unwrap();
        assert_eq!(rec.data_rate, 256);
        assert_eq!((rec.substreams[0].bsid, rec.substreams[0].acmod, rec.substreams[0].lfe), (16, 7, true));
        assert_eq!((rec.channels(), rec.channel_configuration().as_str()), (6, "F801"));
        // One dependent substream adding Lrs/Rrs (7.1): chan_loc bit 1.
        let seven_one = [0x08, 0x00, 0x20, 0x0F, 0x02, 0x80];
        let rec = Eac3Record::parse(&seven_one).unwrap();
        assert_eq!(rec.substreams[0].dependents, 1);
        assert_eq!((rec.channels(), rec.channel_configuration().as_str()), (8, "FA01"));
        for cut in 0..raw.len() {
            assert!(Eac3Record::parse(&raw[..cut]).is_err());
        }
    }
}
