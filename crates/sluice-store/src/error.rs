//! The store's error type: what went wrong, in terms a server can map to a status.

use std::io;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No object under that key.
    #[error("no such object")]
    NotFound,
    /// The condition (`If-None-Match: *`, `If-Match`) did not hold; nothing was changed.
    #[error("precondition failed")]
    PreconditionFailed,
    /// The payload does not match its declared digest; nothing was stored.
    #[error("checksum mismatch")]
    ChecksumMismatch,
    /// The key is not a valid object name.
    #[error("invalid key: {0}")]
    BadKey(#[from] crate::key::KeyError),
    /// No room left (ENOSPC, EDQUOT); nothing was stored.
    #[error("no space left")]
    NoSpace,
    /// A path under the key exists as something else (a directory where a file goes).
    #[error("key collides with a directory")]
    Conflict,
    /// The local file system failed.
    #[error("i/o: {0}")]
    Io(io::Error),
    /// The object store failed (network, authentication, server error).
    #[error("object store: {0}")]
    Remote(String),
    /// The store could not be set up.
    #[error("store configuration: {0}")]
    Config(String),
}

impl From<io::Error> for StoreError {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => StoreError::NoSpace,
            _ if e.kind() == io::ErrorKind::NotFound => StoreError::NotFound,
            _ => StoreError::Io(e),
        }
    }
}

impl From<object_store::Error> for StoreError {
    fn from(e: object_store::Error) -> Self {
        match e {
            object_store::Error::NotFound { .. } => StoreError::NotFound,
            object_store::Error::Precondition { .. } | object_store::Error::AlreadyExists { .. } => {
                StoreError::PreconditionFailed
            }
            e => {
                // The top error says which request failed; its causes say why ("operation timed
                // out", "connection refused"), which is what a caller must tell apart.
                let mut text = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(cause) = source {
                    let cause_text = cause.to_string();
                    if !text.contains(&cause_text) {
                        text.push_str(": ");
                        text.push_str(&cause_text);
                    }
                    source = cause.source();
                }
                StoreError::Remote(one_line(&text))
            }
        }
    }
}

/// A store's error on one line: an S3 error document (`<Code>`, `<Message>`) becomes
/// `Code: Message`, and any other text has its line breaks folded.
pub fn one_line(text: &str) -> String {
    let tag = |name: &str| {
        let open = format!("<{name}>");
        let start = text.find(&open)? + open.len();
        let end = text[start..].find(&format!("</{name}>"))? + start;
        Some(text[start..end].trim().to_string())
    };
    let folded = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    match (tag("Code"), text.find("<?xml").or_else(|| text.find("<Error>"))) {
        (Some(code), Some(xml_at)) => {
            let before = folded(text[..xml_at].trim_end_matches([':', ' ', '\n']));
            let message = tag("Message").map(|m| format!(": {m}")).unwrap_or_default();
            let before = if before.is_empty() { String::new() } else { format!("{before}: ") };
            format!("{before}{code}{message}")
        }
        _ => folded(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_error_document_is_one_line() {
        let text = "object store: Error performing GET http://h/b in 3ms - 404 Not Found: <?xml version=\"1.0\"?>\n<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message><RequestId>1</RequestId></Error>";
        assert_eq!(
            one_line(text),
            "object store: Error performing GET http://h/b in 3ms - 404 Not Found: NoSuchBucket: The specified bucket does not exist"
        );
        assert_eq!(one_line("connection refused\n  at line 2"), "connection refused at line 2");
    }
}
