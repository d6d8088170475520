//! Sizes written as text (`512`, `64KiB`, `1M`, `50KB`, `1.5GB`) in `sluice.toml`, the command-line
//! flags of `sluice serve`, `sluice upload`, `sluice load` and `sluice lab`, and payload specs such
//! as `email:50KB`: one parser and a serde adapter, so every place accepts the same spellings.
//!
//! The units: a bare number is bytes (`B` may be written); `K`, `M`, `G`, `T` and `KiB`, `MiB`,
//! `GiB`, `TiB` are powers of 1024; `KB`, `MB`, `GB`, `TB` are powers of 1000. Units are read
//! without regard to case. A decimal (`1.5MB`, `0.5K`) is accepted when it comes to a whole number
//! of bytes, since `1.5GB` is a natural way to write 1,500,000,000; `0.1K` (102.4 bytes) is refused
//! rather than rounded. Plain text in, a byte count out.

/// What `--help` and error messages say about the syntax.
pub const SYNTAX: &str = "bytes, or a number with K/M/G/T or KiB/MiB/GiB/TiB (powers of 1024) \
                          or KB/MB/GB/TB (powers of 1000), e.g. 512K, 64MiB, 1.5GB";

/// The multiplier of a unit, if `unit` is one (case-insensitive).
fn unit_scale(unit: &str) -> Option<u64> {
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return None,
    };
    Some(scale)
}

/// Parses a size such as `512`, `64KiB`, `1M`, `50KB` or `1.5GB` into bytes.
pub fn parse(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let not_a_size = || format!("`{trimmed}` is not a size ({SYNTAX})");
    let number_end = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(number_end);
    let scale = unit_scale(unit.trim()).ok_or_else(not_a_size)?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty()
        || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit())
        || number.ends_with('.')
    {
        return Err(not_a_size());
    }
    let too_large = || format!("`{trimmed}` is too large (at most {} bytes)", u64::MAX);
    // Exact arithmetic in u128: the digits as an integer, scaled, then divided by 10^decimals.
    let digits = format!("{whole}{fraction}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(too_large());
    }
    let mantissa: u128 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| not_a_size())? };
    let divisor = 10u128.checked_pow(fraction.len() as u32).ok_or_else(not_a_size)?;
    let scaled = mantissa.checked_mul(u128::from(scale)).ok_or_else(too_large)?;
    if !scaled.is_multiple_of(divisor) {
        return Err(format!("`{trimmed}` is not a whole number of bytes"));
    }
    u64::try_from(scaled / divisor).map_err(|_| too_large())
}

/// Parses a size that must fit a `usize` (buffer lengths).
pub fn parse_usize(text: &str) -> Result<usize, String> {
    let n = parse(text)?;
    usize::try_from(n).map_err(|_| format!("`{}` is too large", text.trim()))
}

/// Writes a size the way [`parse`] reads it: the largest power-of-1024 unit that divides it
/// exactly (`64MiB`), else bytes.
pub fn format(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes != 0 && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// Reads an integer (bytes) or a size string.
struct SizeVisitor;

impl serde::de::Visitor<'_> for SizeVisitor {
    type Value = u64;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a size: an integer number of bytes or a string such as \"64MiB\" ({SYNTAX})")
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("{v} is not a size: sizes are not negative")))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<u64, E> {
        parse(v).map_err(E::custom)
    }
}

/// serde `deserialize_with` adapter: an integer (bytes) or a size string, into any integer type.
pub fn deserialize<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    let n = d.deserialize_any(SizeVisitor)?;
    T::try_from(n).map_err(|_| serde::de::Error::custom(format!("{n} bytes is too large here")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numbers_are_bytes() {
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse("512"), Ok(512));
        assert_eq!(parse(" 512 "), Ok(512));
        assert_eq!(parse("512B"), Ok(512));
        assert_eq!(parse("512b"), Ok(512));
        assert_eq!(parse("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn every_unit_in_every_case() {
        let binary = [("K", 1u64 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40)];
        for (letter, scale) in binary {
            for unit in [letter.to_string(), format!("{letter}iB"), format!("{letter}IB")] {
                for spelled in [unit.clone(), unit.to_ascii_lowercase()] {
                    assert_eq!(parse(&format!("3{spelled}")), Ok(3 * scale), "3{spelled}");
                    assert_eq!(parse(&format!("3 {spelled}")), Ok(3 * scale), "3 {spelled}");
                }
            }
        }
        let decimal = [("KB", 1_000u64), ("MB", 1_000_000), ("GB", 1_000_000_000), ("TB", 1_000_000_000_000)];
        for (unit, scale) in decimal {
            for spelled in [unit.to_string(), unit.to_ascii_lowercase(), format!("{}b", &unit[..1])] {
                assert_eq!(parse(&format!("7{spelled}")), Ok(7 * scale), "7{spelled}");
            }
        }
        assert_eq!(parse("64MiB"), Ok(64 << 20));
        assert_eq!(parse("1M"), Ok(1 << 20));
        assert_eq!(parse("5M"), Ok(5 << 20));
        assert_eq!(parse("50KB"), Ok(50_000));
    }

    #[test]
    fn decimals_that_come_to_whole_bytes() {
        assert_eq!(parse("1.5MB"), Ok(1_500_000));
        assert_eq!(parse("1.5K"), Ok(1536));
        assert_eq!(parse("0.5GiB"), Ok(1 << 29));
        assert_eq!(parse(".5K"), Ok(512));
        assert_eq!(parse("2.000"), Ok(2));
        assert!(parse("0.1K").unwrap_err().contains("whole number"));
        assert!(parse("1.5").unwrap_err().contains("whole number"));
        assert!(parse("1.").is_err());
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        assert!(parse("18446744073709551616").unwrap_err().contains("too large"));
        assert!(parse("16777216T").unwrap_err().contains("too large"));
        assert_eq!(parse("16777215T"), Ok(16_777_215 << 40));
        assert!(parse("99999999999999999999999999999999999999999TB").unwrap_err().contains("too large"));
        assert!(parse("18446744073709552KB").unwrap_err().contains("too large"));
    }

    #[test]
    fn junk_is_refused_with_the_syntax() {
        for junk in [
            "", " ", "K", "MB", "-1", "+1", "1.5XB", "1 2", "1e6", "1_000", "1..5K", "1.5.5", "one", "1KK",
            "5 M B",
        ] {
            let e = parse(junk).expect_err(junk);
            assert!(e.contains("not a size") || e.contains("whole number"), "{junk}: {e}");
        }
        assert!(parse("1.5XB").unwrap_err().contains("KiB"), "the message teaches the syntax");
    }

    #[test]
    fn format_reads_back() {
        for n in [0, 1, 1000, 1024, 64 << 20, 3 << 40, 1_500_000, u64::MAX] {
            assert_eq!(parse(&format(n)), Ok(n), "{n}");
        }
        assert_eq!(format(64 << 20), "64MiB");
        assert_eq!(format(1000), "1000");
    }

    #[test]
    fn serde_takes_an_integer_or_a_string() {
        use serde::de::value::Error;
        use serde::de::IntoDeserializer;
        let n: Result<u64, Error> = deserialize(1_048_576u64.into_deserializer());
        assert_eq!(n, Ok(1 << 20));
        let n: Result<usize, Error> = deserialize("64KiB".into_deserializer());
        assert_eq!(n, Ok(64 << 10));
        let n: Result<u64, Error> = deserialize((-1i64).into_deserializer());
        assert!(n.is_err());
        let n: Result<u64, Error> = deserialize("1.5XB".into_deserializer());
        assert!(n.is_err());
        let n: Result<u64, Error> = deserialize(true.into_deserializer());
        assert!(n.is_err());
        let n: Result<u16, Error> = deserialize("1MiB".into_deserializer());
        assert!(n.unwrap_err().to_string().contains("too large"));
    }
}
