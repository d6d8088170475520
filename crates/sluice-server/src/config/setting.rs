//! The machinery of the settings table: the [`settings!`] macro and the [`Setting`] record it
//! writes for each entry.
//!
//! Owns how one table entry becomes a section struct's field with its default, the key its
//! section reads from `sluice.toml` (unknown keys refused, errors at the value's line), and a
//! [`Setting`] that the command line (`--help`, flags), `serve --check` and the generated
//! `sluice.toml` read. It does not hold the entries (see [`super::table`]) nor know clap (the
//! binary builds its flags from [`super::SETTINGS`]).
//!
//! A declarative macro rather than a derive: a derive needs a proc-macro crate of its own, and
//! the table is one list in one file, which `macro_rules!` reads as well; the formats
//! ([`super::format`]) carry the per-type work, so the macro only copies tokens into place.

use crate::config::Config;

/// One setting of `sluice serve`: where it lives in `sluice.toml`, its flag, and functions that
/// read and write it on a [`Config`].
pub struct Setting {
    /// The `sluice.toml` section (`rtsp`).
    pub section: &'static str,
    /// The key in that section (`loops`).
    pub key: &'static str,
    /// What it does, one line a string (the `sluice.toml` comment).
    pub doc: &'static [&'static str],
    /// The long flag without dashes (`rtsp-loops`), if there is one.
    pub flag: Option<&'static str>,
    /// The flag's `--help` text (without the default, which is added from the table).
    pub help: &'static str,
    /// The flag's value placeholder of the value's format.
    pub value_name: &'static str,
    /// The entry's options.
    pub extra: Extra,
    /// Every accepted value, for a value from a fixed list.
    pub possible_values: fn() -> Option<Vec<&'static str>>,
    /// Checks a flag's text.
    pub parse: fn(&str) -> Result<(), String>,
    /// Sets the value from a flag's text.
    pub set: fn(&mut Config, &str) -> Result<(), String>,
    /// The value as a flag would take it; `None` when unset.
    pub show: fn(&Config) -> Option<String>,
    /// The value as an exact TOML literal; `None` when unset.
    pub toml: fn(&Config) -> Option<String>,
    /// The value as a TOML literal for people; `None` when unset.
    pub toml_for_people: fn(&Config) -> Option<String>,
    /// The entry's own check of the value (a range), without naming it.
    pub check: fn(&Config) -> Result<(), String>,
}

impl Setting {
    /// `section.key`.
    pub fn name(&self) -> String {
        format!("{}.{}", self.section, self.key)
    }

    /// `section.key (--flag)`, the way error messages name a setting.
    pub fn named(&self) -> String {
        match self.flag {
            Some(flag) => format!("{}.{} (--{flag})", self.section, self.key),
            None => self.name(),
        }
    }

    /// The flag's placeholder.
    pub fn value_name(&self) -> &'static str {
        self.extra.value_name.unwrap_or(self.value_name)
    }

    /// The default `--help` shows: what unset means (and what that comes to here), else the
    /// default value; `None` for a switch.
    pub fn help_default(&self, defaults: &Config) -> Option<String> {
        if self.extra.switch {
            return None;
        }
        match (self.extra.unset, (self.show)(defaults)) {
            (_, Some(value)) => Some(value),
            (Some(unset), None) => Some(match self.extra.here {
                Some(here) => format!("{unset}; here {}", here(defaults)),
                None => unset.to_string(),
            }),
            (None, None) => None,
        }
    }
}

/// An entry's options, each with a neutral default ([`Extra::NONE`]), so an entry names only
/// the ones it needs.
#[derive(Clone, Copy)]
pub struct Extra {
    /// The flag takes no value and sets the setting to `true` (`--bench`).
    pub switch: bool,
    /// A flag (name, help) that sets the setting to `false` (`--no-rtsp`).
    pub off: Option<(&'static str, &'static str)>,
    /// Flags this one cannot be given with.
    pub conflicts: &'static [&'static str],
    /// Flags this one must be given with.
    pub requires: &'static [&'static str],
    /// What giving the flag also does (`--rtsp-listen` turns RTSP on).
    pub then: Option<fn(&mut Config)>,
    /// The flag's placeholder, when the format's (`N`, `PATH`) says too little.
    pub value_name: Option<&'static str>,
    /// What the setting being unset means (`one per core`): `--help`'s default and a line of
    /// `sluice.toml`.
    pub unset: Option<&'static str>,
    /// What an unset setting comes to on this machine, for `--help`.
    pub here: Option<fn(&Config) -> String>,
    /// An example value (a TOML literal) for `sluice.toml`, shown commented out while unset.
    pub example: Option<&'static str>,
    /// Never printed by `serve --check` (passwords, tokens).
    pub secret: bool,
}

impl Extra {
    /// No options.
    pub const NONE: Extra = Extra {
        switch: false,
        off: None,
        conflicts: &[],
        requires: &[],
        then: None,
        value_name: None,
        unset: None,
        here: None,
        example: None,
        secret: false,
    };
}

/// `Some(x)` from one argument, `None` from none.
macro_rules! optional {
    () => {
        None
    };
    ($x:expr) => {
        Some($x)
    };
}
pub(crate) use optional;

/// A long flag as the table writes it (`"--listen"`, so that searching for the flag finds its
/// entry) without its dashes, as clap and [`Setting::flag`] name it. Evaluated at compile time:
/// an entry without the dashes does not build.
pub const fn long_flag(written: &'static str) -> &'static str {
    match written.as_bytes() {
        [b'-', b'-', name @ ..] => match std::str::from_utf8(name) {
            Ok(name) => name,
            Err(_) => panic!("a flag is ASCII"),
        },
        _ => panic!("a flag is written with its dashes: \"--name\""),
    }
}

/// Defines the section structs (fields, defaults, `sluice.toml` reading) and [`SETTINGS`],
/// the record of every setting, from one table. Each entry reads:
///
/// ```text
/// /// What it does (the sluice.toml comment and the field's documentation).
/// key: Type = default; Format
///     , flag "--flag-name" "--help text"       (optional)
///     , check |v| range_check(v)               (optional, Result<(), String>)
///     , { extra: value, ... }                  (optional, fields of Extra)
///     ;
/// ```
///
/// [`SETTINGS`]: super::SETTINGS
macro_rules! settings {
    (
        $(
            $(#[doc = $sdoc:literal])*
            [$section:ident] $Section:ident {
                $(
                    $(#[doc = $doc:literal])*
                    $field:ident : $ty:ty = $default:expr ; $fmt:ty
                    $(, flag $flag:literal $help:literal)?
                    $(, check |$v:ident| $check:expr)?
                    $(, { $($extra:ident : $xval:expr),* $(,)? })?
                    ;
                )*
            }
        )*
    ) => {
        $(
            $(#[doc = $sdoc])*
            #[derive(Debug, Clone, PartialEq)]
            pub struct $Section {
                $( $(#[doc = $doc])* pub $field: $ty, )*
            }

            impl Default for $Section {
                fn default() -> Self {
                    $Section { $($field: $default,)* }
                }
            }

            impl<'de> serde::Deserialize<'de> for $Section {
                fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    const FIELDS: &[&str] = &[$(stringify!($field)),*];
                    struct Keys;
                    impl<'de> serde::de::Visitor<'de> for Keys {
                        type Value = $Section;
                        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                            f.write_str(concat!("the [", stringify!($section), "] table"))
                        }
                        fn visit_map<A: serde::de::MapAccess<'de>>(
                            self,
                            mut map: A,
                        ) -> Result<$Section, A::Error> {
                            let mut s = $Section::default();
                            while let Some(key) = map.next_key_seed($crate::config::format::Key(FIELDS))? {
                                match key {
                                    $(stringify!($field) => {
                                        s.$field = map.next_value_seed(
                                            $crate::config::format::Seed::<$fmt, $ty>(std::marker::PhantomData),
                                        )?
                                    })*
                                    // `Key` let only the section's keys through.
                                    _ => {}
                                }
                            }
                            Ok(s)
                        }
                    }
                    d.deserialize_struct(stringify!($Section), FIELDS, Keys)
                }
            }
        )*

        /// Every setting of `sluice serve`, in `sluice.toml`'s order.
        pub static SETTINGS: &[$crate::config::setting::Setting] = &[$($(
            $crate::config::setting::Setting {
                section: stringify!($section),
                key: stringify!($field),
                doc: &[$($doc),*],
                flag: $crate::config::setting::optional!($($crate::config::setting::long_flag($flag))?),
                help: concat!($($help)?),
                value_name: <$fmt as $crate::config::format::Format<$ty>>::VALUE_NAME,
                extra: $crate::config::setting::Extra {
                    $($($extra: $xval,)*)?
                    ..$crate::config::setting::Extra::NONE
                },
                possible_values: <$fmt as $crate::config::format::Format<$ty>>::possible_values,
                parse: |t| <$fmt as $crate::config::format::Format<$ty>>::parse(t).map(drop),
                set: |c, t| {
                    c.$section.$field = <$fmt as $crate::config::format::Format<$ty>>::parse(t)?;
                    Ok(())
                },
                show: |c| <$fmt as $crate::config::format::Format<$ty>>::show(&c.$section.$field),
                toml: |c| <$fmt as $crate::config::format::Format<$ty>>::toml(&c.$section.$field),
                toml_for_people: |c| {
                    <$fmt as $crate::config::format::Format<$ty>>::toml_for_people(&c.$section.$field)
                },
                check: |c| {
                    let _ = c;
                    $({
                        let $v = &c.$section.$field;
                        $check?;
                    })?
                    Ok(())
                },
            },
        )*)*];

        /// Every section of `sluice.toml` with what it is for, in order.
        pub static SECTIONS: &[(&str, &[&str])] = &[$((stringify!($section), &[$($sdoc),*]),)*];
    };
}
pub(crate) use settings;

/// `v` is at least `min`.
pub fn at_least<T: PartialOrd + std::fmt::Display>(v: &T, min: T) -> Result<(), String> {
    if *v < min {
        return Err(format!("must be at least {min}"));
    }
    Ok(())
}

/// `v` is between `min` and `max`, both included.
pub fn between<T: PartialOrd + std::fmt::Display>(v: &T, min: T, max: T) -> Result<(), String> {
    if *v < min || *v > max {
        return Err(format!("must be between {min} and {max}"));
    }
    Ok(())
}

/// `d` is longer than zero.
pub fn longer_than_zero(d: &std::time::Duration) -> Result<(), String> {
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(())
}

/// A URL path prefix of live paths: from the root, at least one name, no trailing `/`.
pub fn live_prefix(v: &str) -> Result<(), String> {
    let names = v.strip_prefix('/').filter(|rest| !rest.is_empty() && !rest.ends_with('/'));
    match names {
        Some(rest) if !rest.split('/').any(|n| n.is_empty() || n == "." || n == "..") => Ok(()),
        _ => Err("must be a path such as /live (from the root, no trailing /)".into()),
    }
}

/// `v`, when set, passes `check`.
pub fn when_set<T>(v: &Option<T>, check: impl Fn(&T) -> Result<(), String>) -> Result<(), String> {
    v.as_ref().map_or(Ok(()), check)
}
