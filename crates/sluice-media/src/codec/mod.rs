//! Codec configuration records and sample entries of the codecs sluice packages beside H.264
//! and AAC: HEVC (`hvcC`), AV1 (`av1C`), VP9 (`vpcC`), Opus (`dOps`), AC-3 (`dac3`) and E-AC-3
//! (`dec3`), with the colour (`colr`), HDR (`mdcv`, `clli`) and Dolby Vision (`dvcC`, `dvvC`,
//! `dvwC`) boxes of a visual sample entry.
//!
//! This module owns parsing those records from bytes (sans-I/O: every parser takes a slice and
//! returns a typed [`ConfigError`] for anything malformed, never a panic) and what is computed
//! from them: the RFC 6381 codec string of a track (`hvc1.2.4.L153.B0`, `av01.0.08M.10`,
//! `vp09.02.40.10`, `opus`, `ac-3`, `ec-3`), its HLS `VIDEO-RANGE`, the Dolby channel
//! configuration DASH announces. A track of these codecs keeps its whole sample entry
//! ([`VideoEntry::sample_entry`], [`AudioEntry::sample_entry`]) so a packager carries it into an
//! init segment byte for byte (colour, HDR and aspect boxes included). It does not find the
//! sample entry in a file ([`crate::mp4`] does) or write boxes ([`crate::hls`] does).

pub mod audio;
pub mod av1;
pub mod dovi;
pub mod entry;
pub mod hevc;
pub mod vp9;

pub use audio::{Ac3Record, AudioSpecificConfig, Eac3Record, OpusRecord};
pub use av1::Av1Record;
pub use dovi::DolbyVision;
pub use entry::{
    parse_sample_entry, AudioCodec, AudioEntry, CodecEntry, Colour, ContentLightLevel, InBandParameterSets,
    MasteringDisplay, VideoCodec, VideoEntry, VideoRange,
};
pub use hevc::HevcRecord;
pub use vp9::Vp9Record;

/// Why a configuration record or sample entry could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The record ends before a field it must have.
    #[error("{record} is truncated")]
    Truncated {
        /// The box or record (`hvcC`, `dec3`, …).
        record: &'static str,
    },
    /// A field holds a value the specification does not allow.
    #[error("{record}: {what}")]
    Invalid {
        /// The box or record.
        record: &'static str,
        /// What was wrong.
        what: &'static str,
    },
    /// A record version this parser does not know.
    #[error("{record} version {version} is not supported")]
    Version {
        /// The box or record.
        record: &'static str,
        /// The version the record declares.
        version: u8,
    },
    /// The sample entry lacks the configuration box its codec requires.
    #[error("{entry} sample entry has no {record} box")]
    Missing {
        /// The sample entry's type.
        entry: &'static str,
        /// The missing box.
        record: &'static str,
    },
}

/// A cursor over a record's bytes, each read checked.
pub(crate) struct Bytes<'a> {
    rest: &'a [u8],
    record: &'static str,
}

impl<'a> Bytes<'a> {
    pub(crate) fn new(data: &'a [u8], record: &'static str) -> Bytes<'a> {
        Bytes { rest: data, record }
    }

    pub(crate) fn truncated(&self) -> ConfigError {
        ConfigError::Truncated { record: self.record }
    }

    pub(crate) fn invalid(&self, what: &'static str) -> ConfigError {
        ConfigError::Invalid { record: self.record, what }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], ConfigError> {
        if self.rest.len() < n {
            return Err(self.truncated());
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, ConfigError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, ConfigError> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, ConfigError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn rest(&self) -> &'a [u8] {
        self.rest
    }
}

/// A most-significant-bit-first reader over a record's bytes (the Dolby records pack fields
/// across byte boundaries).
pub(crate) struct Bits<'a> {
    data: &'a [u8],
    at: usize,
    record: &'static str,
}

impl<'a> Bits<'a> {
    pub(crate) fn new(data: &'a [u8], record: &'static str) -> Bits<'a> {
        Bits { data, at: 0, record }
    }

    /// The next `n` (at most 32) bits.
    pub(crate) fn read(&mut self, n: u32) -> Result<u32, ConfigError> {
        debug_assert!(n <= 32);
        let mut value = 0u32;
        for _ in 0..n {
            let byte = *self.data.get(self.at / 8).ok_or(ConfigError::Truncated { record: self.record })?;
            let bit = (byte >> (7 - self.at % 8)) & 1;
            value = value << 1 | u32::from(bit);
            self.at += 1;
        }
        Ok(value)
    }
}
