//! The players the folder page loads, vendored so the page works with no network beyond the
//! server: hls.js and dash.js (with its EME module), their URLs, bytes and versions.
//!
//! Owns which copies are served and where; the routes serve them (`crate::http::hls`) and the
//! page links them (`crate::page::folder`).

/// Where sluice serves its vendored copy of hls.js (npm `hls.js`, `dist/hls.min.js`).
pub const HLS_JS_PATH: &str = "/.sluice/hls.min.js";

/// The vendored hls.js (see `assets/hls.js/README.md`).
pub const HLS_JS: &[u8] = include_bytes!("../../assets/hls.js/hls.min.js");

/// Version of the vendored hls.js, part of its URL's validator.
pub const HLS_JS_VERSION: &str = "1.7.4";

/// Where sluice serves its vendored copy of dash.js (npm `dashjs`,
/// `dist/modern/umd/dash.mediaplayer.min.js`), loaded by the page only when DASH is chosen.
pub const DASH_JS_PATH: &str = "/.sluice/dash.mediaplayer.min.js";

/// The vendored dash.js (see `assets/dash.js/README.md`).
pub const DASH_JS: &[u8] = include_bytes!("../../assets/dash.js/dash.mediaplayer.min.js");

/// Version of the vendored dash.js, part of its URL's validator.
pub const DASH_JS_VERSION: &str = "5.2.1";

/// Where sluice serves dash.js's EME module (same package, `dash.protection.min.js`), loaded by
/// the page only for an encrypted title played over DASH.
pub const DASH_PROTECTION_JS_PATH: &str = "/.sluice/dash.protection.min.js";

/// The vendored dash.js EME module (see `assets/dash.js/README.md`).
pub const DASH_PROTECTION_JS: &[u8] = include_bytes!("../../assets/dash.js/dash.protection.min.js");
