//! Every sample of the demo MP4, indexed by `sluice-media`, through the RTP packetizers and back:
//! the packets respect the payload limit, carry the stream's clock, and reassemble to the
//! file's bytes.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

use sluice_media::{Mp4File, TrackKind};
use sluice_proto::rtp::{
    AacAccessUnits, AacPacketizer, H264Depacketizer, H264Packetizer, Packets, RtpPacket, StreamConfig,
    RTP_HEADER_LEN,
};

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
const MAX_PAYLOAD: usize = 1400;

#[test]
fn demo_file_round_trips_through_rtp() {
    let data = std::fs::read(DEMO).unwrap();
    let file = Mp4File::from_bytes(&data).unwrap();
    let mut out = Packets::new();
    let mut video_aus = 0;
    let mut audio_frames = 0;
    for track in &file.tracks {
        let config = StreamConfig { ssrc: track.id, payload_type: 96, initial_sequence: 60_000 };
        match &track.kind {
            TrackKind::H264(h) => {
                let mut p = H264Packetizer::new(config, MAX_PAYLOAD, h.nal_length_size).unwrap();
                let mut d = H264Depacketizer::new(1 << 22);
                for s in &track.samples {
                    let au = &data[s.offset() as usize..s.range().end as usize];
                    // 90 kHz presentation time from the track's timescale.
                    let ts = (u128::from(s.composition_time()) * 90_000 / u128::from(track.timescale)) as u32;
                    out.clear();
                    p.packetize(au, ts, &mut out).unwrap();
                    let mut got = None;
                    for (i, pkt) in out.iter().enumerate() {
                        assert!(pkt.len() <= RTP_HEADER_LEN + MAX_PAYLOAD);
                        let pkt = RtpPacket::parse(pkt).unwrap();
                        assert_eq!(pkt.marker, i + 1 == out.len());
                        assert_eq!(pkt.timestamp, ts);
                        if let Some(au) = d.push(&pkt).unwrap() {
                            got = Some(au.data.to_vec());
                        }
                    }
                    // The demo's samples use 4-byte NAL lengths, the depacketizer's layout.
                    assert_eq!(got.as_deref(), Some(au));
                    video_aus += 1;
                }
                assert_eq!(d.lost_packets(), 0);
                let sent = p.stream().octet_count() as usize;
                assert!(sent > track.samples.iter().map(|s| s.size() as usize).sum::<usize>() / 2);
            }
            TrackKind::Aac(_) => {
                let mut p = AacPacketizer::new(config, MAX_PAYLOAD).unwrap();
                for s in &track.samples {
                    let frame = &data[s.offset() as usize..s.range().end as usize];
                    out.clear();
                    p.packetize(frame, s.decode_time() as u32, &mut out).unwrap();
                    let pkt = RtpPacket::parse(out.get(0).unwrap()).unwrap();
                    let frames: Vec<&[u8]> = AacAccessUnits::parse(&pkt).unwrap().collect();
                    assert_eq!(frames, [frame]);
                    audio_frames += 1;
                }
                assert_eq!(p.stream().packet_count() as usize, track.samples.len());
            }
            other => panic!("the demo is H.264 and AAC, not {other:?}"),
        }
    }
    assert_eq!((video_aus, audio_frames), (180, 283));
}

/// Every sample of the HEVC, Opus, AC-3 and E-AC-3 tracks of the fuzz seeds made by ffmpeg
/// through the RTP packetizers RTSP uses for them and back, with a payload limit small enough
/// that HEVC keyframes go in fragmentation units and AC-3 and E-AC-3 frames in fragments.
#[test]
fn hevc_opus_ac3_and_eac3_seeds_round_trip_through_rtp() {
    use sluice_media::codec::{AudioCodec, VideoCodec};
    use sluice_proto::rtp::{AudioFrames, FrameFormat, FramePacketizer, H265Depacketizer, H265Packetizer};
    let mut seen = (0, 0, 0, 0);
    for name in ["tiny-hvc1-hlg-ac3.mp4", "tiny-vp9-opus.mp4", "tiny-hev1-eac3.mp4"] {
        let path = format!("{}/../../fuzz/corpus/mp4_demux/{name}", env!("CARGO_MANIFEST_DIR"));
        let data = std::fs::read(path).unwrap();
        let file = Mp4File::from_bytes(&data).unwrap();
        for track in &file.tracks {
            let config = StreamConfig { ssrc: track.id, payload_type: 96, initial_sequence: 65_000 };
            let bytes = |s: &sluice_media::Sample| &data[s.offset() as usize..s.range().end as usize];
            let mut out = Packets::new();
            match &track.kind {
                TrackKind::Video(v) => {
                    let VideoCodec::Hevc(h) = &v.codec else { continue };
                    let mut p = H265Packetizer::new(config, 200, h.nal_length_size).unwrap();
                    let mut d = H265Depacketizer::new(1 << 22);
                    for s in &track.samples {
                        out.clear();
                        p.packetize(bytes(s), 0, &mut out).unwrap();
                        let mut got = None;
                        for packet in out.iter() {
                            assert!(packet.len() <= RTP_HEADER_LEN + 200);
                            got = d.push(&RtpPacket::parse(packet).unwrap()).unwrap().map(<[u8]>::to_vec);
                        }
                        // Back with 4-byte lengths, which is the seed's own layout.
                        assert_eq!(got.as_deref(), Some(bytes(s)));
                        seen.0 += 1;
                    }
                }
                TrackKind::Audio(a) => {
                    let format = match a.codec {
                        AudioCodec::Opus(_) => FrameFormat::Opus,
                        AudioCodec::Ac3(_) => FrameFormat::Ac3,
                        AudioCodec::Eac3(_) => FrameFormat::Eac3,
                    };
                    let mut p = FramePacketizer::new(config, 200, format).unwrap();
                    let mut d = AudioFrames::new(format);
                    for s in &track.samples {
                        out.clear();
                        p.packetize(bytes(s), 0, &mut out).unwrap();
                        let mut got = Vec::new();
                        for packet in out.iter() {
                            got.extend(
                                d.push(&RtpPacket::parse(packet).unwrap())
                                    .unwrap()
                                    .into_iter()
                                    .map(<[u8]>::to_vec),
                            );
                        }
                        assert_eq!(got, [bytes(s).to_vec()]);
                        match format {
                            FrameFormat::Opus => seen.1 += 1,
                            FrameFormat::Ac3 => seen.2 += 1,
                            FrameFormat::Eac3 => seen.3 += 1,
                        }
                    }
                }
                _ => {}
            }
        }
    }
    // ffprobe -count_frames on the seeds: 6 + 6 HEVC frames, 31 Opus packets, 19 AC-3 frames,
    // 19 E-AC-3 frames.
    assert_eq!(seen, (12, 31, 19, 19));
}
