//! Durations written as text (`5s`, `250ms`, `1m30s`, `1.5s`) in `sluice.toml`, command-line
//! flags of `sluice serve` and `sluice load`, scenario files and reports: one parser and a serde
//! adapter, so every place accepts the same spellings. Plain text in, a `Duration` out: no clock.

use std::time::Duration;

/// Parses a duration such as `5s`, `250ms`, `1m30s` or `1.5s`.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(d) = humantime::parse_duration(text) {
        return Ok(d);
    }
    // humantime has no fractions; `1.5s` and `0.5ms` are natural in stage lists.
    for (suffix, scale) in [("ms", 1e-3), ("us", 1e-6), ("s", 1.0), ("m", 60.0), ("h", 3600.0)] {
        if let Some(number) = text.strip_suffix(suffix) {
            if let Ok(v) = number.trim().parse::<f64>() {
                if v.is_finite() && v >= 0.0 && v * scale < 1e9 {
                    return Ok(Duration::from_secs_f64(v * scale));
                }
            }
        }
    }
    Err(format!("`{text}` is not a duration (examples: 5s, 250ms, 1m30s, 1.5s)"))
}

/// Writes a duration the way [`parse`] reads it.
pub fn format(d: Duration) -> String {
    humantime::format_duration(d).to_string().replace(' ', "")
}

/// serde `with` adapter.
pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(*d))
}

/// serde `with` adapter.
pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = <String as serde::Deserialize>::deserialize(d)?;
    parse(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        assert_eq!(parse("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse("soon").is_err());
        assert!(parse("-1s").is_err());
        assert_eq!(parse(&format(Duration::from_millis(1500))), Ok(Duration::from_millis(1500)));
    }
}
