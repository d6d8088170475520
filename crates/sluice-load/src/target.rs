//! Targets: parsing `http://` URLs (optionally weighted, `3=http://host/path`), resolving them once
//! before the run, the loopback-only safety rule, the request bytes rendered once per target, and
//! the smooth weighted round-robin that spreads requests over targets in exact proportions. It
//! does not own connections or timing.

use std::net::{SocketAddr, ToSocketAddrs};

use crate::error::LoadError;

/// A URL to load, as given, with its share of the requests.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TargetSpec {
    /// `http://host[:port]/path[?query]`.
    pub url: String,
    /// Relative share of requests (at least 1).
    pub weight: u32,
}

impl TargetSpec {
    /// Parses `URL` or `WEIGHT=URL` (for example `3=http://127.0.0.1:8080/a`).
    pub fn parse(text: &str) -> Result<TargetSpec, LoadError> {
        let (weight, url) = match text.split_once('=') {
            Some((w, url)) if !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()) => {
                let weight =
                    w.parse::<u32>().ok().filter(|&w| w > 0).ok_or_else(|| LoadError::InvalidTarget {
                        url: text.to_string(),
                        reason: "the weight must be a whole number from 1".into(),
                    })?;
                (weight, url)
            }
            _ => (1, text),
        };
        Ok(TargetSpec { url: url.to_string(), weight })
    }
}

/// The parts of an `http://` URL this tool needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedUrl {
    /// Host as written (a name, an IPv4 address or a bracketed IPv6 address).
    pub host: String,
    /// Port (80 when the URL has none).
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
}

/// Splits an `http://` URL; rejects other schemes, user info, fragments and control characters.
pub fn parse_url(url: &str) -> Result<ParsedUrl, LoadError> {
    let bad = |reason: &str| LoadError::InvalidTarget { url: url.to_string(), reason: reason.to_string() };
    let rest = url.strip_prefix("http://").ok_or_else(|| bad("only http:// URLs are supported"))?;
    if url.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(bad("URLs may not contain spaces or control characters"));
    }
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], &rest[i..]),
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') { format!("/{path}") } else { path.to_string() };
    let path = match path.split_once('#') {
        Some((p, _)) => p.to_string(),
        None => path,
    };
    if authority.contains('@') {
        return Err(bad("user information in URLs is not supported"));
    }
    if authority.is_empty() {
        return Err(bad("the URL has no host"));
    }
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (addr, after) = v6.split_once(']').ok_or_else(|| bad("unclosed `[` in the host"))?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse::<u16>().map_err(|_| bad("invalid port"))?,
            None if after.is_empty() => 80,
            None => return Err(bad("unexpected text after the IPv6 address")),
        };
        (format!("[{addr}]"), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse::<u16>().map_err(|_| bad("invalid port"))?),
            None => (authority.to_string(), 80),
        }
    };
    if host.is_empty() || host == "[]" {
        return Err(bad("the URL has no host"));
    }
    Ok(ParsedUrl { host, port, path })
}

/// HTTP method of the generated requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Method {
    /// `GET`: the response body is read and counted.
    #[default]
    Get,
    /// `HEAD`: the response has no body.
    Head,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
        }
    }
}

/// A resolved target with its request bytes rendered once, so sending a request copies nothing.
#[derive(Debug, Clone)]
pub struct Target {
    /// The URL as given (names the target in reports).
    pub url: String,
    /// Relative share of requests.
    pub weight: u32,
    /// The address connections go to (the first the host resolved to).
    pub addr: SocketAddr,
    /// The method, so the response reader knows whether a body follows.
    pub method: Method,
    /// The request for a kept-alive connection.
    pub request_keep_alive: Vec<u8>,
    /// The same request asking the server to close the connection afterwards.
    pub request_close: Vec<u8>,
}

impl Target {
    /// Resolves `spec` and renders its requests; refuses addresses outside loopback unless
    /// `allow_non_loopback`.
    pub fn resolve(
        spec: &TargetSpec,
        method: Method,
        headers: &[(String, String)],
        allow_non_loopback: bool,
    ) -> Result<Target, LoadError> {
        let parsed = parse_url(&spec.url)?;
        let bare_host = parsed.host.trim_start_matches('[').trim_end_matches(']');
        let addr = (bare_host, parsed.port)
            .to_socket_addrs()
            .map_err(|e| LoadError::InvalidTarget {
                url: spec.url.clone(),
                reason: format!("cannot resolve: {e}"),
            })?
            .next()
            .ok_or_else(|| LoadError::InvalidTarget {
                url: spec.url.clone(),
                reason: "the host resolves to no address".into(),
            })?;
        if !allow_non_loopback && !addr.ip().is_loopback() {
            return Err(LoadError::NonLoopbackTarget { url: spec.url.clone(), addr });
        }
        let host_header =
            if parsed.port == 80 { parsed.host.clone() } else { format!("{}:{}", parsed.host, parsed.port) };
        let render = |close: bool| {
            let mut r = format!("{} {} HTTP/1.1\r\nHost: {host_header}\r\n", method.as_str(), parsed.path);
            let mut has_agent = false;
            let mut has_accept = false;
            for (name, value) in headers {
                has_agent |= name.eq_ignore_ascii_case("user-agent");
                has_accept |= name.eq_ignore_ascii_case("accept");
                r.push_str(&format!("{name}: {value}\r\n"));
            }
            if !has_agent {
                r.push_str(concat!("User-Agent: sluice-load/", env!("CARGO_PKG_VERSION"), "\r\n"));
            }
            if !has_accept {
                r.push_str("Accept: */*\r\n");
            }
            if close {
                r.push_str("Connection: close\r\n");
            }
            r.push_str("\r\n");
            r.into_bytes()
        };
        Ok(Target {
            url: spec.url.clone(),
            weight: spec.weight.max(1),
            addr,
            method,
            request_keep_alive: render(false),
            request_close: render(true),
        })
    }
}

/// Parses a `Name: value` header given on the command line.
pub fn parse_header(text: &str) -> Result<(String, String), LoadError> {
    let bad = |reason: &str| LoadError::InvalidConfig(format!("header `{text}`: {reason}"));
    let (name, value) = text.split_once(':').ok_or_else(|| bad("expected `Name: value`"))?;
    let name = name.trim();
    let value = value.trim();
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    {
        return Err(bad("invalid header name"));
    }
    if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(bad("header values may not contain line breaks"));
    }
    if name.eq_ignore_ascii_case("host")
        || name.eq_ignore_ascii_case("connection")
        || name.eq_ignore_ascii_case("content-length")
        || name.eq_ignore_ascii_case("transfer-encoding")
    {
        return Err(bad("this header is set by the generator"));
    }
    Ok((name.to_string(), value.to_string()))
}

/// Smooth weighted round-robin (nginx's upstream algorithm): over any run of `sum(weights)`
/// picks, each index is picked exactly `weight` times, interleaved rather than in blocks.
#[derive(Debug, Clone)]
pub struct WeightedPicker {
    weights: Vec<i64>,
    current: Vec<i64>,
    total: i64,
}

impl WeightedPicker {
    /// A picker over `weights` (each at least 1; an empty list always picks 0).
    pub fn new(weights: impl IntoIterator<Item = u32>) -> Self {
        let weights: Vec<i64> = weights.into_iter().map(|w| i64::from(w.max(1))).collect();
        let total = weights.iter().sum();
        WeightedPicker { current: vec![0; weights.len()], weights, total }
    }

    /// The next index.
    pub fn next_index(&mut self) -> usize {
        if self.weights.len() <= 1 {
            return 0;
        }
        let mut best = 0;
        for i in 0..self.weights.len() {
            self.current[i] += self.weights[i];
            if self.current[i] > self.current[best] {
                best = i;
            }
        }
        self.current[best] -= self.total;
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse() {
        let u = parse_url("http://127.0.0.1:8080/bench/hello?x=1").unwrap();
        assert_eq!(u, ParsedUrl { host: "127.0.0.1".into(), port: 8080, path: "/bench/hello?x=1".into() });
        let u = parse_url("http://localhost").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, "/"));
        let u = parse_url("http://[::1]:9/a#frag").unwrap();
        assert_eq!((u.host.as_str(), u.port, u.path.as_str()), ("[::1]", 9, "/a"));
        let u = parse_url("http://h:1?q").unwrap();
        assert_eq!(u.path, "/?q");
        for bad in [
            "https://x/",
            "http://",
            "http://:80/",
            "http://h:99999/",
            "http://u@h/",
            "http://h/a b",
            "ftp://x",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn weights_parse() {
        assert_eq!(TargetSpec::parse("3=http://h/a").unwrap().weight, 3);
        let s = TargetSpec::parse("http://h/a?x=1").unwrap();
        assert_eq!((s.weight, s.url.as_str()), (1, "http://h/a?x=1"));
        assert!(TargetSpec::parse("0=http://h/").is_err());
    }

    #[test]
    fn non_loopback_needs_permission() {
        let spec = TargetSpec::parse("http://192.0.2.1:80/").unwrap();
        assert!(matches!(
            Target::resolve(&spec, Method::Get, &[], false),
            Err(LoadError::NonLoopbackTarget { .. })
        ));
        let t = Target::resolve(&spec, Method::Get, &[], true).unwrap();
        assert_eq!(t.addr.port(), 80);
        let local = TargetSpec::parse("http://127.0.0.1:8080/x").unwrap();
        let t = Target::resolve(&local, Method::Head, &[("X-A".into(), "b".into())], false).unwrap();
        let req = String::from_utf8(t.request_close).unwrap();
        assert!(req.starts_with("HEAD /x HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nX-A: b\r\n"), "{req}");
        assert!(req.ends_with("Connection: close\r\n\r\n"));
    }

    #[test]
    fn headers_parse() {
        assert_eq!(parse_header("X-Test:  yes ").unwrap(), ("X-Test".into(), "yes".into()));
        assert!(parse_header("no colon").is_err());
        assert!(parse_header("Host: x").is_err());
        assert!(parse_header("Bad Name: x").is_err());
    }

    #[test]
    fn weighted_picker_is_exact() {
        let mut p = WeightedPicker::new([3, 1, 2]);
        let mut counts = [0; 3];
        for _ in 0..600 {
            counts[p.next_index()] += 1;
        }
        assert_eq!(counts, [300, 100, 200]);
        let mut single = WeightedPicker::new([5]);
        assert_eq!(single.next_index(), 0);
    }
}
