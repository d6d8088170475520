//! What a client needs of a DESCRIBE's SDP: each medium's kind, encoding and the URL its SETUP
//! names. The SDP is parsed by `sdp-types` (the crate sluice-media writes it with), not by hand;
//! this module adds control-URL resolution the way players do it.
//!
//! It owns reading the media list. It does not own SDP writing (sluice-media) nor the exchange.

/// One medium of the presentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Medium {
    /// `video` or `audio` (the `m=` line's media).
    pub kind: String,
    /// Encoding name from `a=rtpmap` (e.g. `H264`, `mpeg4-generic`); empty without one.
    pub encoding: String,
    /// The URL SETUP names.
    pub control: String,
}

/// The media of `sdp`, with control URLs resolved against `base` (Content-Base, else the
/// request URL) the way players do: an absolute URL as is, `*` or none as `base`, anything else
/// appended after a `/`. An SDP that does not parse has no media.
pub fn media(sdp: &[u8], base: &str) -> Vec<Medium> {
    let Ok(session) = sdp_types::Session::parse(sdp) else { return Vec::new() };
    session
        .medias
        .iter()
        .map(|m| {
            let attribute = |name: &str| {
                m.attributes
                    .iter()
                    .rev()
                    .find(|a| a.attribute == name)
                    .map(|a| a.value.as_deref().unwrap_or("").trim())
            };
            let encoding = attribute("rtpmap")
                .and_then(|map| map.split_whitespace().nth(1))
                .and_then(|e| e.split('/').next())
                .unwrap_or_default();
            Medium {
                kind: m.media.clone(),
                encoding: encoding.to_string(),
                control: resolve(base, attribute("control").unwrap_or("*")),
            }
        })
        .collect()
}

fn resolve(base: &str, control: &str) -> String {
    if control.starts_with("rtsp://") || control.starts_with("rtsps://") {
        control.to_string()
    } else if control == "*" || control.is_empty() {
        base.to_string()
    } else if base.ends_with('/') {
        format!("{base}{control}")
    } else {
        format!("{base}/{control}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_and_their_control_urls() {
        let sdp = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=x\r\na=control:*\r\nm=video 0 RTP/AVP 96\r\n\
                   a=rtpmap:96 H264/90000\r\na=control:trackID=0\r\nm=audio 0 RTP/AVP 97\r\n\
                   a=rtpmap:97 mpeg4-generic/48000/2\r\na=control:rtsp://h/x.mp4/trackID=1\r\n";
        let media = media(sdp.as_bytes(), "rtsp://h/x.mp4/");
        assert_eq!(media.len(), 2);
        assert_eq!((media[0].kind.as_str(), media[0].encoding.as_str()), ("video", "H264"));
        assert_eq!(media[0].control, "rtsp://h/x.mp4/trackID=0");
        assert_eq!(
            (media[1].encoding.as_str(), media[1].control.as_str()),
            ("mpeg4-generic", "rtsp://h/x.mp4/trackID=1")
        );
    }

    #[test]
    fn controls_resolve_against_the_base() {
        let one = |attrs: &str| media(format!("v=0\nm=video 0 RTP/AVP 96\n{attrs}").as_bytes(), "rtsp://h/x");
        assert_eq!(one("")[0].control, "rtsp://h/x");
        assert_eq!(one("a=control:*\n")[0].control, "rtsp://h/x");
        assert_eq!(one("a=control:stream=0\n")[0].control, "rtsp://h/x/stream=0");
        assert_eq!(one("a=control:rtsps://o/y\n")[0].control, "rtsps://o/y");
        assert_eq!(one("")[0].encoding, "");
        assert!(media(b"not an sdp", "rtsp://h/x").is_empty());
    }
}
