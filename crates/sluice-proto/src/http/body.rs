//! Message bodies: how they are delimited (RFC 9112 §6) and the one chunked decoder sluice has.
//!
//! The [`BodyDecoder`] consumes body bytes as they arrive and reports the payload slices and the
//! end, so that a connection never loses track of where the next message starts, whether the body
//! is kept (an upload's [`super::BodySink`]) or thrown away (a body on GET). The server reads
//! request bodies with the strict decoder ([`BodyDecoder::new`]); the load generator reads
//! response bodies from any peer with the lenient one ([`BodyDecoder::lenient`]). It holds no
//! buffers of its own, and does not know about heads, sockets or what a body is for.

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

/// Why a body could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// More payload than the decoder was allowed to read.
    #[error("body over {0} bytes")]
    TooLarge(u64),
    /// The chunked body is not valid chunked coding.
    #[error("malformed chunked body")]
    BadChunk,
}

/// A streaming decoder for one message body.
///
/// The strict decoder ([`BodyDecoder::new`], for request bodies) reads chunked framing strictly:
/// every line ends in CRLF (a bare LF or CR is an error, not a line end), chunk extensions may not
/// hold control bytes, and sizes, extensions, trailers and the framing as a whole are bounded.
/// Leniency there is what request smuggling feeds on: a front end that reads a bare LF differently
/// would disagree with us about where the next request starts. The lenient decoder
/// ([`BodyDecoder::lenient`], for a client reading responses) also takes a bare LF as a line end
/// (RFC 9112 §2.2 lets a recipient), any bytes in extensions and trailers, and no bound on payload
/// or framing: what a real peer sends is measured, not judged.
#[derive(Debug, Clone)]
pub struct BodyDecoder {
    state: State,
    payload_seen: u64,
    framing_seen: u64,
    max_payload: u64,
    lenient: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Fixed length: bytes still to come.
    Length(u64),
    /// Reading a chunk size: the value so far and how many digits.
    Size { size: u64, digits: u8 },
    /// After the size, inside chunk extensions (bytes so far), until CR.
    Extension { size: u64, len: u16 },
    /// After the CR of a size line: only LF may follow.
    SizeLf { size: u64 },
    /// Chunk data still to come.
    Data(u64),
    /// After chunk data: CR, then (`cr_seen`) LF.
    DataEnd { cr_seen: bool },
    /// In the trailer section: bytes of the current line, and whether its CR was seen.
    Trailer { line: u16, cr_seen: bool },
    /// The body is over.
    Done,
}

/// Hex digits in a chunk size: 16 fill a u64; more (even leading zeros) is not a size.
const MAX_SIZE_DIGITS: u8 = 16;
/// Longest chunk extension kept up with; nobody sends more than a few bytes of them.
const MAX_EXTENSION: u16 = 256;
/// Longest trailer line.
const MAX_TRAILER_LINE: u16 = 8 * 1024;
/// Framing bytes allowed beyond four per payload byte: room for the size lines and trailers
/// of any real client, no room for megabytes of framing around nothing.
const FRAMING_ALLOWANCE: u64 = 16 * 1024;

impl BodyDecoder {
    /// A strict decoder for a body with this framing, refusing more than `max_payload` bytes of
    /// payload.
    pub fn new(framing: BodyFraming, max_payload: u64) -> Result<Self, BodyError> {
        let state = match framing {
            BodyFraming::None => State::Done,
            BodyFraming::Length(n) if n > max_payload => return Err(BodyError::TooLarge(max_payload)),
            BodyFraming::Length(n) => State::Length(n),
            BodyFraming::Chunked => State::Size { size: 0, digits: 0 },
        };
        Ok(BodyDecoder { state, payload_seen: 0, framing_seen: 0, max_payload, lenient: false })
    }

    /// A lenient decoder (see the type's docs) for a body with this framing, of any length.
    pub fn lenient(framing: BodyFraming) -> Self {
        let state = match framing {
            BodyFraming::None | BodyFraming::Length(0) => State::Done,
            BodyFraming::Length(n) => State::Length(n),
            BodyFraming::Chunked => State::Size { size: 0, digits: 0 },
        };
        BodyDecoder { state, payload_seen: 0, framing_seen: 0, max_payload: u64::MAX, lenient: true }
    }

    /// Whether the body has been read to its end.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes as much of `input` as belongs to the body. Payload is not returned: callers that
    /// keep it slice it out with [`BodyDecoder::decode_with`].
    pub fn decode(&mut self, input: &[u8]) -> Result<Decoded, BodyError> {
        self.decode_with(input, |_| {})
    }

    /// Like [`BodyDecoder::decode`], handing each payload slice to `sink` in order.
    pub fn decode_with(&mut self, input: &[u8], mut sink: impl FnMut(&[u8])) -> Result<Decoded, BodyError> {
        let mut pos = 0;
        let mut payload = 0u64;
        while pos < input.len() && self.state != State::Done {
            let rest = &input[pos..];
            if let State::Length(left) | State::Data(left) = self.state {
                let take = (rest.len() as u64).min(left) as usize;
                sink(&rest[..take]);
                pos += take;
                payload += take as u64;
                self.payload_seen += take as u64;
                let left = left - take as u64;
                self.state = match self.state {
                    State::Length(_) if left == 0 => State::Done,
                    State::Length(_) => State::Length(left),
                    _ if left == 0 => State::DataEnd { cr_seen: false },
                    _ => State::Data(left),
                };
                continue;
            }
            let b = rest[0];
            pos += 1;
            self.framing_seen += 1;
            // Checked at every framing byte, so the answer depends on the bytes and not on how
            // the reads split them.
            if !self.lenient && self.framing_seen > FRAMING_ALLOWANCE + 4 * self.payload_seen {
                return Err(BodyError::BadChunk);
            }
            self.state = if self.lenient { self.step_lenient(b) } else { self.step(b) }?;
        }
        if self.payload_seen > self.max_payload {
            return Err(BodyError::TooLarge(self.max_payload));
        }
        Ok(Decoded { consumed: pos, payload, done: self.state == State::Done })
    }

    /// One framing byte of a chunked body, leniently: a bare LF ends a line, extensions and
    /// trailer lines may hold any byte and any length; the rest is as strict as [`Self::step`].
    fn step_lenient(&self, b: u8) -> Result<State, BodyError> {
        match (self.state, b) {
            (State::Size { size, digits }, b'\n') if digits > 0 => self.after_size_line(size),
            (State::Extension { size, .. }, b'\n') => self.after_size_line(size),
            (State::Extension { size, .. }, b'\r') => Ok(State::SizeLf { size }),
            (State::Extension { size, .. }, _) => Ok(State::Extension { size, len: 1 }),
            (State::DataEnd { cr_seen: false }, b'\n') => Ok(State::Size { size: 0, digits: 0 }),
            (State::Trailer { line: 0, cr_seen: false }, b'\n') => Ok(State::Done),
            (State::Trailer { cr_seen: false, .. }, b'\n') => Ok(State::Trailer { line: 0, cr_seen: false }),
            (State::Trailer { line, cr_seen: false }, b'\r') => Ok(State::Trailer { line, cr_seen: true }),
            (State::Trailer { cr_seen: false, .. }, _) => Ok(State::Trailer { line: 1, cr_seen: false }),
            (State::Trailer { line: 0, cr_seen: true }, _) => self.step(b),
            (State::Trailer { cr_seen: true, .. }, b'\n') => Ok(State::Trailer { line: 0, cr_seen: false }),
            _ => self.step(b),
        }
    }

    /// The state after a chunk-size line of `size` ends.
    fn after_size_line(&self, size: u64) -> Result<State, BodyError> {
        if size == 0 {
            Ok(State::Trailer { line: 0, cr_seen: false })
        } else if self.payload_seen.saturating_add(size) > self.max_payload {
            Err(BodyError::TooLarge(self.max_payload))
        } else {
            Ok(State::Data(size))
        }
    }

    /// One framing byte of a chunked body.
    fn step(&self, b: u8) -> Result<State, BodyError> {
        let bad = Err(BodyError::BadChunk);
        match self.state {
            State::Size { size, digits } => match b {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                    if digits == MAX_SIZE_DIGITS {
                        return bad;
                    }
                    let digit = (b as char).to_digit(16).unwrap_or(0) as u64;
                    Ok(State::Size { size: size << 4 | digit, digits: digits + 1 })
                }
                _ if digits == 0 => bad,
                b';' | b' ' | b'\t' => Ok(State::Extension { size, len: 1 }),
                b'\r' => Ok(State::SizeLf { size }),
                _ => bad,
            },
            State::Extension { size, len } => match b {
                b'\r' => Ok(State::SizeLf { size }),
                _ if len == MAX_EXTENSION => bad,
                b'\t' | 0x20..=0x7e | 0x80..=0xff => Ok(State::Extension { size, len: len + 1 }),
                _ => bad,
            },
            State::SizeLf { size } => match b {
                b'\n' => self.after_size_line(size),
                _ => bad,
            },
            State::DataEnd { cr_seen: false } if b == b'\r' => Ok(State::DataEnd { cr_seen: true }),
            State::DataEnd { cr_seen: true } if b == b'\n' => Ok(State::Size { size: 0, digits: 0 }),
            State::DataEnd { .. } => bad,
            State::Trailer { line, cr_seen: true } => match b {
                b'\n' if line == 0 => Ok(State::Done),
                b'\n' => Ok(State::Trailer { line: 0, cr_seen: false }),
                _ => bad,
            },
            State::Trailer { line, cr_seen: false } => match b {
                b'\r' => Ok(State::Trailer { line, cr_seen: true }),
                b'\n' => bad,
                _ if line == MAX_TRAILER_LINE => bad,
                _ => Ok(State::Trailer { line: line + 1, cr_seen: false }),
            },
            State::Length(_) | State::Data(_) | State::Done => Ok(self.state),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(framing: BodyFraming, input: &[u8]) -> Result<(Vec<u8>, usize, bool), BodyError> {
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
        for input in [
            &b"zz\r\n"[..],
            b"\r\n",
            b"5\r\nhelloXX",
            b"fffffffffffffffffff\r\n",
            b"00000000000000000000001\r\nx\r\n",
            b"5\nhello\r\n",
            b"5\r\nhello\n0\r\n\r\n",
            b"2;\nxx\r\n",
            b"2;a\x01b\r\nxx\r\n",
            b"2\rxx",
            b"0\r\nTrailer: x\n\r\n",
        ] {
            assert_eq!(decode_all(BodyFraming::Chunked, input).unwrap_err(), BodyError::BadChunk);
        }
    }

    #[test]
    fn framing_cannot_outgrow_the_payload() {
        let mut d = BodyDecoder::new(BodyFraming::Chunked, 1 << 20).unwrap();
        let chunk = format!("1;{}\r\nx\r\n", "e".repeat(200));
        let flood = chunk.repeat(200);
        assert_eq!(d.decode(flood.as_bytes()).unwrap_err(), BodyError::BadChunk);
        let mut d = BodyDecoder::new(BodyFraming::Chunked, 1 << 20).unwrap();
        let long_ext = format!("1;{}\r\nx\r\n", "e".repeat(300));
        assert_eq!(d.decode(long_ext.as_bytes()).unwrap_err(), BodyError::BadChunk);
    }

    #[test]
    fn the_lenient_decoder_takes_bare_lf_and_any_extension_in_any_split() {
        let input = b"5;\x01odd\nhello\n6\r\n world\r\n0\nX-T: \x02\n\r\nNEXT";
        for split in 0..=input.len() {
            let mut d = BodyDecoder::lenient(BodyFraming::Chunked);
            let mut out = Vec::new();
            let a = d.decode_with(&input[..split], |s| out.extend_from_slice(s)).unwrap();
            let b = d.decode_with(&input[a.consumed..], |s| out.extend_from_slice(s)).unwrap();
            assert_eq!(out, b"hello world", "split {split}");
            assert_eq!(&input[a.consumed + b.consumed..], b"NEXT", "split {split}");
            assert!(b.done, "split {split}");
        }
        // The strict decoder refuses the same body.
        assert_eq!(decode_all(BodyFraming::Chunked, input).unwrap_err(), BodyError::BadChunk);
        // Leniency is about line ends, not about what a chunk size or chunk end is.
        for bad in [&b"zz\r\n"[..], b"\n", b"5\r\nhelloXX", b"fffffffffffffffffff\r\n", b"2\rxx"] {
            let mut d = BodyDecoder::lenient(BodyFraming::Chunked);
            assert_eq!(d.decode(bad).unwrap_err(), BodyError::BadChunk, "{bad:?}");
        }
    }

    #[test]
    fn too_large_bodies_are_refused() {
        assert!(matches!(
            BodyDecoder::new(BodyFraming::Length(2 << 20), 1 << 20),
            Err(BodyError::TooLarge(_))
        ));
        let mut d = BodyDecoder::new(BodyFraming::Chunked, 4).unwrap();
        assert!(matches!(d.decode(b"5\r\nhello\r\n"), Err(BodyError::TooLarge(_))));
    }
}
