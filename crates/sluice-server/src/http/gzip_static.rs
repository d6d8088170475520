//! Serving objects the store keeps gzipped, as nginx's `gzip_static` with `gunzip` does: on a
//! local root the gzip form of `name` is the hidden file [`sluice_store::gzip_form_name`] gives
//! (a name no client can upload, list or request, so a user's own `name.gz` is a file like any
//! other); in an object store it is the object itself, stored with `Content-Encoding: gzip`.
//!
//! A client that accepts gzip gets the stored bytes with `Content-Encoding: gzip` (ranges apply to
//! them); one that does not gets them decompressed, into an anonymous memory file so that ranges,
//! conditionals and every engine's send strategy work exactly as for a plain file. Both answers say
//! `Vary: Accept-Encoding`, and their ETags differ (the two representations differ in length, and
//! the tag is derived from it). This module owns that choice; the store decides what is gzipped.

use std::fs::File;
use std::io::{self, Read, Write};
use std::sync::Arc;

use sluice_proto::http::file::{content_type_for, file_response, FileMeta};
use sluice_proto::http::{Request, Response, Status};

/// Decompressed objects larger than this are not inflated for identity clients (406 instead):
/// it bounds the memory one request may pin.
const MAX_GUNZIPPED: u64 = 256 << 20;

/// Whether the request accepts the gzip coding (RFC 9110 §12.5.3: a `gzip` or `*` member with a
/// non-zero weight).
pub fn accepts_gzip(req: &Request<'_>) -> bool {
    req.header_values("accept-encoding").any(|v| {
        String::from_utf8_lossy(v).split(',').any(|member| {
            let mut parts = member.split(';');
            let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let zero = parts.any(|p| {
                let p = p.trim().to_ascii_lowercase();
                p.strip_prefix("q=").is_some_and(|q| q.trim().parse::<f32>() == Ok(0.0))
            });
            (coding == "gzip" || coding == "x-gzip" || coding == "*") && !zero
        })
    })
}

/// The response for `relative` (a library path with no plain file) from its stored gzip form `gz`.
pub fn respond(
    req: &Request<'_>,
    relative: &str,
    gz: File,
    gz_meta: &std::fs::Metadata,
    max_ranges: usize,
) -> Response {
    let gz_meta = FileMeta {
        len: gz_meta.len(),
        modified: gz_meta.modified().ok(),
        content_type: content_type_for(relative),
        etag: None,
    };
    respond_from(req, relative, gz, &gz_meta, max_ranges)
}

/// [`respond`] for a gzip form described by `gz_meta` (an object store's, whose `etag` is the
/// stored form's: the inflated one gets a tag of its own derived from it).
pub fn respond_from(
    req: &Request<'_>,
    relative: &str,
    gz: File,
    gz_meta: &FileMeta,
    max_ranges: usize,
) -> Response {
    let response = if accepts_gzip(req) {
        file_response(req, Arc::new(gz), gz_meta, max_ranges, 0).with_header("Content-Encoding", "gzip")
    } else {
        match gunzip_to_memfd(gz) {
            Ok((file, len)) => {
                let etag = gz_meta.etag.as_ref().map(|t| format!("\"{}-gunzip\"", t.trim_matches('"')));
                let meta = FileMeta { len, etag, ..gz_meta.clone() };
                file_response(req, Arc::new(file), &meta, max_ranges, 0)
            }
            Err(e) if e.kind() == io::ErrorKind::FileTooLarge => Response::error(Status(406)),
            Err(e) => {
                tracing::warn!(path = relative, "cannot decompress the stored gzip form: {e}");
                Response::error(Status::INTERNAL_SERVER_ERROR)
            }
        }
    };
    response.with_header("Vary", "Accept-Encoding")
}

/// Inflates a gzip file into an anonymous in-memory file; its length.
fn gunzip_to_memfd(mut gz: File) -> io::Result<(File, u64)> {
    // From the first byte whatever the handle's offset: a slice the cache has just written is
    // handed over still positioned at its end.
    io::Seek::seek(&mut gz, io::SeekFrom::Start(0))?;
    let mut out = sluice_store::memory_file(c"sluice-gunzip")?;
    let mut decoder = flate2::read::GzDecoder::new(io::BufReader::new(gz)).take(MAX_GUNZIPPED + 1);
    let len = io::copy(&mut decoder, &mut out)?;
    if len > MAX_GUNZIPPED {
        return Err(io::Error::new(io::ErrorKind::FileTooLarge, "decompressed object over the limit"));
    }
    out.flush()?;
    Ok((out, len))
}
