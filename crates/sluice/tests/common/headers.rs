//! What the HTTP and the RTSP test clients share: a response head's header lines, parsed and
//! looked up the same way (RTSP/1.0 borrows HTTP/1.1's message syntax).

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
