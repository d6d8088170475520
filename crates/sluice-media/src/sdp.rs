//! The session description (SDP, RFC 8866) of an indexed MP4 file, as RTSP `DESCRIBE` returns it.
//!
//! This module owns the mapping from a [`Track`]'s codec parameters to SDP media sections: H.264
//! per RFC 6184 §8.2 (`sprop-parameter-sets`, `profile-level-id`, packetization mode 1) and AAC
//! per RFC 3640 §4.1 (`mode=AAC-hbr`, 13-bit sizes, `config=` the AudioSpecificConfig in hex),
//! H.265 per RFC 7798 §7.1, Opus per RFC 7587 §7, AC-3 per RFC 4184 §6 and E-AC-3 per RFC 4598 §6.
//! The SDP is built and written with `sdp-types`, not by string concatenation, so what we write
//! is what an SDP parser reads. It does not choose ports or addresses (RTSP `SETUP` negotiates
//! them; the media lines carry port 0 as RFC 2326 C.1.7 allows) and does not know URLs beyond
//! the relative `a=control:trackID=N`.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};

use base64::Engine as _;
use sdp_types::{Attribute, Connection, Media, Origin, Session, Time};

use crate::codec::{AudioCodec, VideoCodec, VideoEntry};
use crate::mp4::{Mp4File, Track, TrackKind};

/// First RTP dynamic payload type; track `i` of a file uses `FIRST_PAYLOAD_TYPE + i`.
pub const FIRST_PAYLOAD_TYPE: u8 = 96;

/// Settings of the session description that do not come from the file.
#[derive(Debug, Clone)]
pub struct SdpOptions {
    /// `s=` line: the session name (the file's path is a good one).
    pub session_name: String,
    /// `o=` session id; a number (RFC 8866 §5.2), e.g. derived from the file's modification time.
    pub session_id: u64,
    /// `o=` and `c=` address of the server.
    pub address: IpAddr,
    /// A live stream: `a=range:npt=now-` (RFC 2326 C.1.5), no end to seek within.
    pub live: bool,
}

impl Default for SdpOptions {
    fn default() -> Self {
        SdpOptions {
            session_name: "sluice".into(),
            session_id: 0,
            address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            live: false,
        }
    }
}

/// The RTP payload type of track number `index` (its position in [`Mp4File::tracks`]).
pub fn payload_type(index: usize) -> u8 {
    // Mp4File indexes at most MAX_TRACKS (32) tracks, which is exactly the dynamic range.
    FIRST_PAYLOAD_TYPE.saturating_add(index.min(31) as u8)
}

/// The RTP clock rate of a track: 90 kHz for video (RFC 6184 §8.2.1), the sampling rate for AAC.
pub fn clock_rate(track: &Track) -> u32 {
    match &track.kind {
        TrackKind::H264(_) | TrackKind::Video(_) => 90_000,
        TrackKind::Aac(a) => a.sample_rate,
        TrackKind::Audio(a) => a.sample_rate,
    }
}

/// Whether RTSP can send `track`: `Err` with why not for a codec without a packetizer here
/// (its track is left out of the session description and its `SETUP` answers 404).
pub fn rtp_payload_format(track: &Track) -> Result<(), String> {
    match &track.kind {
        TrackKind::H264(_) | TrackKind::Aac(_) => Ok(()),
        TrackKind::Video(v) if matches!(v.codec, VideoCodec::Hevc(_)) => Ok(()),
        // RFC 7587 carries mono and stereo only.
        TrackKind::Audio(a) if matches!(a.codec, AudioCodec::Opus(_)) && a.channels <= 2 => Ok(()),
        TrackKind::Audio(a) if matches!(a.codec, AudioCodec::Ac3(_)) => Ok(()),
        // RFC 4598 §6: the RTP clock is the sampling rate, and only these are registered.
        TrackKind::Audio(a) if matches!(a.codec, AudioCodec::Eac3(_)) => match a.sample_rate {
            32_000 | 44_100 | 48_000 => Ok(()),
            rate => {
                Err(format!("E-AC-3 at {rate} Hz has no RTP payload format (RFC 4598: 32, 44.1 or 48 kHz)"))
            }
        },
        other => Err(format!("{} has no RTP payload format in sluice", other.name())),
    }
}

/// The session description of `file`: one media section per track, in track order, with
/// `a=control:trackID=<index>`.
pub fn session_description(file: &Mp4File, options: &SdpOptions) -> Session {
    // RFC 8866 §5.3: the session name must not be empty; "-" is the conventional filler.
    let name = if options.session_name.trim().is_empty() { "-" } else { options.session_name.as_str() };
    let mut session = Session::new(Origin::with_ip_addr(options.session_id, 1, options.address), name);
    session.connection = Some(Connection::from_ip_addr(options.address));
    session.times.push(Time::new(0, 0));
    session.add_attribute(Attribute::with_value("control", "*"));
    let range = if options.live { "npt=now-".to_string() } else { npt_range(file.duration_secs()) };
    session.add_attribute(Attribute::with_value("range", range));
    for (index, track) in file.tracks.iter().enumerate() {
        if let Some(media) = media_section(index, track) {
            session.add_media(media);
        }
    }
    session
}

/// The `a=range` value for a file of `secs` seconds.
fn npt_range(secs: f64) -> String {
    format!("npt=0-{secs:.3}")
}

fn media_section(index: usize, track: &Track) -> Option<Media> {
    let pt = payload_type(index);
    let (kind, rtpmap, fmtp) = match &track.kind {
        TrackKind::H264(h) => {
            let b64 = base64::engine::general_purpose::STANDARD;
            let sets: Vec<String> = h.sps.iter().chain(&h.pps).map(|s| b64.encode(s)).collect();
            let [p, c, l] = h.profile_level_id;
            (
                sdp_types::MediaType::Video,
                format!("{pt} H264/90000"),
                format!(
                    "{pt} packetization-mode=1;profile-level-id={p:02X}{c:02X}{l:02X};sprop-parameter-sets={}",
                    sets.join(",")
                ),
            )
        }
        TrackKind::Aac(a) => {
            let mut config = String::with_capacity(a.audio_specific_config.len() * 2);
            for b in &a.audio_specific_config {
                let _ = write!(config, "{b:02X}");
            }
            (
                sdp_types::MediaType::Audio,
                format!("{pt} MPEG4-GENERIC/{}/{}", a.sample_rate, a.channels),
                format!(
                    "{pt} streamtype=5;profile-level-id=1;mode=AAC-hbr;sizelength=13;indexlength=3;\
                     indexdeltalength=3;config={config}"
                ),
            )
        }
        TrackKind::Video(VideoEntry { codec: VideoCodec::Hevc(h), .. }) => {
            // RFC 7798 §7.1: the parameter sets out of band, so a client can decode from the
            // first keyframe whatever the samples carry.
            let b64 = base64::engine::general_purpose::STANDARD;
            let sets = |sets: &[Vec<u8>]| sets.iter().map(|s| b64.encode(s)).collect::<Vec<_>>().join(",");
            let mut fmtp = format!(
                "{pt} profile-space={};profile-id={};tier-flag={};level-id={}",
                h.profile_space,
                h.profile_idc,
                u8::from(h.high_tier),
                h.level_idc
            );
            for (name, list) in [("vps", &h.vps), ("sps", &h.sps), ("pps", &h.pps)] {
                if !list.is_empty() {
                    let _ = write!(fmtp, ";sprop-{name}={}", sets(list));
                }
            }
            (sdp_types::MediaType::Video, format!("{pt} H265/90000"), fmtp)
        }
        TrackKind::Audio(a) if matches!(a.codec, AudioCodec::Opus(_)) => (
            sdp_types::MediaType::Audio,
            // RFC 7587 §7: always 48000/2, whatever the stream; the stream's own in fmtp.
            format!("{pt} opus/48000/2"),
            format!("{pt} sprop-stereo={}", u8::from(a.channels == 2)),
        ),
        TrackKind::Audio(a) if matches!(a.codec, AudioCodec::Ac3(_)) => {
            (sdp_types::MediaType::Audio, format!("{pt} ac3/{}/{}", a.sample_rate, a.channels), String::new())
        }
        // RFC 4598 §6: `eac3`, the clock the sampling rate. The channels are stated as for
        // AC-3: an rtpmap without them means one channel (RFC 8866 §6.6).
        TrackKind::Audio(a)
            if matches!(a.codec, AudioCodec::Eac3(_)) && rtp_payload_format(track).is_ok() =>
        {
            (
                sdp_types::MediaType::Audio,
                format!("{pt} eac3/{}/{}", a.sample_rate, a.channels),
                String::new(),
            )
        }
        TrackKind::Video(_) | TrackKind::Audio(_) => return None,
    };
    let mut media = Media::new(kind, 0, sdp_types::TransportProto::RtpAvp, pt);
    media.add_attribute(Attribute::with_value("rtpmap", rtpmap));
    if !fmtp.is_empty() {
        media.add_attribute(Attribute::with_value("fmtp", fmtp));
    }
    media.add_attribute(Attribute::with_value("control", format!("{TRACK_CONTROL}{index}")));
    Some(media)
}

/// How a track's `a=control` names it, relative to the presentation's URL: `trackID=<index>`,
/// so its URL is `rtsp://host/films/a.mp4/trackID=1`.
pub const TRACK_CONTROL: &str = "trackID=";

/// The session description as bytes, ready for a `DESCRIBE` body (`application/sdp`).
pub fn to_bytes(session: &Session) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    session.write(&mut out).expect("writing into a Vec cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::mp4::demo_file as demo;

    fn fmtp_params(value: &str) -> Vec<(String, String)> {
        let (_, params) = value.split_once(' ').unwrap();
        params
            .split(';')
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect()
    }

    fn param<'a>(params: &'a [(String, String)], key: &str) -> &'a str {
        &params.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("no {key}")).1
    }

    #[test]
    fn demo_sdp_parses_back_with_the_file_values() {
        let file = demo();
        let options =
            SdpOptions { session_name: "sluice-demo.mp4".into(), session_id: 42, ..Default::default() };
        let bytes = to_bytes(&session_description(&file, &options));
        let parsed =
            Session::parse(&bytes).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes)));
        assert_eq!(parsed.session_name, "sluice-demo.mp4");
        assert_eq!(parsed.get_first_attribute_value("range"), Some(Some("npt=0-6.000")));
        assert_eq!(parsed.medias.len(), 2);

        let video = &parsed.medias[0];
        assert_eq!(video.media, "video");
        assert_eq!(video.proto, "RTP/AVP");
        assert_eq!(video.fmt, "96");
        assert_eq!(video.get_first_attribute_value("rtpmap"), Some(Some("96 H264/90000")));
        assert_eq!(video.get_first_attribute_value("control"), Some(Some("trackID=0")));
        let fmtp = fmtp_params(video.get_first_attribute_value("fmtp").unwrap().unwrap());
        assert_eq!(param(&fmtp, "packetization-mode"), "1");
        let TrackKind::H264(h) = &file.tracks[0].kind else { panic!("video first") };
        let plid = param(&fmtp, "profile-level-id");
        assert_eq!(plid.len(), 6);
        assert_eq!(u32::from_str_radix(plid, 16).unwrap().to_be_bytes()[1..], h.profile_level_id);
        let b64 = base64::engine::general_purpose::STANDARD;
        let sets: Vec<Vec<u8>> =
            param(&fmtp, "sprop-parameter-sets").split(',').map(|s| b64.decode(s).unwrap()).collect();
        assert_eq!(sets, [h.sps[0].clone(), h.pps[0].clone()]);

        let audio = &parsed.medias[1];
        assert_eq!(audio.media, "audio");
        assert_eq!(audio.fmt, "97");
        assert_eq!(audio.get_first_attribute_value("rtpmap"), Some(Some("97 MPEG4-GENERIC/48000/1")));
        assert_eq!(audio.get_first_attribute_value("control"), Some(Some("trackID=1")));
        let fmtp = fmtp_params(audio.get_first_attribute_value("fmtp").unwrap().unwrap());
        assert_eq!(param(&fmtp, "mode"), "AAC-hbr");
        assert_eq!(param(&fmtp, "sizelength"), "13");
        assert_eq!(param(&fmtp, "indexlength"), "3");
        assert_eq!(param(&fmtp, "indexdeltalength"), "3");
        let TrackKind::Aac(a) = &file.tracks[1].kind else { panic!("audio second") };
        let config = param(&fmtp, "config");
        let decoded: Vec<u8> = (0..config.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&config[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(decoded, a.audio_specific_config);
    }

    #[test]
    fn clock_rates_and_payload_types() {
        let file = demo();
        assert_eq!(clock_rate(&file.tracks[0]), 90_000);
        assert_eq!(clock_rate(&file.tracks[1]), 48_000);
        assert_eq!(payload_type(0), 96);
        assert_eq!(payload_type(31), 127);
        assert_eq!(payload_type(1000), 127);
    }

    #[test]
    fn empty_session_name_still_parses() {
        for name in ["", "\r\n"] {
            let options = SdpOptions { session_name: name.into(), ..Default::default() };
            let bytes = to_bytes(&session_description(&demo(), &options));
            assert!(bytes.windows(5).any(|w| w == b"s=-\r\n"), "{}", String::from_utf8_lossy(&bytes));
            assert_eq!(Session::parse(&bytes).unwrap().medias.len(), 2);
        }
    }
}
