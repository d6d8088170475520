//! The RTSP side of `sluice serve`: the per-loop RTSP server cores ([`cores`]), the library as
//! they see it ([`media`]) and the camera sources pulled into live paths ([`camera`]).
//!
//! Owns the glue between the RTSP server core (sessions, admission, RTP) and this server's
//! library, access policies and logs. The protocol and the sessions themselves live in the RTSP
//! core, not here.

pub mod camera;
pub mod cores;
pub mod media;
