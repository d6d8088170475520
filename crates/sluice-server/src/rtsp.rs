//! The RTSP side of `sluice serve`: the per-loop RTSP server cores ([`cores`]) and the library as
//! they see it ([`media`]).
//!
//! Owns the glue between the RTSP server core (sessions, admission, RTP) and this server's
//! library, access policies and logs. The protocol and the sessions themselves live in the RTSP
//! core, not here.

pub mod cores;
pub mod media;
