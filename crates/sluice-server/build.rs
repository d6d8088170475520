//! Stamps the git commit the server was built from into `sluice_build_info` (`SLUICE_COMMIT`),
//! or `unknown` when built outside a git checkout (from a source archive).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let commit = std::env::var("SLUICE_COMMIT")
        .ok()
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SLUICE_COMMIT={commit}");
    println!("cargo:rerun-if-env-changed=SLUICE_COMMIT");
    // A new commit moves HEAD or the branch it points at: either file changing rebuilds the stamp.
    for path in ["HEAD", "logs/HEAD"] {
        if let Some(p) = git(&["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}
