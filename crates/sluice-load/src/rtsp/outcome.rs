//! How a viewer ended: why it stopped ([`EndReason`]), and when it failed, the typed error
//! ([`ViewerError`]) and the kind it is counted under ([`FailureKind`]). Shared by the viewer,
//! which produces them, and the report, which counts them; owns the types and their wording only.

use std::time::Duration;

use super::client::ClientError;

/// Why a viewer stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// No media for the idle span after playing: the stream's end.
    StreamEnd,
    /// The server ended the session (the stream closed).
    Closed,
    /// The expected number of samples arrived.
    Expected,
    /// The run's deadline passed first.
    Deadline,
    /// The viewer failed (see its failure kind).
    Failed,
}

/// What kind of failure stopped a viewer, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The TCP connection to the server could not be made.
    Connect,
    /// DESCRIBE failed (error status, bad SDP, connection lost).
    Describe,
    /// The presentation has no video stream.
    NoVideo,
    /// SETUP failed (for example 461 for an unsupported transport).
    Setup,
    /// PLAY failed.
    Play,
    /// Connecting, DESCRIBE, SETUP or PLAY took longer than the setup timeout.
    Timeout,
    /// Playing, but no video sample arrived within the setup timeout.
    NoMedia,
    /// The stream failed while playing (read error, malformed RTP, depacketization error).
    Stream,
    /// The viewer task panicked (a bug in the generator).
    Panicked,
}

impl FailureKind {
    /// Every kind, in report order.
    pub const ALL: [FailureKind; 9] = [
        FailureKind::Connect,
        FailureKind::Describe,
        FailureKind::NoVideo,
        FailureKind::Setup,
        FailureKind::Play,
        FailureKind::Timeout,
        FailureKind::NoMedia,
        FailureKind::Stream,
        FailureKind::Panicked,
    ];

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Connect => "connect",
            FailureKind::Describe => "describe",
            FailureKind::NoVideo => "no_video",
            FailureKind::Setup => "setup",
            FailureKind::Play => "play",
            FailureKind::Timeout => "timeout",
            FailureKind::NoMedia => "no_media",
            FailureKind::Stream => "stream",
            FailureKind::Panicked => "panicked",
        }
    }
}

/// Why a viewer failed.
#[derive(Debug, thiserror::Error)]
pub enum ViewerError {
    /// No connection to the server.
    #[error("{0}")]
    Connect(ClientError),
    /// DESCRIBE failed.
    #[error("DESCRIBE failed: {0}")]
    Describe(ClientError),
    /// The SDP has no video stream.
    #[error("the presentation has no video stream")]
    NoVideo,
    /// SETUP failed.
    #[error("SETUP failed: {0}")]
    Setup(ClientError),
    /// PLAY failed.
    #[error("PLAY failed: {0}")]
    Play(ClientError),
    /// Setting up took too long.
    #[error("no PLAY response within {0:?} of starting")]
    Timeout(Duration),
    /// Playing but silent.
    #[error("no video sample within {0:?} of starting")]
    NoMedia(Duration),
    /// The stream failed while playing.
    #[error("stream failed: {0}")]
    Stream(ClientError),
}

impl ViewerError {
    /// The kind this error is counted as.
    pub fn kind(&self) -> FailureKind {
        match self {
            ViewerError::Connect(_) => FailureKind::Connect,
            ViewerError::Describe(_) => FailureKind::Describe,
            ViewerError::NoVideo => FailureKind::NoVideo,
            ViewerError::Setup(_) => FailureKind::Setup,
            ViewerError::Play(_) => FailureKind::Play,
            ViewerError::Timeout(_) => FailureKind::Timeout,
            ViewerError::NoMedia(_) => FailureKind::NoMedia,
            ViewerError::Stream(_) => FailureKind::Stream,
        }
    }

    /// The first line of the message.
    pub fn short_message(&self) -> String {
        let text = self.to_string();
        text.lines().next().unwrap_or_default().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_have_distinct_names() {
        let mut names: Vec<_> = FailureKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FailureKind::ALL.len());
        assert_eq!(ViewerError::NoVideo.kind(), FailureKind::NoVideo);
        assert_eq!(ViewerError::Timeout(Duration::from_secs(1)).kind(), FailureKind::Timeout);
        assert_eq!(
            ViewerError::NoMedia(Duration::from_secs(1)).short_message(),
            "no video sample within 1s of starting"
        );
    }
}
