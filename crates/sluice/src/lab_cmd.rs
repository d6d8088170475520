//! `sluice lab ...`: runs the lab's own program, `sluice-lab`, with the same arguments. The lab
//! (experiments, peers, reports) and the development harness it runs peers with are not linked
//! into `sluice`; this module only finds `sluice-lab` (beside this binary, then on `PATH`) and
//! replaces this process with it.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

/// `sluice lab ...`: everything after `lab` goes to `sluice-lab`.
#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct LabArgs {
    /// The lab's command and its arguments: `list`, `run EXPERIMENT`, `report RESULTS...`,
    /// `ceiling` (`sluice lab --help` for all).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0.., value_name = "ARGS")]
    args: Vec<OsString>,
}

/// The lab's program name.
const LAB: &str = "sluice-lab";

/// Replaces this process with `sluice-lab ARGS...`; returns only when that cannot start.
pub fn run(args: LabArgs) -> anyhow::Result<()> {
    let lab = find_lab()?;
    let err = std::process::Command::new(&lab).args(&args.args).exec();
    Err(err).with_context(|| format!("running {}", lab.display()))
}

/// `sluice-lab` beside this binary (where cargo builds both), else on `PATH`.
fn find_lab() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("finding this program's path")?;
    let beside = me.with_file_name(LAB);
    if beside.is_file() {
        return Ok(beside);
    }
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(LAB)).find(|p| p.is_file()))
        .with_context(|| {
            format!(
                "the lab is its own program, {LAB}, and it is neither beside {} nor on PATH: build it with \
                 `cargo build --release -p sluice-lab` (or `cargo build --release`, which builds both)",
                me.display()
            )
        })
}
