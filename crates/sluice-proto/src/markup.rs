//! Text made safe in HTML and XML: the one escaper for sluice's pages (the folder page, the
//! dashboards and reports) and documents (DASH MPDs).
//!
//! Owns the escaping of the five characters markup gives meaning to. [`escape`] serves element
//! text and attribute values in either quote; [`escape_text`] leaves `'` as it is, for text and
//! `"`-quoted attributes only, where readers (and people searching a report) see the apostrophe
//! of "the report's table" as written. It does not escape for `<script>` bodies, URLs or CSS.

/// `text` made safe as HTML or XML element text or a quoted (`"` or `'`) attribute value: `&`,
/// `<`, `>`, `"` and `'` written as references. `'` is `&#39;`, which HTML 4 and XML both read
/// (`&apos;` is XML and HTML 5 only).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    escape_into(&mut out, text);
    out
}

/// [`escape`] appended to `out`.
pub fn escape_into(out: &mut String, text: &str) {
    write_escaped(out, text, true);
}

/// `text` made safe as element text or a `"`-quoted attribute value: `&`, `<`, `>` and `"` as
/// references, `'` as it is (never inside a `'`-quoted attribute).
pub fn escape_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    write_escaped(&mut out, text, false);
    out
}

fn write_escaped(out: &mut String, text: &str, apostrophe: bool) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' if apostrophe => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_five_special_characters_become_references() {
        assert_eq!(escape(r#"a&b<c>"d"'e'"#), "a&amp;b&lt;c&gt;&quot;d&quot;&#39;e&#39;");
    }

    #[test]
    fn other_text_is_unchanged_and_escaping_is_not_idempotent_by_accident() {
        assert_eq!(escape("plain é ✓ text"), "plain é ✓ text");
        assert_eq!(escape("&amp;"), "&amp;amp;", "an already escaped reference is escaped again");
        assert_eq!(escape(""), "");
    }

    #[test]
    fn text_escaping_keeps_the_apostrophe() {
        assert_eq!(
            escape_text(r#"the report's <table> & "rows""#),
            "the report's &lt;table&gt; &amp; &quot;rows&quot;"
        );
    }

    #[test]
    fn escape_into_appends() {
        let mut out = String::from("<p>");
        escape_into(&mut out, "1 < 2");
        assert_eq!(out, "<p>1 &lt; 2");
    }
}
