//! The library page: what a person sees at `/` (and at any directory without an `index.html`).
//!
//! Owns the HTML: a list of the directory's entries, with an HTML5 player for each video the
//! browser can play and, beside each MP4, its `rtsp://` URL when RTSP is served. Everything from the file system is escaped. It does not read the file system.

use std::fmt::Write as _;

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use sluice_proto::http::path::LibraryPath;

use crate::library::Listed;

/// Characters percent-encoded in links: everything that is not safe in a path segment.
pub const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'/')
    .add(b'\\')
    .add(b'^')
    .add(b'|')
    .add(b'[')
    .add(b']')
    .add(b'\'')
    .add(b'&')
    .add(b':');

fn is_video(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".mp4", ".m4v", ".webm", ".mov"].iter().any(|ext| lower.ends_with(ext))
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn human_size(len: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut size = len as f64;
    let mut unit = 0;
    while size >= 1000.0 && unit < UNITS.len() - 1 {
        size /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{len} B")
    } else {
        format!("{size:.1} {}", UNITS[unit])
    }
}

/// Whether RTSP serves this file (the MP4 family the demuxer reads).
pub fn is_mp4(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".mp4", ".m4v", ".mov"].iter().any(|ext| lower.ends_with(ext))
}

/// Renders the page for directory `dir` with its `entries`; `rtsp` is `rtsp://HOST:PORT` when
/// RTSP is served.
pub fn library_page(dir: &LibraryPath, entries: &[Listed], rtsp: Option<&str>) -> String {
    let title = if dir.relative().is_empty() {
        "sluice media library".to_string()
    } else {
        format!("sluice: /{}/", escape(dir.relative()))
    };
    let mut html = String::with_capacity(4096);
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title}</title>\
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}}\
h1{{font-size:1.4rem}}ul{{list-style:none;padding:0}}li{{margin:1rem 0;padding:.75rem;border:1px solid #ddd;border-radius:6px}}\
video{{display:block;width:100%;max-width:40rem;margin-top:.5rem;background:#000}}.size{{color:#777;margin-left:.5rem}}\
a{{color:#0b5cad}}</style></head><body>\n<h1>{title}</h1>\n"
    );
    if !dir.relative().is_empty() {
        html.push_str("<p><a href=\"../\">&larr; up</a></p>\n");
    }
    if entries.is_empty() {
        html.push_str("<p>This folder is empty.</p>\n");
    }
    html.push_str("<ul>\n");
    for e in entries {
        // Percent-encoded and prefixed with `./`, so no file name can become a scheme
        // (`javascript:…`) or another host (`//…`) in the link.
        let href: String = format!("./{}", utf8_percent_encode(&e.name, SEGMENT));
        let name = escape(&e.name);
        if e.is_dir {
            let _ = writeln!(html, "<li><a href=\"{href}/\">{name}/</a></li>");
        } else if is_video(&e.name) {
            let rtsp_line = match rtsp {
                Some(base) if is_mp4(&e.name) => {
                    let mut url = base.to_string();
                    for segment in dir.segments() {
                        url.push('/');
                        url.extend(utf8_percent_encode(segment, SEGMENT));
                    }
                    url.push('/');
                    url.extend(utf8_percent_encode(&e.name, SEGMENT));
                    let url = escape(&url);
                    format!("<div class=\"rtsp\">RTSP: <a href=\"{url}\"><code>{url}</code></a></div>")
                }
                _ => String::new(),
            };
            let _ = writeln!(
                html,
                "<li><a href=\"{href}\">{name}</a><span class=\"size\">{}</span>\
<video controls preload=\"metadata\" src=\"{href}\"></video>{rtsp_line}</li>",
                human_size(e.len)
            );
        } else {
            let _ = writeln!(
                html,
                "<li><a href=\"{href}\">{name}</a><span class=\"size\">{}</span></li>",
                human_size(e.len)
            );
        }
    }
    html.push_str("</ul>\n<p><small>served by sluice</small></p>\n</body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::http::path::normalize;

    #[test]
    fn videos_get_players_and_names_are_escaped() {
        let entries = vec![
            Listed { name: "a <b>.mp4".into(), is_dir: false, len: 275_311 },
            Listed { name: "notes.txt".into(), is_dir: false, len: 12 },
            Listed { name: "shows".into(), is_dir: true, len: 0 },
        ];
        let html = library_page(&normalize("/").unwrap(), &entries, Some("rtsp://127.0.0.1:8554"));
        assert!(html.contains("<code>rtsp://127.0.0.1:8554/a%20%3Cb%3E.mp4</code>"), "{html}");
        assert!(
            html.contains("<video controls preload=\"metadata\" src=\"./a%20%3Cb%3E.mp4\"></video>"),
            "{html}"
        );
        assert!(html.contains(">a &lt;b&gt;.mp4</a>"));
        assert!(html.contains("275.3 KB"));
        assert_eq!(html.matches("<video").count(), 1);
        assert!(html.contains("<a href=\"./shows/\">shows/</a>"));
        let evil = vec![Listed { name: "javascript:alert(1)".into(), is_dir: false, len: 1 }];
        let html = library_page(&normalize("/").unwrap(), &evil, None);
        assert!(html.contains("href=\"./javascript%3Aalert(1)\""), "{html}");
    }
}
