//! The `dist` build the benchmark measures: `cargo build --profile dist` with the hot-function
//! link order on (`TOOLGATE_HOT_FUNCTIONS=on`, see the root `build.rs`), and the check that the
//! list still names the binary's functions. LLD skips names it does not find, so a list gone
//! stale after a toolchain or dependency update would silently give back the default layout and
//! the benchmark would measure a build nobody ships; below 90% the run stops instead.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The share of listed symbols the binary must hold for the list to count as current.
pub const MIN_HOT_FUNCTIONS_FOUND: f64 = 0.9;

/// The list `build.rs` hands to the linker, relative to the workspace.
pub const HOT_FUNCTIONS: &str = "link/hot-functions.txt";

/// cargo's target directory for the workspace at `root`: `CARGO_TARGET_DIR` when set, as cargo
/// itself reads it.
pub fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

/// Where `cargo build --profile dist` puts its binaries.
pub fn binary_dir(target_dir: &Path) -> PathBuf {
    target_dir.join("dist")
}

/// `cargo build --profile dist` of the given `(package, binary)` pairs, with the hot-function
/// link order on.
pub fn build(root: &Path, binaries: &[(&str, &str)]) -> Result<(), String> {
    build_profile(root, "dist", binaries)
}

/// `cargo build --profile PROFILE` of the given `(package, binary)` pairs; the hot-function
/// link order only for `dist`, the build it was made for. Another profile (`release`, the
/// newcomer's build) is for a check of a change's direction, never the run of record.
pub fn build_profile(root: &Path, profile: &str, binaries: &[(&str, &str)]) -> Result<(), String> {
    let mut command = Command::new("cargo");
    command
        .current_dir(root)
        .args(["build", "--profile", profile]);
    if profile == "dist" {
        command.env("TOOLGATE_HOT_FUNCTIONS", "on");
    }
    for (package, binary) in binaries {
        command.args(["-p", package, "--bin", binary]);
    }
    let status = command
        .status()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo build --profile {profile} failed"))
    }
}

/// How many of the list's symbols the binary defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coverage {
    pub found: usize,
    pub listed: usize,
}

impl Coverage {
    pub fn share(self) -> f64 {
        if self.listed == 0 {
            0.0
        } else {
            self.found as f64 / self.listed as f64
        }
    }
}

/// The list's symbols (one a line; `#` comments and blank lines skipped) found among the
/// binary's, as `nm` prints them (`ADDRESS TYPE NAME`).
pub fn coverage(list: &str, nm_output: &str) -> Coverage {
    let defined: HashSet<&str> = nm_output
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .collect();
    let listed: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect();
    Coverage {
        found: listed.iter().filter(|name| defined.contains(*name)).count(),
        listed: listed.len(),
    }
}

/// Fails, saying how to regenerate the list, when the binary holds fewer than 90% of it.
pub fn check_hot_functions(root: &Path, binary: &Path) -> Result<Coverage, String> {
    let list_path = root.join(HOT_FUNCTIONS);
    let list = std::fs::read_to_string(&list_path)
        .map_err(|error| format!("cannot read {}: {error}", list_path.display()))?;
    let output = Command::new("nm")
        .arg("--defined-only")
        .arg(binary)
        .output()
        .map_err(|error| format!("cannot run nm (binutils) on {}: {error}", binary.display()))?;
    if !output.status.success() {
        return Err(format!(
            "nm {} failed: {}",
            binary.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let coverage = coverage(&list, &String::from_utf8_lossy(&output.stdout));
    if coverage.share() < MIN_HOT_FUNCTIONS_FOUND {
        return Err(format!(
            "{HOT_FUNCTIONS} is stale: {} binary holds {} of its {} symbols ({:.0}%, under {:.0}%), \
             so the link order is mostly lost. Regenerate it (bench/README.md, \"The hot-function \
             list\"): cargo run --release -p toolgate-bench --bin hot-functions",
            binary.display(),
            coverage.found,
            coverage.listed,
            coverage.share() * 100.0,
            MIN_HOT_FUNCTIONS_FOUND * 100.0
        ));
    }
    Ok(coverage)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NM: &str = "0000000000001000 T _ZN4main3run17h0E\n\
                      0000000000002000 t mi_process_attach\n\
                      0000000000003000 D some_data\n";

    #[test]
    fn counts_listed_symbols_the_binary_defines_and_skips_comments() {
        let list = "# generated\n_ZN4main3run17h0E\n\nmi_process_attach\n_ZN4gone17h1E\n";
        let coverage = coverage(list, NM);
        assert_eq!(
            coverage,
            Coverage {
                found: 2,
                listed: 3
            }
        );
        assert!(coverage.share() < MIN_HOT_FUNCTIONS_FOUND);
    }

    #[test]
    fn an_empty_list_covers_nothing() {
        assert_eq!(coverage("# only a comment\n", NM).share(), 0.0);
    }
}
