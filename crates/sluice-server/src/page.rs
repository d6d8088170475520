//! The pages a person sees on the media port: the folder page ([`folder`]) at `/` and at any
//! directory without an `index.html`.
//!
//! Owns the HTML and the vendored players the page loads. It does not read the file system or
//! decide routes: [`crate::http::app`] describes a folder and asks for its page.

pub mod assets;
pub mod folder;
