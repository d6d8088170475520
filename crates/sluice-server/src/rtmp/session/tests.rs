//! The session against rml_rtmp's client session, in memory: what a publisher's exchange
//! publishes, and what it refuses.

use super::*;

use bytes::Bytes;
use rml_rtmp::sessions::{ClientSession, ClientSessionConfig, ClientSessionResult, PublishRequestType};
use std::sync::Mutex;

/// What a gate was asked: the path, the query and the token.
type Asked = (String, Option<String>, Option<String>);

/// A gate answering `answer`, keeping what it was asked.
struct Policy {
    answer: Result<(), u16>,
    asked: Mutex<Vec<Asked>>,
}

impl Policy {
    fn new(answer: Result<(), u16>) -> Policy {
        Policy { answer, asked: Mutex::default() }
    }
}

impl Gate for Policy {
    fn authorize(
        &self,
        path: &str,
        query: Option<&str>,
        token: Option<&str>,
        _: SocketAddr,
    ) -> Result<(), u16> {
        let asked = (path.to_string(), query.map(String::from), token.map(String::from));
        self.asked.lock().unwrap().push(asked);
        self.answer
    }
}

/// A client and a server session, connected in memory.
struct Pair {
    client: ClientSession,
    server: Session,
    /// What the server's last answer was, if it failed.
    error: Option<RtmpError>,
}

impl Pair {
    /// Handshaken, the client connected to `app`.
    fn connect(registry: &Arc<LiveRegistry>, app: &str, gate: &dyn Gate) -> Pair {
        let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let mut server = Session::new(peer, Arc::clone(registry));
        let mut handshake = Handshake::new(PeerType::Client);
        let c0_c1 = handshake.generate_outbound_p0_and_p1().unwrap();
        let mut out = Vec::new();
        server.receive(&c0_c1, gate, Instant::now(), &mut out).unwrap();
        let HandshakeProcessResult::Completed { response_bytes: c2, .. } =
            handshake.process_bytes(&out).unwrap()
        else {
            panic!("the client's handshake completes on the server's answer")
        };
        let (client, results) = ClientSession::new(ClientSessionConfig::new()).unwrap();
        let mut pair = Pair { client, server, error: None };
        pair.send(c2, gate);
        pair.results(results, gate);
        let request = pair.client.request_connection(app.to_string()).unwrap();
        pair.results(vec![request], gate);
        pair
    }

    /// Sends `bytes` to the server and its answers back to the client, until both are quiet.
    fn send(&mut self, bytes: Vec<u8>, gate: &dyn Gate) {
        if self.error.is_some() {
            return;
        }
        let mut out = Vec::new();
        if let Err(e) = self.server.receive(&bytes, gate, Instant::now(), &mut out) {
            self.error = Some(e);
        }
        if !out.is_empty() {
            let results = self.client.handle_input(&out).unwrap();
            self.results(results, gate);
        }
    }

    /// Sends the client's outbound packets in `results`.
    fn results(&mut self, results: Vec<ClientSessionResult>, gate: &dyn Gate) {
        for r in results {
            if let ClientSessionResult::OutboundResponse(packet) = r {
                self.send(packet.bytes, gate);
            }
        }
    }

    fn publish(&mut self, key: &str, gate: &dyn Gate) {
        let request = self.client.request_publishing(key.to_string(), PublishRequestType::Live).unwrap();
        self.results(vec![request], gate);
    }

    fn metadata(&mut self, video: bool, audio: bool, gate: &dyn Gate) {
        let mut metadata = StreamMetadata::new();
        metadata.video_codec_id = video.then_some(7);
        metadata.audio_codec_id = audio.then_some(10);
        let r = self.client.publish_metadata(&metadata).unwrap();
        self.results(vec![r], gate);
    }

    fn video(&mut self, body: &[u8], ms: u32, gate: &dyn Gate) {
        let r = self.client.publish_video_data(Bytes::copy_from_slice(body), RtmpTimestamp::new(ms), false);
        self.results(vec![r.unwrap()], gate);
    }

    fn audio(&mut self, body: &[u8], ms: u32, gate: &dyn Gate) {
        let r = self.client.publish_audio_data(Bytes::copy_from_slice(body), RtmpTimestamp::new(ms), false);
        self.results(vec![r.unwrap()], gate);
    }

    fn refusal(&self) -> String {
        match &self.error {
            Some(RtmpError::Refused(why)) => why.clone(),
            other => panic!("refused, not {other:?}"),
        }
    }
}

/// An H.264 sequence header: one SPS, one PPS, 2-byte NAL lengths.
fn avc_sequence_header() -> Vec<u8> {
    let sps = [0x67, 0x64, 0x00, 0x0c, 0xac, 0xd9, 0x41, 0x41, 0xfb, 0x01, 0x10];
    let mut body = vec![0x17, 0, 0, 0, 0, 1, 0x64, 0x00, 0x0c, 0xfd, 0xe1, 0, sps.len() as u8];
    body.extend_from_slice(&sps);
    body.extend_from_slice(&[1, 0, 4, 0x68, 0xeb, 0xe3, 0xcb]);
    body
}

/// An AAC sequence header: LC, 44.1 kHz, mono.
const AAC_SEQUENCE_HEADER: [u8; 4] = [0xaf, 0, 0x12, 0x08];

#[test]
fn a_publisher_is_published_once_its_sequence_headers_came_and_ended_when_it_goes() {
    let registry = Arc::new(LiveRegistry::new("/live"));
    let gate = Policy::new(Ok(()));
    let mut pair = Pair::connect(&registry, "live", &gate);
    pair.publish("x?token=t%2B1&v=2", &gate);
    assert!(pair.error.is_none(), "{:?}", pair.error);
    assert_eq!(
        gate.asked.lock().unwrap().as_slice(),
        [("/live/x".to_string(), Some("token=t%2B1&v=2".to_string()), Some("t+1".to_string()))]
    );
    assert_eq!(pair.server.path(), Some("/live/x"));
    pair.metadata(true, true, &gate);
    pair.video(&avc_sequence_header(), 0, &gate);
    assert!(registry.get("/live/x").is_none(), "onMetaData announced audio too: not published yet");
    pair.audio(&AAC_SEQUENCE_HEADER, 0, &gate);
    let stream = registry.get("/live/x").expect("published with both sequence headers");
    assert_eq!(stream.track_count(), 2);
    assert!(!pair.server.is_flowing());
    // An IDR shown 80 ms after its decode time, then a P picture 40 ms later; 2-byte lengths.
    pair.video(&[0x17, 1, 0, 0, 80, 0, 2, 0x65, 0x88], 0, &gate);
    pair.video(&[0x27, 1, 0, 0, 80, 0, 2, 0x41, 0x9a], 40, &gate);
    pair.audio(&[0xaf, 1, 0x21, 0x10], 23, &gate);
    assert!(pair.error.is_none(), "{:?}", pair.error);
    assert!(pair.server.is_flowing() && stream.is_ready());
    let snapshot = stream.snapshot();
    let TrackKind::H264(h) = &snapshot.file.tracks[0].kind else {
        panic!("{:?}", snapshot.file.tracks[0].kind)
    };
    assert_eq!(
        (h.nal_length_size, h.sps.len(), h.pps.len()),
        (4, 1, 1),
        "samples are kept with 4-byte lengths"
    );
    let video = &snapshot.file.tracks[0].samples;
    // 40 ms apart, presented 0.2 s late as every live track is (no decode time before 0).
    assert_eq!(video.iter().map(|s| s.composition_time()).collect::<Vec<_>>(), [18_000, 21_600]);
    assert!(video[0].is_sync() && !video[1].is_sync());
    assert_eq!(stream.sample(video[0].offset()).unwrap().as_slice(), [0, 0, 0, 2, 0x65, 0x88]);
    let audio = &snapshot.file.tracks[1];
    assert_eq!((audio.timescale, audio.samples.len()), (44_100, 1));
    // A second publisher of the path is refused while the first publishes.
    let mut second = Pair::connect(&registry, "live", &gate);
    second.publish("x", &gate);
    assert!(second.refusal().contains("NetStream.Publish.BadName"), "{}", second.refusal());
    drop(second);
    assert!(registry.get("/live/x").is_some(), "the second publisher's end leaves the first's path");
    drop(pair);
    assert!(stream.has_ended() && registry.get("/live/x").is_none(), "the path is free again");
}

#[test]
fn without_metadata_the_first_sample_publishes_what_came() {
    let registry = Arc::new(LiveRegistry::new("/live"));
    let gate = Policy::new(Ok(()));
    let mut pair = Pair::connect(&registry, "live/", &gate);
    pair.publish("cam/1", &gate);
    pair.video(&avc_sequence_header(), 0, &gate);
    assert!(registry.get("/live/cam/1").is_none());
    pair.video(&[0x17, 1, 0, 0, 0, 0, 2, 0x65, 0x88], 0, &gate);
    let stream = registry.get("/live/cam/1").expect("published at the first sample");
    assert_eq!((stream.track_count(), stream.is_ready()), (1, true));
    pair.audio(&AAC_SEQUENCE_HEADER, 10, &gate);
    pair.audio(&[0xaf, 1, 0x21], 10, &gate);
    assert!(pair.error.is_none(), "{:?}", pair.error);
    assert_eq!(stream.track_count(), 1, "audio after publishing is not announced");
    pair.video(&[0x1c, 1, 0, 0, 0], 40, &gate);
    assert!(matches!(pair.error, Some(RtmpError::Flv(FlvError::VideoCodec(_)))), "{:?}", pair.error);
}

#[test]
fn publishers_are_refused_elsewhere_and_without_the_right() {
    let registry = Arc::new(LiveRegistry::new("/live"));
    let open = Policy::new(Ok(()));
    let other = Pair::connect(&registry, "vod", &open);
    assert!(other.refusal().contains("not served"), "{}", other.refusal());
    for (answer, code) in [(401, "NetStream.Publish.Denied"), (403, "NetStream.Publish.Denied")] {
        let gate = Policy::new(Err(answer));
        let mut pair = Pair::connect(&registry, "live", &gate);
        pair.publish("x", &gate);
        assert!(pair.refusal().starts_with(code), "{answer}: {}", pair.refusal());
        assert_eq!(pair.server.path(), None);
    }
    let mut pair = Pair::connect(&registry, "live", &open);
    pair.publish("../x", &open);
    assert!(pair.refusal().contains("not a live path"), "{}", pair.refusal());
    assert!(registry.list(Instant::now()).is_empty());
}
