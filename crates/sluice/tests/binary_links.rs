//! The `sluice` binary links neither the lab nor the development harness: `cargo tree -p sluice
//! -e normal` lists no `sluice-lab` and no `sluice-harness` (they are dev-dependencies of the
//! tests, and `sluice lab` runs the separate `sluice-lab` program). Skipped, saying so, where
//! cargo cannot run.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn sluice_links_neither_the_lab_nor_the_harness() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let output = Command::new(cargo)
        .args(["tree", "-p", "sluice", "-e", "normal", "--prefix", "none", "--offline", "--manifest-path"])
        .arg(manifest)
        .output();
    let output = match output {
        Ok(o) if o.status.success() => o,
        other => {
            eprintln!("skipped: `cargo tree` did not run here: {other:?}");
            return;
        }
    };
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(tree.lines().any(|l| l.starts_with("sluice-server ")), "a normal dependency is listed:\n{tree}");
    let linked: Vec<&str> =
        tree.lines().filter(|l| l.starts_with("sluice-harness ") || l.starts_with("sluice-lab ")).collect();
    assert!(linked.is_empty(), "`sluice` links {linked:?}:\n{tree}");
}
