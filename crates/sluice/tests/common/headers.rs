//! What the HTTP and the RTSP test clients share: a response head's header lines, parsed and
//! looked up the same way (RTSP/1.0 borrows HTTP/1.1's message syntax), and the status line
//! before them.

use super::{find, lossy_prefix};

/// A response's status line and header fields, as HTTP/1.x and RTSP/1.0 both write them.
pub struct StatusHead {
    /// `HTTP/1.1`, `RTSP/1.0`.
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    /// The head exactly as received (status line to blank line).
    pub raw_head: Vec<u8>,
}

/// Parses the head at the start of `buf` whose version starts with `version` (`"HTTP/1."`,
/// `"RTSP/1.0"`); `Ok(None)` means more bytes are needed. The body starts at `raw_head.len()`.
pub fn parse_status_head(buf: &[u8], version: &str) -> Result<Option<StatusHead>, String> {
    let Some(head_end) = find(buf, b"\r\n\r\n") else {
        if buf.len() > 64 * 1024 {
            return Err(format!("response head over 64 KB: {:?}", lossy_prefix(buf, 300)));
        }
        return Ok(None);
    };
    let head = &buf[..head_end + 4];
    let text = std::str::from_utf8(&head[..head_end])
        .map_err(|_| format!("response head is not UTF-8: {:?}", lossy_prefix(head, 300)))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let found = parts.next().unwrap_or("");
    if !found.starts_with(version) {
        return Err(format!("not a {version} status line: {:?}", lossy_prefix(buf, 300)));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let reason = parts.next().unwrap_or("").to_string();
    let headers = parse_header_lines(lines)?;
    Ok(Some(StatusHead { version: found.to_string(), status, reason, headers, raw_head: head.to_vec() }))
}

/// How the test clients print a response: its head as received, then the start of its body.
pub fn fmt_response(
    f: &mut std::fmt::Formatter<'_>,
    raw_head: &[u8],
    body: &[u8],
    body_prefix: usize,
) -> std::fmt::Result {
    write!(
        f,
        "{}[body: {} bytes: {:?}]",
        String::from_utf8_lossy(raw_head),
        body.len(),
        lossy_prefix(body, body_prefix)
    )
}

/// Parses the header lines of a response head (after the status line) strictly: a line without a
/// colon, an empty name or a space before the colon is an error.
pub fn parse_header_lines<'a>(lines: impl Iterator<Item = &'a str>) -> Result<Vec<(String, String)>, String> {
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line.split_once(':').ok_or_else(|| format!("bad header line {line:?}"))?;
        if name.is_empty() || name.ends_with(' ') {
            return Err(format!("bad header name in {line:?}"));
        }
        headers.push((name.to_string(), value.trim().to_string()));
    }
    Ok(headers)
}

/// Header look-ups for a parsed response of either protocol.
pub trait HeaderLines {
    /// The header lines, in order.
    fn header_lines(&self) -> &[(String, String)];

    /// First value of a header, name compared case-insensitively.
    fn header(&self, name: &str) -> Option<&str> {
        self.header_lines().iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Every value of a header.
    fn headers_named(&self, name: &str) -> Vec<&str> {
        self.header_lines()
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// Whether the response says the connection closes.
    fn says_close(&self) -> bool {
        self.headers_named("connection")
            .iter()
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }
}

/// A parsed response's head and body as text, for assertions and failure messages.
pub trait MessageText {
    /// The head exactly as received.
    fn raw_head_bytes(&self) -> &[u8];
    /// The body.
    fn body_bytes(&self) -> &[u8];

    /// The head as text.
    fn head_text(&self) -> String {
        String::from_utf8_lossy(self.raw_head_bytes()).into_owned()
    }

    /// The body as text.
    fn body_text(&self) -> String {
        String::from_utf8_lossy(self.body_bytes()).into_owned()
    }
}
