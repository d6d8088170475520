//! Request bodies: how they are delimited (RFC 9112 §6) and a decoder that walks them.
//!
//! The [`BodyDecoder`] consumes body bytes as they arrive and reports the payload slices and the
//! end, so that a connection never loses track of where the next request starts, whether the body
//! is kept (uploads, later) or thrown away (a body on GET). It holds no buffers of its own.

use super::request::RequestError;

/// How a request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// What one call to [`BodyDecoder::decode`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded {
    /// Input bytes consumed.
    pub consumed: usize,
    /// Payload bytes among them (excluding chunk framing).
    pub payload: u64,
    /// Whether the body has ended.
    pub done: bool,
}

/// A streaming decoder for one request body.
#[derive(Debug, Clone)]
pub struct BodyDecoder {
    state: State,
    payload_seen: u64,
    max_payload: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Fixed length: bytes still to come.
    Length(u64),
    /// Reading a chunk-size line; the size so far and whether any digit was seen.
    Size { size: u64, digits: bool },
    /// After the size, skipping chunk extensions up to the LF.
    Extension { size: u64 },
    /// Chunk data still to come.
    Data(u64),
    /// Expecting CR then LF after chunk data; `lf_only` once the CR has been seen.
    DataEnd { cr_seen: bool },
    /// In the trailer section; `line_empty` while the current line has no bytes yet.
    Trailer { line_empty: bool },
    /// The body is over.
    Done,
}

/// Longest chunk-size line tolerated, extensions included (bounds work per chunk).
const MAX_CHUNK_LINE: u64 = 4096;

impl BodyDecoder {
    /// A decoder for a body with this framing, refusing more than `max_payload` bytes of payload.
    pub fn new(framing: BodyFraming, max_payload: u64) -> Result<Self, RequestError> {
        let state = match framing {
            BodyFraming::None => State::Done,
            BodyFraming::Length(n) if n > max_payload => return Err(RequestError::BodyTooLarge(max_payload)),
            BodyFraming::Length(n) => State::Length(n),
            BodyFraming::Chunked => State::Size { size: 0, digits: false },
        };
        Ok(BodyDecoder { state, payload_seen: 0, max_payload })
    }

    /// Whether the body has been read to its end.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes as much of `input` as belongs to the body. Payload is not returned: callers that
    /// keep it slice it out with [`BodyDecoder::decode_with`].
    pub fn decode(&mut self, input: &[u8]) -> Result<Decoded, RequestError> {
        self.decode_with(input, |_| {})
    }

    /// Like [`BodyDecoder::decode`], handing each payload slice to `sink` in order.
    pub fn decode_with(
        &mut self,
        input: &[u8],
        mut sink: impl FnMut(&[u8]),
    ) -> Result<Decoded, RequestError> {
        let mut pos = 0;
        let mut payload = 0u64;
        let mut extension_len = 0u64;
        while pos < input.len() && self.state != State::Done {
            let rest = &input[pos..];
            match self.state {
                State::Length(left) | State::Data(left) => {
                    let take = (rest.len() as u64).min(left) as usize;
                    sink(&rest[..take]);
                    pos += take;
                    payload += take as u64;
                    let left = left - take as u64;
                    self.state = match self.state {
                        State::Length(_) if left == 0 => State::Done,
                        State::Length(_) => State::Length(left),
                        _ if left == 0 => State::DataEnd { cr_seen: false },
                        _ => State::Data(left),
                    };
                }
                State::Size { size, digits } => {
                    let b = rest[0];
                    pos += 1;
                    self.state = match b {
                        b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                            let digit = (b as char).to_digit(16).unwrap_or(0) as u64;
                            let size = size
                                .checked_mul(16)
                                .and_then(|s| s.checked_add(digit))
                                .ok_or(RequestError::BadChunk)?;
                            State::Size { size, digits: true }
                        }
                        _ if !digits => return Err(RequestError::BadChunk),
                        b';' | b' ' | b'\t' | b'\r' => State::Extension { size },
                        b'\n' => self.after_size_line(size)?,
                        _ => return Err(RequestError::BadChunk),
                    };
                }
                State::Extension { size } => {
                    let b = rest[0];
                    pos += 1;
                    extension_len += 1;
                    if extension_len > MAX_CHUNK_LINE {
                        return Err(RequestError::BadChunk);
                    }
                    if b == b'\n' {
                        self.state = self.after_size_line(size)?;
                    }
                }
                State::DataEnd { cr_seen } => {
                    let b = rest[0];
                    pos += 1;
                    self.state = match (b, cr_seen) {
                        (b'\r', false) => State::DataEnd { cr_seen: true },
                        (b'\n', _) => State::Size { size: 0, digits: false },
                        _ => return Err(RequestError::BadChunk),
                    };
                }
                State::Trailer { line_empty } => {
                    let b = rest[0];
                    pos += 1;
                    self.state = match b {
                        b'\n' if line_empty => State::Done,
                        b'\n' => State::Trailer { line_empty: true },
                        b'\r' => State::Trailer { line_empty },
                        _ => State::Trailer { line_empty: false },
                    };
                }
                State::Done => {}
            }
        }
        self.payload_seen += payload;
        if self.payload_seen > self.max_payload {
            return Err(RequestError::BodyTooLarge(self.max_payload));
        }
        Ok(Decoded { consumed: pos, payload, done: self.state == State::Done })
    }

    fn after_size_line(&self, size: u64) -> Result<State, RequestError> {
        if size == 0 {
            Ok(State::Trailer { line_empty: true })
        } else if self.payload_seen.saturating_add(size) > self.max_payload {
            Err(RequestError::BodyTooLarge(self.max_payload))
        } else {
            Ok(State::Data(size))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(framing: BodyFraming, input: &[u8]) -> Result<(Vec<u8>, usize, bool), RequestError> {
        let mut d = BodyDecoder::new(framing, 1 << 20)?;
        let mut out = Vec::new();
        let r = d.decode_with(input, |s| out.extend_from_slice(s))?;
        Ok((out, r.consumed, r.done))
    }

    #[test]
    fn length_body_stops_at_its_end() {
        let (payload, consumed, done) = decode_all(BodyFraming::Length(5), b"helloGET /").unwrap();
        assert_eq!(payload, b"hello");
        assert_eq!(consumed, 5);
        assert!(done);
    }

    #[test]
    fn chunked_with_extensions_and_trailers() {
        let input = b"5;name=x\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        let (payload, consumed, done) = decode_all(BodyFraming::Chunked, input).unwrap();
        assert_eq!(payload, b"hello world");
        assert_eq!(&input[consumed..], b"NEXT");
        assert!(done);
    }

    #[test]
    fn chunked_split_at_every_byte_gives_the_same_payload() {
        let input = b"a\r\n0123456789\r\n3\r\nabc\r\n0\r\n\r\n";
        for split in 0..=input.len() {
            let mut d = BodyDecoder::new(BodyFraming::Chunked, 1 << 20).unwrap();
            let mut out = Vec::new();
            let a = d.decode_with(&input[..split], |s| out.extend_from_slice(s)).unwrap();
            assert_eq!(a.consumed, split);
            let b = d.decode_with(&input[split..], |s| out.extend_from_slice(s)).unwrap();
            assert_eq!(out, b"0123456789abc");
            assert_eq!(a.consumed + b.consumed, input.len());
            assert!(d.is_done());
        }
    }

    #[test]
    fn bad_chunks_are_refused() {
        for input in [&b"zz\r\n"[..], b"\r\n", b"5\r\nhelloXX", b"fffffffffffffffffff\r\n"] {
            assert_eq!(decode_all(BodyFraming::Chunked, input).unwrap_err(), RequestError::BadChunk);
        }
    }

    #[test]
    fn too_large_bodies_are_refused() {
        assert!(matches!(
            BodyDecoder::new(BodyFraming::Length(2 << 20), 1 << 20),
            Err(RequestError::BodyTooLarge(_))
        ));
        let mut d = BodyDecoder::new(BodyFraming::Chunked, 4).unwrap();
        assert!(matches!(d.decode(b"5\r\nhello\r\n"), Err(RequestError::BodyTooLarge(_))));
    }
}
