//! One HTTP/1.1 request on a fresh loopback connection, for driving the local helpers' own APIs
//! (SeaweedFS's filer, toxiproxy's control API). It owns nothing else: no keep-alive, no chunked
//! bodies (both APIs answer with `Connection: close`), not used for the data path.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Sends `method path` with an optional JSON body to `addr`; returns the status and the body.
pub(crate) fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    json: Option<&str>,
) -> io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = json.unwrap_or("");
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    Ok((status, body))
}
