// Build script: with `TOOLGATE_HOT_FUNCTIONS=on`, links the `dist` binary with the functions a
// running gateway executes placed side by side, from `link/hot-functions.txt`
// (docs/performance.md: what it saves; bench/README.md: how the list is regenerated).
//
// Scattered over the binary's 16 MB of code, those functions touch a page-cache folio here and
// there, and the kernel maps each touched folio whole: ~9-13 MiB of the gateway's RSS was code.
// Placed together they fit in ~2.4 MiB. The list is an LLD `--symbol-ordering-file`: names it
// does not find (another toolchain, a changed dependency) are skipped, which only gives back
// the default layout — so it is opt-in, for builds that check the list still matches (the
// benchmark refuses a binary holding fewer than 90% of its symbols), never a newcomer's build.

use std::path::Path;
use std::process::Command;

const HOT_FUNCTIONS: &str = "link/hot-functions.txt";

fn main() {
    println!("cargo:rerun-if-changed={HOT_FUNCTIONS}");
    println!("cargo:rerun-if-env-changed=TOOLGATE_HOT_FUNCTIONS");
    let Ok(root) = std::env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let list = Path::new(&root).join(HOT_FUNCTIONS);
    if std::env::var("TOOLGATE_HOT_FUNCTIONS").as_deref() != Ok("on") {
        return;
    }
    if !built_for_dist_profile() {
        println!(
            "cargo:warning=TOOLGATE_HOT_FUNCTIONS=on applies to `--profile dist` builds only; ignored"
        );
        return;
    }
    if !list.is_file() || !linked_by_default_lld() {
        println!(
            "cargo:warning=TOOLGATE_HOT_FUNCTIONS=on, but {HOT_FUNCTIONS} is missing or the linker is not rustc's default LLD; linked without it"
        );
        return;
    }
    println!(
        "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        list.display()
    );
    println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

/// Whether cargo builds the `dist` profile. Cargo tells a build script only `debug` or
/// `release` (`PROFILE`), so the profile is read from where it puts the script's output:
/// `target/[<triple>/]<profile>/build/<package>-<hash>/out`.
fn built_for_dist_profile() -> bool {
    let Some(out_dir) = std::env::var_os("OUT_DIR") else {
        return false;
    };
    Path::new(&out_dir)
        .ancestors()
        .nth(3)
        .and_then(Path::file_name)
        .is_some_and(|profile| profile == "dist")
}

/// Linked by the LLD that rustc uses by default on x86_64 Linux since 1.90. Another linker may
/// not know the flag (GNU ld does not), so a configured linker, or an older rustc, links as before.
fn linked_by_default_lld() -> bool {
    let env = |name: &str| std::env::var(name).unwrap_or_default();
    if env("TARGET") != "x86_64-unknown-linux-gnu" {
        return false;
    }
    // `RUSTC_LINKER`: cargo's `target.<triple>.linker`; flags can pick a linker too.
    if std::env::var_os("RUSTC_LINKER").is_some() || env("CARGO_ENCODED_RUSTFLAGS").contains("link")
    {
        return false;
    }
    rustc_minor_version().is_some_and(|minor| minor >= 90)
}

/// The `N` of the compiler's `1.N` version.
fn rustc_minor_version() -> Option<u32> {
    let rustc = std::env::var_os("RUSTC")?;
    let output = Command::new(rustc).arg("--version").output().ok()?;
    let version = String::from_utf8(output.stdout).ok()?;
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let number = version.split_whitespace().nth(1)?;
    let mut parts = number.split('.');
    match (parts.next(), parts.next()) {
        (Some("1"), Some(minor)) => minor.parse().ok(),
        _ => None,
    }
}
