//! The `cpix_document` property: a CPIX document of arbitrary bytes is read or refused without a
//! panic, and what a read one signals stays in its place.

use crate::protect::boxes::system_pssh;
use crate::protect::cpix::Cpix;
use crate::protect::manifest::{content_protection, system_key_lines};
use crate::protect::Scheme;

/// Reading arbitrary bytes as a CPIX document never panics; when a document keys titles, each
/// system's `pssh` box is written back byte for byte as the document gave it, its playlist lines
/// are `EXT-X-KEY` (media) or `EXT-X-SESSION-KEY` (master) lines only, and the MPD elements made
/// with it are well-formed XML.
pub fn cpix_document(data: &[u8]) {
    let Ok(cpix) = Cpix::parse(data) else { return };
    let Ok(title) = cpix.title_key(Scheme::Cbcs) else { return };
    for system in &title.systems {
        let given =
            cpix.systems.iter().find(|s| s.system_id == system.system_id).expect("a system of the document");
        assert_eq!(system_pssh(system), given.pssh, "the pssh box as the document gave it");
    }
    for (master, tag) in [(false, "#EXT-X-KEY:"), (true, "#EXT-X-SESSION-KEY:")] {
        let lines = system_key_lines(&title, master);
        assert!(lines.split('\n').skip(1).all(|l| l.starts_with(tag) && !l.contains('\r')), "{lines:?}");
    }
    let elements = content_protection(&title, "/a.mp4/clearkey");
    let wrapped = format!(
        "<MPD xmlns:cenc=\"urn:mpeg:cenc:2013\" xmlns:dashif=\"https://dashif.org/CPS\">{elements}</MPD>"
    );
    let mut reader = quick_xml::Reader::from_str(&wrapped);
    let mut depth = 0usize;
    loop {
        match reader.read_event().expect("the MPD's protection elements are well-formed") {
            quick_xml::events::Event::Start(_) => depth += 1,
            quick_xml::events::Event::End(_) => depth -= 1,
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(depth, 0, "every element closed");
}

#[cfg(test)]
mod tests {
    /// The property over the seed cut at every byte.
    #[test]
    fn cpix_cut_anywhere_reads_or_fails_cleanly() {
        let seed = include_bytes!("../../../../fuzz/corpus/cpix_document/spec-example.xml");
        for cut in 0..=seed.len() {
            super::cpix_document(&seed[..cut]);
        }
    }
}
