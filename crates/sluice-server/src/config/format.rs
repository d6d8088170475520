//! How one kind of setting value is written: on the command line, in `sluice.toml`, in `--help`
//! and in `serve --check`.
//!
//! Owns one [`Format`] per kind of value (an address, a duration, a size, a count, a name from a
//! fixed list, a path, text, an optional value) and the listening-address parser. It does not own
//! which settings exist (see [`super::table`]) nor the rules between settings (see
//! [`super::Config::validate`]). The duration and size syntaxes are `sluice-proto`'s, shared with
//! `sluice load` and `sluice upload`.

use std::marker::PhantomData;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use serde::de::{DeserializeOwned, DeserializeSeed};
use serde::{Deserialize, Deserializer};
use sluice_engine::{EngineKind, SendStrategy, ThreadsMode};

/// How values of type `T` are read and written. Implemented by unit types named for the syntax
/// (`Listen`, `Dur`, `Size`, ...), so one Rust type (`usize`) can be a count in one setting and a
/// size in another.
pub trait Format<T> {
    /// The placeholder `--help` shows after the flag (`<DURATION>`).
    const VALUE_NAME: &'static str;
    /// Reads a command-line value.
    fn parse(text: &str) -> Result<T, String>;
    /// The value as a flag would take it (`64GiB`, `10s`); `None` when unset.
    fn show(v: &T) -> Option<String>;
    /// The value as a TOML literal, exact (`serve --check`); `None` when unset.
    fn toml(v: &T) -> Option<String>;
    /// The value as a TOML literal for people (`sluice.toml`); `None` when unset.
    fn toml_for_people(v: &T) -> Option<String> {
        Self::toml(v)
    }
    /// Reads the value from `sluice.toml`.
    fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<T, D::Error>;
    /// Every accepted value, for values from a fixed list.
    fn possible_values() -> Option<Vec<&'static str>> {
        None
    }
}

/// A TOML string literal, quoted and escaped.
fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Reads a value from a string with `parse`; any other type is an error that names the form.
struct TextVisitor<T> {
    form: &'static str,
    parse: fn(&str) -> Result<T, String>,
}

impl<T> serde::de::Visitor<'_> for TextVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.form)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        (self.parse)(v).map_err(E::custom)
    }
}

/// An address to listen on: `127.0.0.1:8080`, `[::]:8080`, `localhost:8080` or a port alone.
pub struct Listen;

impl Format<SocketAddr> for Listen {
    const VALUE_NAME: &'static str = "ADDR";
    fn parse(text: &str) -> Result<SocketAddr, String> {
        parse_listen(text)
    }
    fn show(v: &SocketAddr) -> Option<String> {
        Some(v.to_string())
    }
    fn toml(v: &SocketAddr) -> Option<String> {
        Some(quoted(&v.to_string()))
    }
    fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
        d.deserialize_str(TextVisitor {
            form: "an address in quotes, such as \"127.0.0.1:8080\" or \"localhost:8080\"",
            parse: parse_listen,
        })
    }
}

/// A duration: `10s`, `250ms`, `1m30s`, `1.5s`.
pub struct Dur;

impl Format<Duration> for Dur {
    const VALUE_NAME: &'static str = "DURATION";
    fn parse(text: &str) -> Result<Duration, String> {
        sluice_proto::duration_text::parse(text)
    }
    fn show(v: &Duration) -> Option<String> {
        Some(sluice_proto::duration_text::format(*v))
    }
    fn toml(v: &Duration) -> Option<String> {
        Some(quoted(&sluice_proto::duration_text::format(*v)))
    }
    fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_str(TextVisitor {
            form: "a duration in quotes, such as \"10s\" or \"1.5s\"",
            parse: sluice_proto::duration_text::parse,
        })
    }
}

/// A size in bytes: an integer, or `512K`, `64MiB`, `1.5GB`.
pub struct Size;

macro_rules! size_format {
    ($($t:ty),*) => {$(
        impl Format<$t> for Size {
            const VALUE_NAME: &'static str = "SIZE";
            fn parse(text: &str) -> Result<$t, String> {
                let n = sluice_proto::size_text::parse(text)?;
                <$t>::try_from(n).map_err(|_| format!("`{}` is too large", text.trim()))
            }
            fn show(v: &$t) -> Option<String> {
                Some(sluice_proto::size_text::format(*v as u64))
            }
            // `64MiB` where the size is a whole number of a binary unit, else the bytes: exact
            // either way, and written alike in `serve --check` and `sluice.toml`.
            fn toml(v: &$t) -> Option<String> {
                let text = sluice_proto::size_text::format(*v as u64);
                Some(if text.parse::<u64>().is_ok() { text } else { quoted(&text) })
            }
            fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                sluice_proto::size_text::deserialize(d)
            }
        }
    )*};
}
size_format!(u64, usize);

/// A whole number (viewers, threads, connections), written as TOML writes it.
pub struct Count;

impl<T> Format<T> for Count
where
    T: std::str::FromStr + std::fmt::Display + DeserializeOwned,
{
    const VALUE_NAME: &'static str = "N";
    fn parse(text: &str) -> Result<T, String> {
        text.trim().parse().map_err(|_| format!("`{text}` is not a whole number"))
    }
    fn show(v: &T) -> Option<String> {
        Some(v.to_string())
    }
    fn toml(v: &T) -> Option<String> {
        Some(v.to_string())
    }
    fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        T::deserialize(d)
    }
}

/// A number with a fraction (a rate, a share).
pub struct Float;

impl Format<f64> for Float {
    const VALUE_NAME: &'static str = "NUMBER";
    fn parse(text: &str) -> Result<f64, String> {
        text.trim().parse().map_err(|_| format!("`{text}` is not a number"))
    }
    fn show(v: &f64) -> Option<String> {
        Some(v.to_string())
    }
    fn toml(v: &f64) -> Option<String> {
        // `{:?}` keeps the point (`0.0`), so the value reads back as a float.
        Some(format!("{v:?}"))
    }
    fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        f64::deserialize(d)
    }
}

/// `true` or `false`.
pub struct Bool;

impl Format<bool> for Bool {
    const VALUE_NAME: &'static str = "BOOL";
    fn parse(text: &str) -> Result<bool, String> {
        match text.trim() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(format!("`{other}` is not true or false")),
        }
    }
    fn show(v: &bool) -> Option<String> {
        Some(v.to_string())
    }
    fn toml(v: &bool) -> Option<String> {
        Some(v.to_string())
    }
    fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        bool::deserialize(d)
    }
    fn possible_values() -> Option<Vec<&'static str>> {
        Some(vec!["true", "false"])
    }
}

/// Free text (a filter, a URL, a range).
pub struct Text;

impl Format<String> for Text {
    const VALUE_NAME: &'static str = "TEXT";
    fn parse(text: &str) -> Result<String, String> {
        Ok(text.to_string())
    }
    fn show(v: &String) -> Option<String> {
        Some(v.clone())
    }
    fn toml(v: &String) -> Option<String> {
        Some(quoted(v))
    }
    fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        String::deserialize(d)
    }
}

/// A list of strings (TOML only).
pub struct Texts;

impl Format<Vec<String>> for Texts {
    const VALUE_NAME: &'static str = "TEXT";
    fn parse(text: &str) -> Result<Vec<String>, String> {
        Ok(text.split(',').map(str::to_string).collect())
    }
    fn show(v: &Vec<String>) -> Option<String> {
        Some(v.join(","))
    }
    fn toml(v: &Vec<String>) -> Option<String> {
        Some(toml::Value::Array(v.iter().cloned().map(toml::Value::String).collect()).to_string())
    }
    fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        Vec::deserialize(d)
    }
}

/// A file or directory.
pub struct Path;

impl Format<PathBuf> for Path {
    const VALUE_NAME: &'static str = "PATH";
    fn parse(text: &str) -> Result<PathBuf, String> {
        Ok(PathBuf::from(text))
    }
    fn show(v: &PathBuf) -> Option<String> {
        Some(v.display().to_string())
    }
    fn toml(v: &PathBuf) -> Option<String> {
        Some(quoted(&v.to_string_lossy()))
    }
    fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        PathBuf::deserialize(d)
    }
}

/// A value from a fixed list of names.
pub trait NamedValue: Sized + Copy + 'static {
    /// Every value, in the order `--help` lists them.
    fn all() -> &'static [Self];
    /// The name in `sluice.toml` and on the command line.
    fn name(self) -> &'static str;
}

macro_rules! named_value {
    ($($t:ty),*) => {$(
        impl NamedValue for $t {
            fn all() -> &'static [Self] {
                &<$t>::ALL
            }
            fn name(self) -> &'static str {
                <$t>::name(self)
            }
        }
    )*};
}
named_value!(
    EngineKind,
    SendStrategy,
    ThreadsMode,
    super::RtspOverload,
    super::LogFormat,
    sluice_engine::tls::KernelTls
);

/// One name of a [`NamedValue`]'s list.
pub struct Named;

fn parse_named<T: NamedValue>(text: &str) -> Result<T, String> {
    T::all().iter().copied().find(|v| v.name() == text.trim()).ok_or_else(|| {
        let names: Vec<&str> = T::all().iter().map(|v| v.name()).collect();
        format!("`{text}` is not one of {}", names.join(", "))
    })
}

impl<T: NamedValue> Format<T> for Named {
    const VALUE_NAME: &'static str = "NAME";
    fn parse(text: &str) -> Result<T, String> {
        parse_named(text)
    }
    fn show(v: &T) -> Option<String> {
        Some(v.name().to_string())
    }
    fn toml(v: &T) -> Option<String> {
        Some(quoted(v.name()))
    }
    fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        d.deserialize_str(TextVisitor { form: "a name in quotes (see sluice.toml)", parse: parse_named })
    }
    fn possible_values() -> Option<Vec<&'static str>> {
        Some(T::all().iter().map(|v| v.name()).collect())
    }
}

/// A value that may be unset, in format `F` when set.
pub struct Opt<F>(PhantomData<F>);

impl<T, F: Format<T>> Format<Option<T>> for Opt<F> {
    const VALUE_NAME: &'static str = F::VALUE_NAME;
    fn parse(text: &str) -> Result<Option<T>, String> {
        F::parse(text).map(Some)
    }
    fn show(v: &Option<T>) -> Option<String> {
        v.as_ref().and_then(F::show)
    }
    fn toml(v: &Option<T>) -> Option<String> {
        v.as_ref().and_then(F::toml)
    }
    fn toml_for_people(v: &Option<T>) -> Option<String> {
        v.as_ref().and_then(F::toml_for_people)
    }
    fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<T>, D::Error> {
        F::deserialize(d).map(Some)
    }
    fn possible_values() -> Option<Vec<&'static str>> {
        F::possible_values()
    }
}

/// Reads one key's value with format `F` (the section's deserializer hands each key to one).
pub(crate) struct Seed<F, T>(pub(crate) PhantomData<fn() -> (F, T)>);

impl<'de, F: Format<T>, T> DeserializeSeed<'de> for Seed<F, T> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        F::deserialize(d)
    }
}

/// Parses a listening address: `127.0.0.1:8080`, `[::]:8080`, `localhost:8080`, or a port alone
/// (`8080`), which keeps the default host 127.0.0.1 (serving beyond this machine is asked for by
/// naming an address, e.g. `0.0.0.0:8080`).
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let form = "an address such as 127.0.0.1:8080, localhost:8080, [::]:8080 or a port such as 8080";
    if !text.contains(':') {
        return Err(format!("`{text}` is not {form}"));
    }
    let addrs: Vec<SocketAddr> =
        text.to_socket_addrs().map_err(|e| format!("`{text}`: {e} (expected {form})"))?.collect();
    // IPv4 first: `localhost` means 127.0.0.1 to most clients a user will try.
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("`{text}` resolves to no address"))
}

/// Reads a key of a section, refusing one not in `0` while reading it, so that the error points
/// at the key's line.
pub(crate) struct Key(pub(crate) &'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Key {
    type Value = &'static str;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<&'static str, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl serde::de::Visitor<'_> for Key {
    type Value = &'static str;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<&'static str, E> {
        self.0.iter().find(|k| **k == v).copied().ok_or_else(|| E::unknown_field(v, self.0))
    }
}
