//! The configuration's reading, checking and rendering, and the repository's `sluice.toml`
//! against the table.

use std::net::SocketAddr;
use std::time::Duration;

use sluice_engine::EngineKind;

use super::*;

#[test]
fn example_file_parses_and_matches_defaults() {
    let text = include_str!("../../../../sluice.toml");
    let config: Config = toml::from_str(text).expect("sluice.toml parses");
    config.validate().unwrap();
    assert_eq!(config.http.listen, Config::default().http.listen);
    assert_eq!(config.limits.header_timeout, Duration::from_secs(10));
    assert_eq!(config.engine.kind, EngineKind::Epoll);
    let d = RtspSection::default();
    assert_eq!((config.rtsp.enabled, config.rtsp.listen), (d.enabled, d.listen));
    let a = AdminSection::default();
    assert_eq!((config.admin.enabled, config.admin.listen), (a.enabled, a.listen));
    assert_eq!(config.http.bench, HttpSection::default().bench);
    assert_eq!((config.rtsp.session_timeout, config.rtsp.max_payload), (d.session_timeout, d.max_payload));
}

#[test]
fn listen_addresses_take_a_port_a_name_or_an_address() {
    assert_eq!(parse_listen("8080"), Ok(SocketAddr::from(([127, 0, 0, 1], 8080))));
    assert_eq!(parse_listen("localhost:8081"), Ok(SocketAddr::from(([127, 0, 0, 1], 8081))));
    assert_eq!(parse_listen("0.0.0.0:80"), Ok(SocketAddr::from(([0, 0, 0, 0], 80))));
    assert!(parse_listen("[::1]:80").unwrap().is_ipv6());
    for bad in ["", "nowhere", "localhost", "70000", "1.2.3.4:x"] {
        assert!(parse_listen(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_value_of_the_wrong_type_names_the_expected_form() {
    let (line, column, message) = Config::from_text("[limits]\nheader_timeout = 10\n").unwrap_err();
    assert_eq!((line, column), (2, 18));
    assert!(message.contains("\"10s\"") && !message.contains('\n'), "{message}");
    let (_, _, message) = Config::from_text("[http]\nlisten = 8080\n").unwrap_err();
    assert!(message.contains("\"127.0.0.1:8080\""), "{message}");
    let c = Config::from_text("[http]\nlisten = \"9000\"\n[limits]\nsend_timeout = \"1.5s\"\n").unwrap();
    assert_eq!(c.http.listen.port(), 9000);
    assert_eq!(c.limits.send_timeout, Duration::from_millis(1500));
}

#[test]
fn sizes_are_an_integer_or_a_size_string() {
    let c = Config::from_text(
        "[store]\ncache_size = \"64MiB\"\n[uploads]\nmax_size = 1000\n[limits]\nmax_head = \"16K\"\n",
    )
    .unwrap();
    assert_eq!((c.store.cache_size, c.uploads.max_size, c.limits.max_head), (64 << 20, 1000, 16 << 10));
    let (line, _, message) = Config::from_text("[uploads]\nmax_size = \"1.5XB\"\n").unwrap_err();
    assert_eq!(line, 2);
    assert!(message.contains("1.5XB") && message.contains("KiB"), "{message}");
    assert!(Config::from_text("[uploads]\nmax_size = -1\n").is_err());
    assert!(Config::from_text("[rtsp]\nmax_payload = \"1T\"\n").is_ok_and(|c| c.validate().is_err()));
}

#[test]
fn effective_settings_read_back_as_the_same_configuration() {
    let c = Config::default();
    let back = Config::from_text(&c.effective_toml()).unwrap();
    assert_eq!(back.engine.send, Some(c.engine_config().send));
    assert_eq!(back.limits.header_timeout, c.limits.header_timeout);
    assert_eq!(back.admin.listen, c.admin.listen);
}

#[test]
fn an_s3_library_runs_and_reports_its_own_cpu_workers() {
    // What `--check` prints is what the server runs: 16 pool threads for an s3:// library
    // unless set, one per core for a local one.
    let edge = Config::from_text("[store]\nlocation = \"s3://media/library\"\n").unwrap();
    assert_eq!(edge.engine_config().cpu_workers, REMOTE_CPU_WORKERS);
    assert!(edge.effective_toml().contains("\ncpu_workers = 16\n"), "{}", edge.effective_toml());
    let set =
        Config::from_text("[store]\nlocation = \"s3://media/library\"\n[engine]\ncpu_workers = 3\n").unwrap();
    assert_eq!(set.engine_config().cpu_workers, 3);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(Config::default().engine_config().cpu_workers, cores);
}

#[test]
fn check_prints_each_access_key_only_where_its_mode_reads_it_and_sizes_as_the_file_does() {
    let c = Config::from_text(
        "[store]\ncache_size = \"1GiB\"\n[[access]]\nprefix = \"/s/\"\nmode = \"signed\"\nkey_file = \"k\"\n\
         [[access]]\nprefix = \"/j/\"\nmode = \"jwt\"\njwks = \"j.json\"\n",
    )
    .unwrap();
    let text = c.effective_toml();
    assert!(text.contains("\ncache_size = \"1GiB\"\n"), "{text}");
    let (signed, jwt) = text.split_once("prefix = \"/j/\"").unwrap();
    let signed = &signed[signed.find("prefix = \"/s/\"").unwrap()..];
    assert!(!signed.contains("claim"), "no claim on a signed policy: {signed}");
    assert!(jwt.contains("claim = \"paths\""), "the claim a jwt policy reads: {jwt}");
    assert_eq!(Config::from_text(&text).unwrap().access, {
        let mut access = c.access.clone();
        access[1].claim = Some("paths".into());
        access
    });
}

#[test]
fn rtsp_loops_are_set_or_follow_the_cores() {
    let c: Config = toml::from_str("[rtsp]\nloops = 3").unwrap();
    c.validate().unwrap();
    assert_eq!(c.rtsp_loops(), 3);
    let c = Config::default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let expected = if cores <= 2 { 1 } else { c.engine_config().workers.min(32) };
    assert_eq!(c.rtsp_loops(), expected);
}

#[test]
fn unknown_keys_and_bad_values_are_errors() {
    assert!(toml::from_str::<Config>("[http]\nlisten_on = \"x\"").is_err());
    assert!(toml::from_str::<Config>("[engine]\nkind = \"kqueue\"").is_err());
    assert!(toml::from_str::<Config>("[limits]\nheader_timeout = \"soon\"").is_err());
    let c: Config = toml::from_str("[engine]\nworkers = 0").unwrap();
    assert!(c.validate().is_err());
    for bad in
        ["session_timeout = \"0s\"", "max_payload = 100", "max_payload = 70000", "loops = 0", "loops = 33"]
    {
        let c: Config = toml::from_str(&format!("[rtsp]\n{bad}")).unwrap();
        assert!(c.validate().is_err(), "{bad}");
    }
}

#[test]
fn the_repository_sluice_toml_is_the_one_the_table_writes() {
    let checked_in = include_str!("../../../../sluice.toml");
    let generated = render::example();
    if checked_in != generated {
        let line = checked_in.lines().zip(generated.lines()).position(|(a, b)| a != b);
        panic!(
            "sluice.toml differs from the settings table (first at line {}): run \
             `cargo run -p sluice -- serve --print-config > sluice.toml`",
            line.map_or(checked_in.lines().count().min(generated.lines().count()), |l| l) + 1
        );
    }
}

#[test]
fn every_unset_setting_has_an_example_and_every_flag_is_unique() {
    let defaults = Config::default();
    let mut flags = std::collections::BTreeSet::new();
    for s in SETTINGS {
        if (s.toml)(&defaults).is_none() {
            assert!(s.extra.example.is_some(), "{} has no example for sluice.toml", s.name());
        }
        for flag in s.flag.into_iter().chain(s.extra.off.map(|(f, _)| f)) {
            assert!(flags.insert(flag), "--{flag} twice");
        }
        assert!(!s.doc.is_empty(), "{} has no comment", s.name());
    }
}

#[test]
fn range_errors_name_the_key_and_the_flag() {
    let c = Config::from_text("[rtsp]\nloops = 40\n").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("rtsp.loops (--rtsp-loops) must be between 1 and 32"), "{e}");
    let c = Config::from_text("[limits]\nmax_pipelined = 0\n").unwrap();
    assert!(c.validate().unwrap_err().to_string().contains("limits.max_pipelined must be at least 1"));
}

#[test]
fn a_flag_sets_what_the_key_sets() {
    let mut c = Config::default();
    for (flag, text) in [("rtsp-loops", "3"), ("cache-size", "64MiB"), ("rtsp-overload", "refuse")] {
        let s = SETTINGS.iter().find(|s| s.flag == Some(flag)).unwrap();
        (s.set)(&mut c, text).unwrap();
    }
    let from_file =
        Config::from_text("[rtsp]\nloops = 3\noverload = \"refuse\"\n[store]\ncache_size = \"64MiB\"\n")
            .unwrap();
    assert_eq!(render::effective(&c), render::effective(&from_file));
    let bad = SETTINGS.iter().find(|s| s.flag == Some("rtsp-overload")).unwrap();
    assert!((bad.parse)("sometimes").unwrap_err().contains("refuse, degrade"));
}

#[test]
fn any_cut_of_the_file_reads_or_says_where_it_is_wrong() {
    let text = render::example();
    // Cut within keys, values, comments and headers alike (every 7th byte keeps it quick).
    for cut in (0..text.len()).step_by(7).filter(|i| text.is_char_boundary(*i)) {
        match Config::from_text(&text[..cut]) {
            Ok(c) => drop(c.validate()),
            Err((line, column, message)) => {
                assert!(line >= 1 && column >= 1 && !message.contains('\n'), "cut at {cut}: {message}")
            }
        }
    }
}

/// `[[protect]]` entries read with their fields and come back in `serve --check`'s text; an
/// unknown scheme is refused where it is written.
#[test]
fn protect_entries_read_and_render() {
    let text = "[[protect]]\nprefix = \"/premium/\"\nscheme = \"aes-128\"\nmaster_key_file = \"/k\"\n\
                pssh = [\"edef8ba9-79d6-4ace-a3c8-27dcd51d21ed:AAAA\"]\n";
    let config = Config::from_text(text).unwrap();
    assert_eq!(config.protect.len(), 1);
    assert_eq!(config.protect[0].scheme, crate::protect::ProtectScheme::Aes128);
    let effective = render::effective(&config);
    assert!(effective.contains("[[protect]]\nprefix = \"/premium/\"\nscheme = \"aes-128\""), "{effective}");
    let (line, _, message) =
        Config::from_text("[[protect]]\nprefix = \"/a/\"\nscheme = \"rot13\"\n").unwrap_err();
    assert_eq!(line, 3, "{message}");
}

#[test]
fn hsts_takes_what_browsers_read_and_refuses_the_rest() {
    for good in
        ["max-age=31536000", "max-age=31536000; includeSubDomains", "Max-Age=\"0\";preload;INCLUDESUBDOMAINS"]
    {
        assert_eq!(strict_transport_security(good), Ok(()), "{good}");
    }
    for (bad, why) in [
        ("includeSubDomains", "max-age=SECONDS is required"),
        ("max-age=1y", "max-age takes a number of seconds"),
        ("max-age=", "max-age takes a number of seconds"),
        ("max-age=60; includeSubdomain", "unknown directive `includeSubdomain`"),
        ("max-age=60; max-age=70", "`max-age` is given twice"),
        ("max-age=60; preload=yes", "takes no value"),
    ] {
        let error = strict_transport_security(bad).unwrap_err();
        assert!(error.contains(why), "{bad}: {error}");
    }
    let config: Config = toml::from_str("[tls]\nhsts = \"max-age=60; includeSubDomain\"").unwrap();
    let error = config.validate().unwrap_err().to_string();
    assert!(error.contains("hsts") && error.contains("includeSubDomain"), "{error}");
}

#[test]
fn an_s3_library_records_through_a_spool_named_for_its_location_unless_set() {
    let text = "[store]\nlocation = \"s3://media/lib/\"\n\n[[record]]\nprefix = \"/live/\"\nfile_duration = \"1m\"\n";
    let config: Config = toml::from_str(text).unwrap();
    config.validate().expect("an s3:// library records");
    assert_eq!(config.store.record_spool_dir(), std::env::temp_dir().join("sluice-spool-media-lib"));
    let set = "[store]\nlocation = \"s3://media/lib\"\nrecord_spool = \"/var/lib/sluice/spool\"\n";
    let config: Config = toml::from_str(set).unwrap();
    assert_eq!(config.store.record_spool_dir(), std::path::PathBuf::from("/var/lib/sluice/spool"));
}
