//! Checking range responses: `Content-Range` and multipart/byteranges bodies.

#![allow(dead_code)]

use super::*;

/// `bytes FIRST-LAST/LEN` → (first, last, len).
pub fn parse_content_range(v: &str) -> Result<(u64, u64, u64), String> {
    let rest = v.trim().strip_prefix("bytes ").ok_or_else(|| format!("Content-Range {v:?} is not bytes"))?;
    let (span, len) = rest.split_once('/').ok_or_else(|| format!("Content-Range {v:?} has no /"))?;
    let (a, b) = span.split_once('-').ok_or_else(|| format!("Content-Range {v:?} has no -"))?;
    let p = |s: &str| s.trim().parse::<u64>().map_err(|_| format!("Content-Range {v:?}: bad number {s:?}"));
    let (a, b, len) = (p(a)?, p(b)?, p(len)?);
    if a > b || b >= len {
        return Err(format!("Content-Range {v:?} is not a valid span"));
    }
    Ok((a, b, len))
}

/// One part of a `multipart/byteranges` body.
#[derive(Debug)]
pub struct Part {
    pub content_type: Option<String>,
    pub range: (u64, u64, u64),
    pub data: Vec<u8>,
}

/// The boundary parameter of a `multipart/byteranges` Content-Type.
pub fn boundary_of(resp: &Response) -> Result<String, String> {
    let ct = resp.header("content-type").ok_or("no Content-Type")?;
    let (kind, params) =
        ct.split_once(';').ok_or_else(|| format!("Content-Type {ct:?} has no parameters"))?;
    if !kind.trim().eq_ignore_ascii_case("multipart/byteranges") {
        return Err(format!("Content-Type {ct:?} is not multipart/byteranges"));
    }
    for p in params.split(';') {
        if let Some((k, v)) = p.split_once('=') {
            if k.trim().eq_ignore_ascii_case("boundary") {
                let b = v.trim().trim_matches('"').to_string();
                if b.is_empty() {
                    return Err("empty boundary".into());
                }
                return Ok(b);
            }
        }
    }
    Err(format!("Content-Type {ct:?} has no boundary"))
}

/// Parses a `multipart/byteranges` response body. Each part's length is taken from its
/// Content-Range, so binary data that happens to contain the boundary does not confuse it.
pub fn parse_multipart(resp: &Response) -> Result<Vec<Part>, String> {
    let boundary = boundary_of(resp)?;
    let body = &resp.body;
    let delim = format!("--{boundary}").into_bytes();
    let first = find(body, &delim).ok_or("no boundary delimiter in the body")?;
    if !body[..first].iter().all(|b| b.is_ascii_whitespace()) {
        return Err(format!("unexpected preamble {:?}", lossy_prefix(&body[..first], 100)));
    }
    let mut pos = first;
    let mut parts = Vec::new();
    loop {
        if !body[pos..].starts_with(&delim) {
            return Err(format!(
                "expected a boundary at byte {pos}, found {:?}",
                lossy_prefix(&body[pos..], 60)
            ));
        }
        pos += delim.len();
        if body[pos..].starts_with(b"--") {
            pos += 2;
            if !body[pos..].iter().all(|b| b.is_ascii_whitespace()) {
                return Err(format!(
                    "bytes after the closing boundary: {:?}",
                    lossy_prefix(&body[pos..], 60)
                ));
            }
            return Ok(parts);
        }
        if !body[pos..].starts_with(b"\r\n") {
            return Err(format!("boundary not followed by CRLF at byte {pos}"));
        }
        pos += 2;
        let head_end = find(&body[pos..], b"\r\n\r\n").ok_or("part without a blank line")?;
        let head = std::str::from_utf8(&body[pos..pos + head_end]).map_err(|_| "part head is not UTF-8")?;
        pos += head_end + 4;
        let mut content_type = None;
        let mut range = None;
        for line in head.split("\r\n").filter(|l| !l.is_empty()) {
            let (n, v) = line.split_once(':').ok_or_else(|| format!("bad part header {line:?}"))?;
            if n.trim().eq_ignore_ascii_case("content-type") {
                content_type = Some(v.trim().to_string());
            } else if n.trim().eq_ignore_ascii_case("content-range") {
                range = Some(parse_content_range(v)?);
            }
        }
        let range = range.ok_or_else(|| format!("part without Content-Range: {head:?}"))?;
        let n = (range.1 - range.0 + 1) as usize;
        if body.len() < pos + n {
            return Err(format!("part {range:?} runs past the end of the body"));
        }
        let data = body[pos..pos + n].to_vec();
        pos += n;
        if !body[pos..].starts_with(b"\r\n") {
            return Err(format!("part {range:?} not followed by CRLF: {:?}", lossy_prefix(&body[pos..], 60)));
        }
        pos += 2;
        parts.push(Part { content_type, range, data });
    }
}
