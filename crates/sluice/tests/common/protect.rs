//! What the tests of encrypted titles and sets share: decrypting a stream with ffmpeg given a key,
//! asking a ClearKey licence, and the hex and base64url forms keys and KIDs travel in.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;

use super::{fetch, request, run_bounded, MessageText, Response};

/// `bytes` in base64url without padding, as W3C ClearKey writes KIDs and keys.
pub fn b64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The bytes of a hex string.
pub fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

/// The video frames ffprobe decodes from `stream` (an init segment and its segments) with `key`:
/// `Ok(count)`, or `Err(stderr)` when decoding fails (`-xerror`: the first error is fatal).
pub fn decrypted_frames(stream: &[u8], key: &str, dir: &Path) -> Result<String, String> {
    let file = dir.join(format!("stream-{key}-{}.mp4", stream.len()));
    std::fs::write(&file, stream).unwrap();
    let script = format!(
        "ffmpeg -v error -xerror -decryption_key {key} -i pipe: -map 0:v:0 -f null - < '{f}' && \
         ffprobe -v error -decryption_key {key} -count_frames -select_streams v:0 \
         -show_entries stream=nb_read_frames -of csv=p=0 pipe: < '{f}'",
        f = file.display()
    );
    let (status, out, err) = run_bounded(Command::new("sh").args(["-c", &script]), Duration::from_secs(60));
    let err = String::from_utf8_lossy(&err).into_owned();
    match status.success() {
        true => Ok(String::from_utf8_lossy(&out).trim().trim_end_matches(',').to_string()),
        false => Err(err),
    }
}

/// POST a ClearKey licence request for `kids` to `target`.
pub fn licence(addr: std::net::SocketAddr, target: &str, kids: &[&[u8]]) -> Response {
    let kids: Vec<String> = kids.iter().map(|kid| format!("\"{}\"", b64url(kid))).collect();
    let json = format!("{{\"kids\":[{}],\"type\":\"temporary\"}}", kids.join(","));
    let len = json.len().to_string();
    let mut req = request("POST", target, &[("Content-Type", "application/json"), ("Content-Length", &len)]);
    req.extend_from_slice(json.as_bytes());
    fetch(addr, req)
}

/// The body of GET `target`, which must be 200.
pub fn body(addr: std::net::SocketAddr, target: &str) -> Vec<u8> {
    let r = super::fetch_get(addr, target, &[]);
    assert_eq!(r.status, 200, "GET {target}: {}", r.head_text());
    r.body
}

/// A folder holding `keys` (a keys file's lines), `master` (a master key), `sign.key` and a
/// `sluice.toml` that protects `/films/` and `/locked/` (cenc, the keys file; `/locked/` behind
/// signed URLs too), `/derived/` (cbcs) and `/aes/` (aes-128), both from the master key.
pub fn protection_folder(keys: &str, master: &str, signing_key: &str) -> std::path::PathBuf {
    let dir = tempfile::tempdir().unwrap().keep();
    std::fs::write(dir.join("keys"), keys).unwrap();
    std::fs::write(dir.join("master"), master).unwrap();
    std::fs::write(dir.join("sign.key"), signing_key).unwrap();
    let config = format!(
        "[[protect]]\nprefix = \"/films/\"\nscheme = \"cenc\"\nkeys_file = \"{keys}\"\n\n\
         [[protect]]\nprefix = \"/locked/\"\nscheme = \"cenc\"\nkeys_file = \"{keys}\"\n\n\
         [[protect]]\nprefix = \"/derived/\"\nscheme = \"cbcs\"\nmaster_key_file = \"{master}\"\n\n\
         [[protect]]\nprefix = \"/aes/\"\nscheme = \"aes-128\"\nmaster_key_file = \"{master}\"\n\n\
         [[access]]\nprefix = \"/locked/\"\nmode = \"signed\"\nkey_file = \"{sign}\"\n",
        keys = dir.join("keys").display(),
        master = dir.join("master").display(),
        sign = dir.join("sign.key").display(),
    );
    std::fs::write(dir.join("sluice.toml"), config).unwrap();
    dir
}
