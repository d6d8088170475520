//! `sluice serve`'s setting flags, built from the server's settings table: one flag per setting
//! that has one, with the table's `--help` text and default, checked as the table's format reads
//! it, and applied over the configuration file (a flag beats the file, which beats the default).
//!
//! Owns turning [`SETTINGS`] into clap arguments and the given ones back into settings. It does
//! not own any setting (see `sluice_server::config::table`) nor the flags that are not settings
//! (`--config`, `--check`, `--connect`, `--print-config`, in `main.rs`).

use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, ArgMatches};
use sluice_server::config::{Config, ConfigError, SETTINGS};

/// `serve` with a flag for every setting that has one.
pub fn with_setting_flags(mut serve: clap::Command) -> clap::Command {
    let defaults = Config::default();
    for s in SETTINGS {
        if let Some(flag) = s.flag {
            // Without its final period, as clap writes a one-line doc comment.
            let text = s.help.strip_suffix('.').unwrap_or(s.help);
            let help = match s.help_default(&defaults) {
                Some(default) => format!("{text} [default: {default}]"),
                None => text.to_string(),
            };
            let mut arg = Arg::new(flag).long(flag).help(help).conflicts_with_all(s.extra.conflicts);
            for required in s.extra.requires {
                arg = arg.requires(*required);
            }
            arg = if s.extra.switch {
                arg.action(ArgAction::SetTrue)
            } else if let Some(names) = (s.possible_values)() {
                arg.value_name(s.value_name()).value_parser(PossibleValuesParser::new(names))
            } else {
                let parse = s.parse;
                arg.value_name(s.value_name())
                    .value_parser(move |text: &str| parse(text).map(|()| text.to_string()))
            };
            if let (true, Some((off, _))) = (s.extra.switch, s.extra.off) {
                arg = arg.conflicts_with(off);
            }
            serve = serve.arg(arg);
        }
        if let Some((off, help)) = s.extra.off {
            let help = help.strip_suffix('.').unwrap_or(help);
            serve = serve.arg(Arg::new(off).long(off).help(help).action(ArgAction::SetTrue));
        }
    }
    serve
}

/// Whether `--engine uring` was given: asked for on the command line, uring is a demand (no
/// fallback to epoll).
pub fn uring_demanded(matches: &ArgMatches) -> bool {
    matches.get_one::<String>("engine").is_some_and(|e| e == "uring")
}

/// Applies every setting flag given on top of `c`.
pub fn apply(matches: &ArgMatches, c: &mut Config) -> Result<(), ConfigError> {
    for s in SETTINGS {
        let bad = |why: String| ConfigError::Invalid(format!("{} {why}", s.named()));
        if let Some(flag) = s.flag {
            let given = if s.extra.switch {
                matches.get_flag(flag).then_some("true")
            } else {
                matches.get_one::<String>(flag).map(String::as_str)
            };
            if let Some(text) = given {
                (s.set)(c, text).map_err(bad)?;
                if let Some(then) = s.extra.then {
                    then(c);
                }
            }
        }
        if let Some((off, _)) = s.extra.off {
            if matches.get_flag(off) {
                (s.set)(c, "false").map_err(bad)?;
            }
        }
    }
    Ok(())
}
