//! THE table of `sluice serve`'s settings: each entry is one setting's field, type, default,
//! `sluice.toml` key and comment, flag and `--help` text, and its own range check.
//!
//! Owns nothing but the entries; [`super::setting`] turns them into the section structs and
//! [`super::SETTINGS`]. Adding a setting is one entry here plus its use. Rules between settings
//! (a head at least as long as its request line) live in [`super::Config::validate`], derived
//! values (RTSP loops, the engine's) in [`super::Config`]. A default that depends on the machine
//! (one per core) is an unset `Option` whose entry says what unset means (`unset`, and `here` for
//! this machine's value in `--help`): the checked-in `sluice.toml` must read the same everywhere.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use sluice_engine::tls::KernelTls;
use sluice_engine::{EngineConfig, EngineKind, SendStrategy, ThreadsMode};
use sluice_proto::http::Limits;

use super::format::{Bool, Count, Dur, Float, Listen, Named, Opt, Path, Size, Text, Texts};
use super::setting::{at_least, between, live_prefix, long_flag, longer_than_zero, settings, when_set};
use super::{Config, LogFormat, RtspOverload};

settings! {
    /// `[http]`: where and how HTTP is served.
    [http] HttpSection {
        /// Address and port for HTTP. Use "0.0.0.0:8080" or "[::]:8080" to serve beyond this
        /// machine. A port held by another process is a start-up error (exit 2), never shared.
        listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 8080)); Listen,
            flag "--listen" "HTTP address: 127.0.0.1:8080, localhost:8080, 0.0.0.0:8080 (every \
                interface), or a port alone (on 127.0.0.1); port 0 picks a free port.";
        /// One log line per response when it ends (peer, request, status, bytes sent, duration,
        /// user agent, complete or cut short), and one per RTSP request (method, URL, status,
        /// session, transport). Turn off for benchmarks.
        access_log: bool = true; Bool,
            flag "--access-log" "Log a line per HTTP response when it ends (bytes sent, duration, \
                whether it was cut short) and per RTSP request (method, URL, status, session, \
                transport).";
        /// Serve the benchmark endpoints under /bench/ (hello, json, cpu, cpu-heavy, latency,
        /// mixed, health) on the media port. Off by default, so that a library folder named
        /// bench/ is served.
        bench: bool = false; Bool,
            flag "--bench" "Serve the benchmark endpoints under /bench/ (hello, json, cpu, latency, \
                ...) on the media port; off by default, so that a library folder named bench/ is \
                served.",
            { switch: true, off: Some((long_flag("--no-bench"), "Do not serve the benchmark endpoints (the \
                default; overrides `bench = true` in the file).")) };
    }

    /// `[admin]`: the operational endpoints' own listener.
    [admin] AdminSection {
        /// /metrics (Prometheus), /healthz, /readyz and /streams (the library as JSON), on their
        /// own listener.
        enabled: bool = true; Bool,
            { off: Some((long_flag("--no-admin"), "Do not serve the admin endpoints.")) };
        /// Loopback by default: metrics are not for the public.
        listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 9090)); Listen,
            flag "--admin-listen" "Address of the admin listener (/metrics, /healthz, /readyz, \
                /streams), as --listen.",
            { conflicts: &["no-admin"], then: Some(|c| c.admin.enabled = true) };
    }

    /// `[rtsp]`: where and how RTSP/RTP is served.
    [rtsp] RtspSection {
        /// Stream every MP4 of the library over RTSP/RTP.
        enabled: bool = true; Bool,
            { off: Some((long_flag("--no-rtsp"), "Do not serve RTSP.")) };
        /// The RTSP control address; RTP and RTCP leave from a free even/odd UDP port pair (one
        /// per loop) on the same address.
        listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 8554)); Listen,
            flag "--rtsp-listen" "RTSP address, as --listen; every MP4 of the library is at \
                rtsp://ADDR/<path>.",
            { conflicts: &["no-rtsp"], then: Some(|c| c.rtsp.enabled = true) };
        /// A session with no request or RTCP report for this long is released.
        session_timeout: Duration = Duration::from_secs(60); Dur,
            flag "--rtsp-session-timeout" "An RTSP session with no request or RTCP report for this \
                long is released.",
            check |v| longer_than_zero(v);
        /// Largest RTP payload in bytes (1400 leaves room for tunnels on a 1500-byte path MTU).
        max_payload: usize = 1400; Size,
            check |v| between(v, 200, 65_000);
        /// Viewers served at once at most; one more is answered 453 Not Enough Bandwidth.
        max_viewers: usize = 10_000; Count,
            flag "--rtsp-max-viewers" "RTSP viewers served at once at most; one more is answered 453 \
                Not Enough Bandwidth.",
            check |v| at_least(v, 1);
        /// When one more viewer would take more than the RTSP loop has left: "refuse" (453, the
        /// viewers playing stay perfect) or "degrade" (admit; late viewers drop frames up to the
        /// next keyframe).
        overload: RtspOverload = RtspOverload::Degrade; Named,
            flag "--rtsp-overload" "When the RTSP loop's headroom runs out: refuse newcomers with 453 \
                (the viewers playing stay perfect), or degrade (admit them; late viewers drop \
                frames up to the next keyframe).",
            { value_name: Some("POLICY") };
        /// RTSP loops (threads), each with its own RTP/RTCP UDP port pair; clients are spread
        /// over them by address, so one client's connections, sessions and RTCP meet on one loop.
        loops: Option<usize> = None; Opt<Count>,
            flag "--rtsp-loops" "RTSP loops (threads), each with its own RTP/RTCP UDP ports; clients \
                are spread over them by their address, so one client's connections, sessions and \
                RTCP meet on one loop.",
            check |v| when_set(v, |n| between(n, 1, sluice_engine::rtsp::MAX_RTSP_LOOPS)),
            { unset: Some(Config::RTSP_LOOPS_RULE), here: Some(|c| c.rtsp_loops().to_string()),
              example: Some("4") };
        /// UDP ports RTP and RTCP may use, for firewalls: each loop takes an even port and the
        /// next odd one from the range (it must hold a pair per loop).
        rtp_ports: Option<String> = None; Opt<Text>,
            flag "--rtsp-rtp-ports" "UDP ports RTP and RTCP may use, for firewalls (e.g. \
                30000-30100): each RTSP loop takes an even port and the next odd one from the \
                range.",
            { value_name: Some("FIRST-LAST"), unset: Some("any free pair"), example: Some("\"30000-30100\"") };
        /// The URL path under which publishers `ANNOUNCE` live streams (`rtsp://ADDR/live/NAME`)
        /// and viewers play them; publishing needs an `[[access]]` policy with `publish = true`.
        live_prefix: String = "/live".into(); Text,
            check |v| live_prefix(v);
        /// A publisher that sends nothing for this long is dropped, and its viewers get the end of
        /// the stream.
        publish_stall: Duration = Duration::from_secs(10); Dur,
            check |v| longer_than_zero(v);
        /// A publisher of a live path that has one takes it over (the first is cut off and its
        /// viewers get the end of its stream); otherwise the second is refused with 409.
        publish_takeover: bool = false; Bool;
    }

    /// `[rtmp]`: publishers over RTMP (OBS, ffmpeg, encoders) into the RTSP live paths.
    [rtmp] RtmpSection {
        /// Address and port for RTMP publishers: `rtmp://ADDR/live/NAME` publishes the live path
        /// `/live/NAME` (under rtsp.live_prefix; a token as `NAME?token=…`), authorised as an
        /// RTSP publisher is. Needs RTSP on. Off unless set.
        listen: Option<SocketAddr> = None; Opt<Listen>,
            flag "--rtmp-listen" "Take RTMP publishers on this address (as --listen; 1935 is RTMP's \
                port): rtmp://ADDR/live/NAME publishes the live path /live/NAME.",
            { unset: Some("no RTMP"), example: Some("\"127.0.0.1:1935\"") };
    }

    /// `[library]`: what is served.
    [library] LibrarySection {
        /// The directory to serve.
        root: Option<PathBuf> = None; Opt<Path>,
            flag "--root" "Directory to serve.",
            { value_name: Some("DIR"), unset: Some("the built-in demo library"),
              example: Some("\"/srv/media\"") };
        /// Most byte ranges honoured in one request; a request with more gets the whole file
        /// (200). 0 turns range support off.
        max_ranges: usize = 64; Count,
            flag "--max-ranges" "Most byte ranges honoured per request (0 turns ranges off).";
        /// Target duration of an HLS segment (GET /FILE.mp4/master.m3u8): segments are cut at
        /// the first keyframe at least this long after the segment's start.
        hls_segment: Duration = Duration::from_secs(6); Dur,
            flag "--hls-segment" "Target duration of an HLS segment (`/FILE.mp4/master.m3u8`): cut \
                at the first keyframe at least this long after the segment's start.";
        /// Time between scrubbing thumbnails (`FILE.mp4/thumbs/…`: an HLS image playlist, a
        /// WebVTT thumbnails track, a DASH image set): each shows the last keyframe at or before
        /// its time.
        thumbnail_interval: Duration = Duration::from_secs(10); Dur,
            flag "--thumbnail-interval" "Time between scrubbing thumbnails (each shows the last \
                keyframe at or before its time).",
            check |v| longer_than_zero(v);
        /// A thumbnail's width in pixels; its height keeps the video's shape.
        thumbnail_width: usize = 160; Count,
            flag "--thumbnail-width" "A thumbnail's width in pixels (the height keeps the video's \
                shape).",
            check |v| between(v, 16, 1920);
        /// Thumbnails across one tile (one JPEG holds columns × rows of them).
        thumbnail_columns: usize = 5; Count,
            check |v| between(v, 1, 20);
        /// Thumbnails down one tile.
        thumbnail_rows: usize = 5; Count,
            check |v| between(v, 1, 20);
        /// The ffmpeg that decodes keyframes into thumbnail tiles: a name looked up on PATH, or a
        /// path. Without it thumbnails are refused (503 with the reason) and `serve --check`
        /// says so; everything else is served.
        ffmpeg: String = "ffmpeg".into(); Text,
            flag "--ffmpeg" "The ffmpeg that makes thumbnail tiles (a name on PATH, or a path); \
                without it thumbnails are refused with 503.",
            { value_name: Some("PROGRAM") };
        /// Thumbnail tiles being made at once at most (an ffmpeg each); more requests wait.
        thumbnail_jobs: usize = 2; Count,
            flag "--thumbnail-jobs" "Thumbnail tiles made at once at most (an ffmpeg each); more \
                requests wait.",
            check |v| between(v, 1, 64);
        /// Longest an ffmpeg making one tile may run; it is then stopped and the tile refused.
        thumbnail_timeout: Duration = Duration::from_secs(30); Dur,
            check |v| longer_than_zero(v);
        /// Most bytes of encrypted segments (`[[protect]]` titles) kept in memory for their next
        /// viewers, least recently used going first; 0 keeps none (every request is read and
        /// encrypted anew).
        segment_cache: u64 = 64 << 20; Size,
            flag "--segment-cache" "Most bytes of encrypted segments kept in memory for their next \
                viewers (0: none); SIZE as --cache-size.";
    }

    /// `[engine]`: the I/O path.
    [engine] EngineSection {
        /// The I/O engine: "uring" (io_uring, one ring per worker), "epoll" (one event loop per
        /// worker), "threads" (blocking sockets on threads) or "tokio" (a task per connection
        /// on tokio's runtime).
        kind: EngineKind = EngineConfig::default().kind; Named,
            flag "--engine" "I/O engine (RTSP runs on io_uring with uring, on epoll with every other \
                engine).";
        /// How file bytes reach the socket: "sendfile" (zero-copy), "splice" (zero-copy through
        /// a pipe; the only zero-copy path on uring) or "copy" (read into a buffer, then write).
        send: Option<SendStrategy> = None; Opt<Named>,
            flag "--send" "How file bytes reach the socket (uring cannot use sendfile).",
            { unset: Some("splice on uring, sendfile on the others"), example: Some("\"sendfile\"") };
        /// Event loops (epoll and uring).
        workers: Option<usize> = None; Opt<Count>,
            flag "--workers" "Event loops (epoll and uring engines).",
            check |v| when_set(v, |n| at_least(n, 1)),
            { unset: Some("one per core"), here: Some(|c| c.engine_config().workers.to_string()),
              example: Some("2") };
        /// Threads engine: "pool" (a fixed pool, like a servlet container) or "per-connection".
        threads_mode: ThreadsMode = EngineConfig::default().threads_mode; Named,
            flag "--threads-mode" "Threads engine: a fixed pool, or a thread per connection.";
        /// Threads in the pool (threads engine, pool mode).
        pool_size: usize = EngineConfig::default().pool_size; Count,
            flag "--pool-size" "Threads in the pool (threads engine, pool mode).",
            check |v| at_least(v, 1);
        /// Most connections open at once (HTTP and RTSP control connections together); more are
        /// closed as soon as they are accepted.
        max_connections: usize = EngineConfig::default().max_connections; Count,
            flag "--max-connections" "Most connections open at once: HTTP connections and RTSP \
                control connections together.";
        /// Threads that run CPU-bound requests (/bench/cpu, packaging, uploads) on every engine.
        cpu_workers: Option<usize> = None; Opt<Count>,
            flag "--cpu-workers" "Threads for CPU-bound requests, on every engine.",
            check |v| when_set(v, |n| at_least(n, 1)),
            { unset: Some("one per core, 16 for an s3:// library"), here: Some(|c| c.engine_config().cpu_workers.to_string()),
              example: Some("2") };
        /// Most CPU-bound requests queued or running at once; beyond it they get 503.
        cpu_queue: usize = EngineConfig::default().cpu_queue; Count,
            flag "--cpu-queue" "Most CPU-bound requests queued or running at once (503 beyond).",
            check |v| at_least(v, 1);
    }

    /// `[limits]`: deadlines and sizes.
    [limits] LimitsSection {
        /// From a request's first byte (or the connection's start) to its complete head; then
        /// 408.
        header_timeout: Duration = Limits::default().header_timeout; Dur,
            flag "--header-timeout" "Time allowed for a request head (e.g. 10s).",
            check |v| longer_than_zero(v);
        /// How long a kept-alive connection may sit idle between requests.
        keepalive_timeout: Duration = Limits::default().keepalive_timeout; Dur,
            flag "--keepalive-timeout" "Idle time allowed between requests on a kept-alive \
                connection.";
        /// Longest pause between two reads of a request body.
        body_timeout: Duration = Limits::default().body_timeout; Dur,
            flag "--body-timeout" "Longest pause between reads of a request body.";
        /// Longest time a client may take no data while we send; then it is dropped.
        send_timeout: Duration = EngineConfig::default().send_timeout; Dur,
            flag "--send-timeout" "Longest time without send progress before a client is dropped.",
            check |v| longer_than_zero(v);
        /// On SIGTERM/SIGINT: how long in-flight responses get to finish.
        shutdown_grace: Duration = EngineConfig::default().shutdown_grace; Dur,
            flag "--shutdown-grace" "Time in-flight responses get to finish on SIGTERM/SIGINT (a \
                second signal exits at once; responses cut off when it runs out make the exit \
                status 1).";
        /// Longest request line (414 beyond).
        max_request_line: usize = Limits::default().max_request_line; Size,
            check |v| at_least(v, 64);
        /// Longest request head (431 beyond); at least max_request_line.
        max_head: usize = Limits::default().max_head; Size;
        /// Largest unwanted request body (e.g. on GET) read and thrown away; larger gets 413.
        max_discarded_body: u64 = Limits::default().max_discarded_body; Size;
        /// Most responses queued ahead of a slow reader by pipelined requests.
        max_pipelined: usize = Limits::default().max_pipelined; Count,
            check |v| at_least(v, 1);
        /// Most requests on one connection before it is closed.
        max_requests_per_connection: u64 = Limits::default().max_requests_per_connection; Count;
    }

    /// `[log]`: logging.
    [log] LogSection {
        /// "human" or "json" (one object per line, each field a JSON field).
        format: LogFormat = LogFormat::Human; Named,
            flag "--log-format" "Log format (json: one object per line, each field a JSON field).";
        /// A tracing filter: "info", "debug", "warn,sluice::access=off", ...
        level: String = "info".into(); Text,
            flag "--log-level" "Log filter, e.g. info, debug, \"info,sluice::access=off\".",
            { value_name: Some("FILTER") };
        /// Append logs to this file instead of stderr; SIGUSR1 reopens it (after logrotate moved
        /// it).
        file: Option<PathBuf> = None; Opt<Path>,
            flag "--log-file" "Append logs to this file instead of stderr; SIGUSR1 reopens it (after \
                logrotate moved it).",
            { unset: Some("stderr"), example: Some("\"/var/log/sluice.log\"") };
    }

    /// `[store]`: where uploads go (the library root unless set). An s3:// store is also the
    /// library served (scale-out edges, docs/SCALE-OUT.md), read through a local cache of
    /// 4 MiB slices.
    [store] StoreSection {
        /// Where uploads go: a directory, or "s3://BUCKET/PREFIX".
        location: Option<String> = None; Opt<Text>,
            flag "--store" "Where uploads are stored: a directory or s3://BUCKET/PREFIX; an s3:// \
                store is also the library served, through a local cache (--cache-*).",
            { value_name: Some("LOCATION"), unset: Some("the library root"),
              example: Some("\"s3://media/library\"") };
        /// For an s3:// store: the endpoint (SeaweedFS, MinIO).
        s3_endpoint: Option<String> = None; Opt<Text>,
            flag "--s3-endpoint" "S3 endpoint URL for an s3:// store, e.g. http://127.0.0.1:8333 \
                (SeaweedFS, MinIO).",
            { value_name: Some("URL"), unset: Some("AWS"), example: Some("\"http://127.0.0.1:8333\"") };
        /// The S3 region.
        s3_region: Option<String> = None; Opt<Text>,
            flag "--s3-region" "S3 region.",
            { value_name: Some("REGION"), unset: Some("AWS_REGION, else us-east-1"),
              example: Some("\"us-east-1\"") };
        /// S3 access key id.
        s3_access_key_id: Option<String> = None; Opt<Text>,
            { unset: Some("AWS_ACCESS_KEY_ID"), example: Some("\"sluice\"") };
        /// S3 secret access key; never printed by `sluice serve --check`.
        s3_secret_access_key: Option<String> = None; Opt<Text>,
            { unset: Some("AWS_SECRET_ACCESS_KEY"), example: Some("\"...\""), secret: true };
        /// Virtual-hosted-style addressing; off (path style) suits SeaweedFS and MinIO.
        s3_virtual_hosted: bool = false; Bool;
        /// Longest time one request to the S3 store may take; a library read from it answers 504
        /// past it.
        s3_timeout: Option<Duration> = None; Opt<Dur>,
            flag "--s3-timeout" "Longest time one request to the S3 store may take (a library read \
                from it answers 504 past it).",
            { unset: Some("30s"), example: Some("\"30s\"") };
        /// Directory of the local cache of an s3:// library; a directory given here is kept and
        /// reused.
        cache_dir: Option<PathBuf> = None; Opt<Path>,
            flag "--cache-dir" "Directory of the local cache of an s3:// library (a directory given \
                here is kept and reused).",
            { value_name: Some("DIR"),
              unset: Some("sluice-cache-PID under the temporary directory, removed when sluice exits"),
              example: Some("\"/var/cache/sluice\"") };
        /// For an s3:// store: where `[[record]]` recordings are written while they grow; each
        /// file is uploaded whole into the bucket (same key, recordings/…) once it is closed, then
        /// removed here; files a stop or a crash left are uploaded at the next start. Keep it across
        /// restarts; a recording is in the library only once its file closes (so choose a short
        /// file_duration, e.g. 1m).
        record_spool: Option<PathBuf> = None; Opt<Path>,
            flag "--record-spool" "Directory where recordings of an s3:// library grow until each \
                file is closed and uploaded (kept across restarts: the files a stop or a crash left \
                are uploaded at the next start).",
            { value_name: Some("DIR"),
              unset: Some("sluice-spool-BUCKET-PREFIX under the temporary directory"),
              example: Some("\"/var/lib/sluice/spool\"") };
        /// Most bytes the cache keeps on disk (least recently used go first; never above it plus
        /// the slices being fetched).
        cache_size: u64 = 1 << 30; Size,
            flag "--cache-size" "Most bytes the cache keeps on disk, e.g. 512M, 64MiB or 20GB; SIZE: \
                bytes, or K/M/G/T, KiB/MiB/GiB/TiB (powers of 1024), KB/MB/GB/TB (powers of \
                1000).";
        /// Object metadata older than this is checked again with the store by ETag.
        cache_revalidate: Duration = Duration::from_secs(60); Dur,
            flag "--cache-revalidate" "Object metadata older than this is revalidated with the store \
                by ETag.";
        /// Background workers that fetch an s3:// library's slices ahead of readers and read
        /// RTSP indexes off the loops (as many fetches wait; each holds a 4 MiB slice until it is
        /// written); a pool apart from the CPU workers, since a request's job may wait for a
        /// fetch started ahead of it.
        fetch_workers: usize = crate::library::remote::MAX_FETCHES_AHEAD; Count,
            flag "--fetch-workers" "Background workers fetching an s3:// library ahead of its \
                readers (as many wait).",
            check |v| at_least(v, 1);
        /// An s3:// store that does not answer at start-up (a missing bucket, refused
        /// credentials) makes `sluice serve` exit 2 with the reason; with wait = true it starts
        /// unready instead (/readyz 503 with the reason) and becomes ready once the store
        /// answers.
        wait: bool = false; Bool,
            flag "--store-wait" "When the s3:// store does not answer at start-up (a missing \
                bucket, refused credentials), start anyway, unready (/readyz 503 with the reason) \
                until it answers, instead of exiting 2.",
            { switch: true };
    }

    /// `[uploads]`: who may upload, and how much.
    [uploads] UploadsSection {
        /// PUT and DELETE need "Authorization: Bearer <token>" with one of these tokens (one a
        /// line in the file; '#' comments; the file must hold at least one). Without any token
        /// uploads are off: PUT and DELETE get 403.
        token_file: Option<PathBuf> = None; Opt<Path>,
            flag "--upload-token-file" "Bearer tokens allowed to PUT and DELETE, one a line ('#' \
                comments); the file must hold at least one. Without a token file (or `tokens` in \
                the file), uploads are off (403).",
            { value_name: Some("FILE"), example: Some("\"/etc/sluice/upload-tokens\"") };
        /// Tokens given inline (prefer token_file, which keeps them out of this file); never
        /// printed by `sluice serve --check`.
        tokens: Vec<String> = Vec::new(); Texts,
            { secret: true };
        /// Largest upload; a declared length over it is 413 before the body is read.
        max_size: u64 = 64 << 30; Size,
            flag "--max-upload" "Largest upload (413 before the body beyond it), e.g. 1M, 64MiB, \
                5GB; SIZE as --cache-size.";
        /// Compressible types (text, HTML, JSON, XML, SVG, CSS, JS, m3u8, VTT) are stored
        /// gzipped when it saves at least gzip_min_saving of their size and 512 bytes ("auto"),
        /// whenever smaller ("always"), or never. Clients that do not accept gzip get them
        /// inflated on the fly.
        gzip: String = "auto".into(); Text;
        /// Least saving for "auto", as a fraction of the plain size.
        gzip_min_saving: f64 = sluice_store::gzip::GzipPolicy::default().min_saving; Float;
        /// Bytes each token may upload per day (UTC); beyond it 429 with Retry-After until
        /// midnight. 0: no limit.
        max_bytes_per_token_per_day: u64 = 0; Size,
            flag "--upload-bytes-per-day" "Bytes each upload token may store per day (UTC); beyond it \
                429 with Retry-After until midnight (0: no limit). SIZE as --cache-size.";
    }

    /// `[clients]`: limits per client address; 0 turns a limit off. One connection too many is
    /// answered 429 and closed; a request beyond the rate gets 429 with Retry-After.
    [clients] ClientsSection {
        /// Open HTTP connections per address.
        max_connections_per_ip: u32 = 0; Count,
            flag "--max-connections-per-ip" "Open HTTP connections per client address; one more is \
                answered 429 and closed (0: no limit).";
        /// Requests per second per address, on average (a token bucket), after a burst of
        /// `burst`.
        requests_per_second: f64 = 0.0; Float,
            flag "--requests-per-second" "Requests per second per client address, on average; \
                beyond it 429 with Retry-After (0: no limit).",
            { value_name: Some("RATE") };
        /// Requests an address may make at once before the rate applies.
        burst: u32 = 20; Count,
            flag "--burst" "Requests a client address may make at once before \
                --requests-per-second applies.";
        /// RTSP sessions per address, over all its connections; one more SETUP is answered 503.
        rtsp_sessions_per_ip: usize = 0; Count,
            flag "--rtsp-sessions-per-ip" "RTSP sessions per client address, over all its \
                connections; one more SETUP is answered 503 (0: no limit).";
        /// Addresses remembered at most (a few dozen bytes each); beyond it the least recently
        /// seen are forgotten, so a flood of distinct addresses cannot grow memory.
        table_size: usize = 65_536; Count;
    }

    /// `[tls]`: HTTPS (rustls, every engine) with a certificate chain and its key in PEM files,
    /// both read again on SIGHUP (new connections get the new certificate). Off unless both are
    /// set.
    [tls] TlsSection {
        /// The certificate chain (PEM), server certificate first.
        cert: Option<PathBuf> = None; Opt<Path>,
            flag "--tls-cert" "Serve HTTPS with this certificate chain (PEM; read again on SIGHUP).",
            { value_name: Some("FILE"), requires: &["tls-key"], example: Some("\"/etc/sluice/fullchain.pem\"") };
        /// The private key (PEM: PKCS#8, PKCS#1 or SEC1).
        key: Option<PathBuf> = None; Opt<Path>,
            flag "--tls-key" "The private key of --tls-cert (PEM; read again on SIGHUP).",
            { value_name: Some("FILE"), requires: &["tls-cert"], example: Some("\"/etc/sluice/key.pem\"") };
        /// Kernel TLS: "auto" hands each connection's record layer to the kernel after the
        /// handshake when the kernel offers the `tls` ULP and takes the negotiated suite (file
        /// bodies then go out with sendfile or splice); "off" encrypts in user space always.
        kernel: KernelTls = KernelTls::Auto; Named,
            flag "--tls-kernel" "Kernel TLS: auto (after the handshake, the kernel encrypts when it \
                can, and sendfile/splice stay in use) or off (user space always).",
            { value_name: Some("MODE") };
        /// HTTPS on an address of its own, HTTP staying on http.listen.
        listen: Option<SocketAddr> = None; Opt<Listen>,
            flag "--tls-listen" "HTTPS address, as --listen, with HTTP staying on --listen.",
            { unset: Some("--listen serves HTTPS only"), example: Some("\"0.0.0.0:8443\"") };
        /// An OCSP response for the certificate (DER, as `openssl ocsp -respout` writes it),
        /// stapled to every handshake, read again on SIGHUP with the certificate. Refused (at
        /// start, or on reload, keeping the one in use) when malformed, about another
        /// certificate, not "good", or past its own nextUpdate: fetch a new one before then.
        ocsp: Option<PathBuf> = None; Opt<Path>,
            flag "--tls-ocsp" "Staple this OCSP response (DER) for --tls-cert; read again on SIGHUP, \
                refused when malformed, not 'good' or past its nextUpdate.",
            { value_name: Some("FILE"), requires: &["tls-cert"], example: Some("\"/etc/sluice/ocsp.der\"") };
        /// Strict-Transport-Security, sent as written on every HTTPS response, errors included
        /// (as nginx's `add_header ... always`), never over plain HTTP (RFC 6797): max-age in
        /// seconds, then includeSubDomains and preload if wanted.
        hsts: Option<String> = None; Opt<Text>,
            flag "--hsts" "Send Strict-Transport-Security with this value on every HTTPS response, \
                e.g. 'max-age=31536000; includeSubDomains' (RFC 6797; never over plain HTTP).",
            check |v| when_set(v, |value| super::strict_transport_security(value)),
            { value_name: Some("VALUE"), requires: &["tls-cert"], unset: Some("no Strict-Transport-Security header"),
              example: Some("\"max-age=31536000; includeSubDomains\"") };
    }
}
