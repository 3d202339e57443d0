//! What a report is stamped with: the commit of the source it measured, whether that source had
//! changes the commit does not hold, and the build profile of the binaries it ran — so that a
//! figure always says what it is a figure of.
//!
//! In a git checkout the commit and the dirty flag come from `git describe --always --dirty`.
//! A tree exported with `git archive` (how a clean measurement is made beside a shared working
//! tree) has no `.git`, so there the commit is the one the caller names in `TOOLGATE_COMMIT`, and
//! the report says it was given rather than read.

use std::path::Path;
use std::process::Command;

/// The variable naming the commit of a `git archive` export.
pub const COMMIT_VARIABLE: &str = "TOOLGATE_COMMIT";

/// The commit of the workspace at `root`, with its dirty flag spelled out, e.g.
/// `82a1465 (clean git checkout)` or `82a1465-dirty (uncommitted changes in the tree were built)`.
pub fn of_tree(root: &Path) -> String {
    if let Some(described) = git_describe(root) {
        return if described.ends_with("-dirty") {
            format!("{described} (uncommitted changes in the tree were built)")
        } else {
            format!("{described} (clean git checkout)")
        };
    }
    match std::env::var(COMMIT_VARIABLE) {
        Ok(commit) if !commit.trim().is_empty() => format!(
            "{} (a `git archive` export, not a checkout: commit as given in {COMMIT_VARIABLE}; \
             changes made after the export cannot be seen)",
            commit.trim()
        ),
        _ => format!(
            "unknown: {} is not a git checkout and {COMMIT_VARIABLE} is not set",
            root.display()
        ),
    }
}

/// `git describe --always --dirty` when `root` is the top of a git work tree (not merely inside
/// one: an export unpacked within another repository must not take that repository's commit).
fn git_describe(root: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let output = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    let top = git(&["rev-parse", "--show-toplevel"])?;
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same(Path::new(&top), root) {
        return None;
    }
    git(&["describe", "--always", "--dirty", "--abbrev=7"])
}

/// The profile cargo built `binary` with, read from where cargo puts it:
/// `target/[<triple>/]<profile>/<binary>`.
pub fn profile_of(binary: &Path) -> String {
    binary
        .parent()
        .and_then(Path::file_name)
        .map(|name| name.to_string_lossy().into_owned())
        .filter(|name| matches!(name.as_str(), "debug" | "release" | "dist"))
        .unwrap_or_else(|| {
            format!(
                "unknown ({} is not in a cargo profile directory)",
                binary.display()
            )
        })
}

/// The profile of the running binary: `debug` when built with debug assertions, else an
/// optimised one (`release` or `dist`, read from the binary's own path when it can be).
pub fn own_profile() -> String {
    let from_path = std::env::current_exe()
        .ok()
        .map(|path| profile_of(&path))
        .filter(|profile| !profile.starts_with("unknown"));
    match (cfg!(debug_assertions), from_path) {
        (true, _) => "debug".to_owned(),
        (false, Some(profile)) => profile,
        (false, None) => "optimised (release or dist)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_is_the_directory_cargo_put_the_binary_in() {
        assert_eq!(profile_of(Path::new("/t/release/toolgate")), "release");
        assert_eq!(profile_of(Path::new("target/dist/toolgate")), "dist");
        assert_eq!(
            profile_of(Path::new("target/x86_64-unknown-linux-gnu/debug/toolgate")),
            "debug"
        );
        assert!(profile_of(Path::new("/usr/local/bin/toolgate")).starts_with("unknown"));
    }

    #[test]
    fn a_directory_that_is_no_checkout_takes_the_commit_it_is_given_or_says_unknown() {
        let dir = std::env::temp_dir().join(format!("revision-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Whatever the variable holds in this process, the stamp never claims a clean checkout.
        let stamp = of_tree(&dir);
        assert!(!stamp.contains("clean git checkout"), "{stamp}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
