//! One RTMP publisher's connection, sans-I/O: bytes in, bytes to send out, and the live path it
//! feeds.
//!
//! Owns the exchange after the TCP accept: the handshake and the chunk stream (rml_rtmp's
//! `Handshake` and `ServerSession`), which application a client may connect to (the live
//! prefix's), whether a `publish` is allowed (the access policies' `publish` right, asked
//! through a [`Gate`], and one publisher a path), the tracks its sequence headers describe,
//! and its samples into the [`LiveRegistry`]. The path is published once the sequence headers
//! of the tracks `onMetaData` announced came (or, without metadata, at the first sample), and
//! ended when the session is dropped. It does not own sockets, threads or timeouts
//! ([`super`]'s), nor the reading of FLV bodies ([`super::flv`]).
//!
//! Not handled: a sequence header that changes the parameters mid-stream (the tracks were
//! announced to viewers; H.264 encoders repeat the parameter sets in band, which carry it), and
//! playback (RTMP here is for publishers only).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use rml_rtmp::chunk_io::ChunkSerializer;
use rml_rtmp::handshake::{Handshake, HandshakeError, HandshakeProcessResult, PeerType};
use rml_rtmp::messages::RtmpMessage;
use rml_rtmp::rml_amf0::Amf0Value;
use rml_rtmp::sessions::{
    ServerSession, ServerSessionConfig, ServerSessionError, ServerSessionEvent, ServerSessionResult,
    StreamMetadata,
};
use rml_rtmp::time::RtmpTimestamp;
use sluice_media::mp4::{AacConfig, H264Config, TrackKind};
use sluice_rtsp::live::AnnouncedTrack;
use sluice_rtsp::{LiveRegistry, LiveStream};

use sluice_media::flv::{self, Clock, FlvError, Tag};

/// Bytes of the chunks sent (what the session announces first).
const CHUNK_SIZE: u32 = 4096;

/// The message stream a refusal's `onStatus` goes on: the one stream a publisher creates
/// (ffmpeg and OBS create one a connection), which a `ServerSession` numbers 1.
const PUBLISH_STREAM: u32 = 1;

/// The video track's clock: 90 kHz, as RTP's for video.
const VIDEO_CLOCK: u32 = 90_000;

/// Who may publish what: the server's access policies.
pub trait Gate {
    /// Whether the publisher at `peer` may publish live path `path`, presenting the stream key's
    /// `query` and a `token` from it; else the HTTP status the refusal would have (401: the
    /// policy wants credentials not presented; 403).
    fn authorize(
        &self,
        path: &str,
        query: Option<&str>,
        token: Option<&str>,
        peer: SocketAddr,
    ) -> Result<(), u16>;
}

/// Why a connection ends before its publisher finished.
#[derive(Debug, thiserror::Error)]
pub enum RtmpError {
    /// The handshake failed.
    #[error("handshake: {0}")]
    Handshake(#[from] HandshakeError),
    /// The chunk stream or a message does not parse.
    #[error("{0}")]
    Session(#[from] ServerSessionError),
    /// An audio or video message cannot be taken in.
    #[error("{0}")]
    Flv(#[from] FlvError),
    /// Refused (the client was told why).
    #[error("refused: {0}")]
    Refused(String),
}

/// Where a connection is after some bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Going on.
    Open,
    /// The publisher finished publishing.
    Finished,
}

/// See the module docs.
pub struct Session {
    peer: SocketAddr,
    registry: Arc<LiveRegistry>,
    handshake: Handshake,
    /// After the handshake.
    server: Option<ServerSession>,
    /// The application connected to (its query, if any, kept).
    app: Option<String>,
    publication: Option<Publication>,
}

/// A `publish` accepted: its path, its tracks as they come, and the live stream once published.
struct Publication {
    path: String,
    /// Video and audio, when `onMetaData` named their codecs.
    expected: Option<(bool, bool)>,
    video: Option<H264Config>,
    audio: Option<AacConfig>,
    live: Option<Live>,
    clock: Clock,
}

/// A published path and where each kind of sample goes in it.
struct Live {
    stream: Arc<LiveStream>,
    /// The video track.
    video: Option<usize>,
    /// The audio track and its clock rate.
    audio: Option<(usize, u32)>,
    /// Whether a sample came.
    flowing: bool,
}

impl Session {
    /// A connection from `peer` that may publish to `registry`'s live paths.
    pub fn new(peer: SocketAddr, registry: Arc<LiveRegistry>) -> Session {
        Session {
            peer,
            registry,
            handshake: Handshake::new(PeerType::Server),
            server: None,
            app: None,
            publication: None,
        }
    }

    /// The live path being published, once accepted.
    pub fn path(&self) -> Option<&str> {
        self.publication.as_ref().map(|p| p.path.as_str())
    }

    /// Whether its media flows (a sample came since it published): from then on a silence of
    /// the stall deadline ends it; before, an encoder may take seconds to start.
    pub fn is_flowing(&self) -> bool {
        self.publication.as_ref().and_then(|p| p.live.as_ref()).is_some_and(|l| l.flowing)
    }

    /// Takes `bytes` received at `now`; what to send goes into `out` (sent before closing on an
    /// error too: a refusal's reason is in it).
    pub fn receive(
        &mut self,
        bytes: &[u8],
        gate: &dyn Gate,
        now: Instant,
        out: &mut Vec<u8>,
    ) -> Result<Progress, RtmpError> {
        if let Some(server) = &mut self.server {
            let results = server.handle_input(bytes)?;
            return self.handle(results, gate, now, out);
        }
        match self.handshake.process_bytes(bytes)? {
            HandshakeProcessResult::InProgress { response_bytes } => {
                out.extend_from_slice(&response_bytes);
                Ok(Progress::Open)
            }
            HandshakeProcessResult::Completed { response_bytes, remaining_bytes } => {
                out.extend_from_slice(&response_bytes);
                let config = ServerSessionConfig { chunk_size: CHUNK_SIZE, ..ServerSessionConfig::new() };
                let (server, results) = ServerSession::new(config)?;
                self.server = Some(server);
                self.handle(results, gate, now, out)?;
                if remaining_bytes.is_empty() {
                    return Ok(Progress::Open);
                }
                self.receive(&remaining_bytes, gate, now, out)
            }
        }
    }

    /// Sends what `results` hold and acts on their events (which may add more).
    fn handle(
        &mut self,
        results: Vec<ServerSessionResult>,
        gate: &dyn Gate,
        now: Instant,
        out: &mut Vec<u8>,
    ) -> Result<Progress, RtmpError> {
        let mut queue = VecDeque::from(results);
        while let Some(result) = queue.pop_front() {
            match result {
                ServerSessionResult::OutboundResponse(packet) => out.extend_from_slice(&packet.bytes),
                ServerSessionResult::RaisedEvent(event) => {
                    if self.event(event, gate, now, out, &mut queue)? == Progress::Finished {
                        return Ok(Progress::Finished);
                    }
                }
                ServerSessionResult::UnhandleableMessageReceived(_) => {}
            }
        }
        Ok(Progress::Open)
    }

    fn server(&mut self) -> &mut ServerSession {
        self.server.as_mut().expect("events come after the handshake")
    }

    fn event(
        &mut self,
        event: ServerSessionEvent,
        gate: &dyn Gate,
        now: Instant,
        out: &mut Vec<u8>,
        queue: &mut VecDeque<ServerSessionResult>,
    ) -> Result<Progress, RtmpError> {
        match event {
            ServerSessionEvent::ConnectionRequested { request_id, app_name } => {
                let app = app_name.split('?').next().unwrap_or_default().trim_matches('/');
                let prefix = self.registry.path_of("");
                let prefix = prefix.trim_end_matches('/');
                let path = format!("/{app}");
                if path != prefix && !self.registry.is_live_path(&path) {
                    let why = format!(
                        "application {app:?} is not served: publish to {}",
                        prefix.trim_start_matches('/')
                    );
                    for r in
                        self.server().reject_request(request_id, "NetConnection.Connect.Rejected", &why)?
                    {
                        if let ServerSessionResult::OutboundResponse(packet) = r {
                            out.extend_from_slice(&packet.bytes);
                        }
                    }
                    return Err(RtmpError::Refused(why));
                }
                self.app = Some(app_name.trim_matches('/').to_string());
                queue.extend(self.server().accept_request(request_id)?);
            }
            ServerSessionEvent::PublishStreamRequested { request_id, stream_key, .. } => {
                let path = self.admit(&stream_key, gate, out)?;
                tracing::debug!("RTMP publisher {} may publish {path}", self.peer);
                queue.extend(self.server().accept_request(request_id)?);
                self.publication = Some(Publication {
                    path,
                    expected: None,
                    video: None,
                    audio: None,
                    live: None,
                    clock: Clock::default(),
                });
            }
            ServerSessionEvent::StreamMetadataChanged { metadata, .. } => {
                if let Some(p) = &mut self.publication {
                    p.expected = expected_tracks(&metadata);
                }
            }
            ServerSessionEvent::VideoDataReceived { data, timestamp, .. } => {
                let Some(p) = &mut self.publication else { return Ok(Progress::Open) };
                // The NAL length size of the samples as sent (they are kept with 4-byte lengths).
                let nal_length_size = p.video.as_ref().map_or(4, |c| c.nal_length_size);
                let tag = flv::video(&data, nal_length_size)?;
                self.take(tag, timestamp, now, out)?;
            }
            ServerSessionEvent::AudioDataReceived { data, timestamp, .. } => {
                if self.publication.is_none() {
                    return Ok(Progress::Open);
                }
                let tag = flv::audio(&data)?;
                self.take(tag, timestamp, now, out)?;
            }
            ServerSessionEvent::PublishStreamFinished { .. } => return Ok(Progress::Finished),
            _ => {}
        }
        Ok(Progress::Open)
    }

    /// The live path `stream_key` names under the connected application, when its publisher
    /// may take it; else the client is told why (in `out`) and the error says it.
    fn admit(&mut self, stream_key: &str, gate: &dyn Gate, out: &mut Vec<u8>) -> Result<String, RtmpError> {
        let app = self.app.clone().unwrap_or_default();
        let (app, app_query) = split_query(&app);
        let (key, key_query) = split_query(stream_key);
        let path = format!("/{app}/{}", key.trim_matches('/'));
        if !self.registry.is_live_path(&path) || self.publication.is_some() {
            return self.refuse(out, "NetStream.Publish.BadName", format!("{path} is not a live path"));
        }
        let query = key_query.or(app_query);
        let token = query.and_then(|q| sluice_proto::http::credentials::param(q, "token"));
        match gate.authorize(&path, query, token.as_deref(), self.peer) {
            Ok(()) => {}
            Err(401) => {
                let why =
                    format!("publishing {path} needs credentials (a token as ?token= on the stream key)");
                return self.refuse(out, "NetStream.Publish.Denied", why);
            }
            Err(_) => {
                return self.refuse(
                    out,
                    "NetStream.Publish.Denied",
                    format!("publishing {path} is not allowed"),
                )
            }
        }
        if self.registry.get(&path).is_some() {
            return self.refuse(out, "NetStream.Publish.BadName", format!("{path} has a publisher already"));
        }
        Ok(path)
    }

    /// Tells the client `code` (an `onStatus` of level `error`, as Flash Media Server sends
    /// for a publish it refuses) and returns the refusal.
    fn refuse<T>(&mut self, out: &mut Vec<u8>, code: &str, why: String) -> Result<T, RtmpError> {
        let status = [("level", "error"), ("code", code), ("description", why.as_str())]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Amf0Value::Utf8String(v.to_string())))
            .collect();
        let message = RtmpMessage::Amf0Command {
            command_name: "onStatus".into(),
            transaction_id: 0.0,
            command_object: Amf0Value::Null,
            additional_arguments: vec![Amf0Value::Object(status)],
        };
        let payload = message
            .into_message_payload(RtmpTimestamp::new(0), PUBLISH_STREAM)
            .map_err(ServerSessionError::from)?;
        // A serializer of its own, uncompressed headers in chunks of the announced size: the
        // session's state is not needed for the last message of a connection.
        let mut serializer = ChunkSerializer::new();
        serializer.set_max_chunk_size(CHUNK_SIZE, RtmpTimestamp::new(0)).map_err(ServerSessionError::from)?;
        let packet = serializer.serialize(&payload, true, false).map_err(ServerSessionError::from)?;
        out.extend_from_slice(&packet.bytes);
        Err(RtmpError::Refused(format!("{code}: {why}")))
    }

    /// Takes one audio or video message of the publication: parameters until it is published,
    /// then samples.
    fn take(
        &mut self,
        tag: Tag,
        timestamp: RtmpTimestamp,
        now: Instant,
        out: &mut Vec<u8>,
    ) -> Result<(), RtmpError> {
        let Some(p) = &mut self.publication else { return Ok(()) };
        let ms = p.clock.unwrap(timestamp.value);
        let sample = match tag {
            Tag::VideoConfig(config) if p.live.is_none() => {
                p.video = Some(config);
                None
            }
            Tag::AudioConfig(config) if p.live.is_none() => {
                p.audio = Some(config);
                None
            }
            Tag::VideoConfig(_) | Tag::AudioConfig(_) => {
                tracing::debug!("{}: a sequence header mid-stream is not announced again", p.path);
                None
            }
            Tag::Nothing => None,
            sample => Some(sample),
        };
        let complete =
            p.expected.is_some_and(|(v, a)| (!v || p.video.is_some()) && (!a || p.audio.is_some()));
        if p.live.is_none() && (complete || sample.is_some()) && (p.video.is_some() || p.audio.is_some()) {
            self.publish(now, out)?;
        }
        let Some(live) = self.publication.as_mut().and_then(|p| p.live.as_mut()) else { return Ok(()) };
        match (sample, live.video, live.audio) {
            (Some(Tag::Video { composition_ms, data, keyframe }), Some(track), _) => {
                let at = flv::ticks(ms + i64::from(composition_ms), VIDEO_CLOCK);
                live.stream.push_access_unit(track, at, data, keyframe, now);
                live.flowing = true;
            }
            (Some(Tag::Audio(data)), _, Some((track, rate))) => {
                live.stream.push_access_unit(track, flv::ticks(ms, rate), data, true, now);
                live.flowing = true;
            }
            _ => {}
        }
        Ok(())
    }

    /// Publishes the path with the tracks whose parameters came.
    fn publish(&mut self, now: Instant, out: &mut Vec<u8>) -> Result<(), RtmpError> {
        let Some(p) = &mut self.publication else { return Ok(()) };
        let mut tracks = Vec::new();
        let mut video = None;
        if let Some(config) = &p.video {
            video = Some(tracks.len());
            let kind = TrackKind::H264(H264Config { nal_length_size: 4, ..config.clone() });
            tracks.push(AnnouncedTrack { kind, clock_rate: VIDEO_CLOCK, control: String::new() });
        }
        let mut audio = None;
        if let Some(config) = &p.audio {
            audio = Some((tracks.len(), config.sample_rate));
            let clock_rate = config.sample_rate;
            tracks.push(AnnouncedTrack {
                kind: TrackKind::Aac(config.clone()),
                clock_rate,
                control: String::new(),
            });
        }
        let count = tracks.len();
        match self.registry.publish(&p.path, self.peer, tracks, now) {
            Ok(stream) => {
                tracing::info!("RTMP publisher {} publishes {} ({count} track(s))", self.peer, p.path);
                p.live = Some(Live { stream, video, audio, flowing: false });
                Ok(())
            }
            Err(_) => {
                let why = format!("{} has a publisher already", p.path);
                self.refuse(out, "NetStream.Publish.BadName", why)
            }
        }
    }
}

impl Drop for Session {
    /// The path is free again, and its viewers get the end of the stream.
    fn drop(&mut self) {
        if let Some(live) = self.publication.as_ref().and_then(|p| p.live.as_ref()) {
            self.registry.end(&live.stream);
            tracing::info!("RTMP publisher {} of {} is gone", self.peer, live.stream.path());
        }
    }
}

/// `text` and its query (after `?`), if any.
fn split_query(text: &str) -> (&str, Option<&str>) {
    match text.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (text, None),
    }
}

/// Video and audio as `onMetaData` names them, when it names a codec of either.
fn expected_tracks(metadata: &StreamMetadata) -> Option<(bool, bool)> {
    let (video, audio) = (metadata.video_codec_id.is_some(), metadata.audio_codec_id.is_some());
    (video || audio).then_some((video, audio))
}

#[cfg(test)]
mod tests;
