//! Regenerates `link/hot-functions.txt`, the functions a running gateway executes, which
//! `build.rs` hands to the `dist` link (with `TOOLGATE_HOT_FUNCTIONS=on`) so that they sit side by
//! side (docs/performance.md).
//!
//! It runs the `dist` toolgate under valgrind's callgrind three times (with tool_selection,
//! its audit line written to a file; with no plugins; with the other policy plugins beside
//! tool_selection), drives the benchmark's exchanges through it (JSON and streamed answers, blocks, many calls, text deltas, 1 to 100 declared
//! tools, long conversations), and keeps every function of the toolgate binary that ran, in
//! the order they first ran. Start-up counts: its code stays resident as long as the process.
//!
//! Regenerate it after a toolchain or dependency update, which renames symbols:
//! `cargo build --profile dist -p toolgate -p toolgate-bench && cargo run --release -p toolgate-bench --bin hot-functions`
//! (needs valgrind: `apt-get install -y valgrind`), then rebuild the dist binary
//! (`TOOLGATE_HOT_FUNCTIONS=on cargo build --profile dist`).
//! `--out FILE` writes the list elsewhere (to look at it without replacing the committed one).

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use http::StatusCode;
use toolgate_bench::callgrind::executed_functions;
use toolgate_bench::client::{self, Shot};
use toolgate_bench::procs::{Process, TempDir, free_port};
use toolgate_bench::stack::{self, TOOL_SELECTION_PLUGIN, gateway_config};
use toolgate_bench::workload::{self, RequestSpec};

/// Start-up under valgrind is ~50 times slower than native.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// The gateway's shutdown, and callgrind writing its profile.
const STOP_GRACE: Duration = Duration::from_secs(60);

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("hot-functions: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok((count, path)) => {
            println!("{count} functions written to {}", path.display());
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("hot-functions: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(usize, PathBuf), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("the bench crate has no parent directory")?
        .to_path_buf();
    let out = out_path(&root)?;
    let dist_dir = toolgate_bench::dist::binary_dir(&toolgate_bench::dist::target_dir(&root));
    let (toolgate, upstream_binary) = (dist_dir.join("toolgate"), dist_dir.join("bench-upstream"));
    for binary in [&toolgate, &upstream_binary] {
        if !binary.is_file() {
            return Err(format!(
                "{} is missing: cargo build --profile dist -p toolgate -p toolgate-bench",
                binary.display()
            ));
        }
    }
    let valgrind_found = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    if !valgrind_found {
        return Err("valgrind is not installed (apt-get install -y valgrind)".into());
    }
    let dir = TempDir::new("toolgate-hot-functions").map_err(|error| error.to_string())?;
    let upstream = stack::upstream(&upstream_binary, &dir.0)?;

    let mut functions = Vec::new();
    let mut seen = HashSet::new();
    for traced in [Traced::Guarded, Traced::Plain, Traced::Policies] {
        let name = traced.name();
        let profile = dir.0.join(format!("{name}.callgrind"));
        let address = free_port().map_err(|error| error.to_string())?;
        let config = dir.0.join(format!("{name}.toml"));
        let audit = dir.0.join("audit.jsonl");
        std::fs::write(
            &config,
            config_text(traced, address, upstream.address, &audit),
        )
        .map_err(|error| error.to_string())?;
        let mut command = Command::new("valgrind");
        command
            .arg("--tool=callgrind")
            .arg("--demangle=no")
            .arg(format!("--callgrind-out-file={}", profile.display()))
            .arg(&toolgate)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .env("TOOLGATE_LOG", "warn");
        let mut gateway = Process::start(name, command, &dir.0).map_err(|e| e.to_string())?;
        gateway.wait_for_port(address, START_TIMEOUT)?;
        eprintln!("   {name}: toolgate started under callgrind");
        drive(address, traced.blocks()).await?;
        if !gateway.stop(STOP_GRACE) {
            return Err(format!(
                "{name}: toolgate did not stop within {STOP_GRACE:?}"
            ));
        }
        let text = std::fs::read_to_string(&profile)
            .map_err(|error| format!("{}: {error}", profile.display()))?;
        let object = toolgate.to_string_lossy();
        let executed = executed_functions(&text, &object);
        eprintln!("   {name}: {} functions executed", executed.len());
        for function in executed {
            if seen.insert(function.clone()) {
                functions.push(function);
            }
        }
    }
    if functions.is_empty() {
        return Err("callgrind saw no function of the toolgate binary".into());
    }
    let rustc = Command::new("rustc")
        .arg("--version")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_default();
    let mut text = format!(
        "# The functions a running gateway executes, for build.rs to place side by side in the\n\
         # dist link (an LLD --symbol-ordering-file; unknown names are skipped). Generated by\n\
         # `cargo run --release -p toolgate-bench --bin hot-functions`; symbols of {rustc}.\n"
    );
    for function in &functions {
        text.push_str(function);
        text.push('\n');
    }
    std::fs::write(&out, text).map_err(|error| format!("{}: {error}", out.display()))?;
    Ok((functions.len(), out))
}

/// `--out FILE`, else `link/hot-functions.txt` in the workspace.
fn out_path(root: &Path) -> Result<PathBuf, String> {
    let mut args = std::env::args().skip(1);
    match (args.next().as_deref(), args.next(), args.next()) {
        (None, _, _) => Ok(root.join("link/hot-functions.txt")),
        (Some("--out"), Some(file), None) => Ok(PathBuf::from(file)),
        _ => Err("usage: hot-functions [--out FILE]".into()),
    }
}

/// The benchmark's exchanges, each checked for the answer it must get, so that a gateway
/// that failed early does not leave a list of its error path.
async fn drive(address: SocketAddr, blocks: bool) -> Result<(), String> {
    let body = workload::request_body(RequestSpec::default());
    let stream_body = workload::request_body(RequestSpec {
        stream: true,
        ..RequestSpec::default()
    });
    let blocked = if blocks {
        StatusCode::FORBIDDEN
    } else {
        StatusCode::OK
    };
    let mut shots = vec![
        (Shot::chat_completion(address, &body, &[]), StatusCode::OK),
        (
            Shot::chat_completion(address, &stream_body, &[]),
            StatusCode::OK,
        ),
        (
            Shot::chat_completion(address, &body, &[("x-bench-undeclared", "1")]),
            blocked,
        ),
        // Blocked after the head: an error event in a 200 stream.
        (
            Shot::chat_completion(address, &stream_body, &[("x-bench-undeclared", "1")]),
            StatusCode::OK,
        ),
        (
            Shot::chat_completion(address, &body, &[("x-bench-calls", "16")]),
            StatusCode::OK,
        ),
        (
            Shot::chat_completion(address, &stream_body, &[("x-bench-calls", "16")]),
            StatusCode::OK,
        ),
        (
            Shot::chat_completion(address, &stream_body, &[("x-bench-deltas", "5")]),
            StatusCode::OK,
        ),
    ];
    // The calls name the first realistic tools, as many as are declared (`x-bench-call-span`).
    for (spec, span) in [
        (
            RequestSpec {
                tools: 1,
                ..RequestSpec::default()
            },
            "1",
        ),
        (
            RequestSpec {
                tools: 100,
                ..RequestSpec::default()
            },
            "10",
        ),
        (
            RequestSpec {
                message_bytes: 100_000,
                ..RequestSpec::default()
            },
            "10",
        ),
    ] {
        let body = workload::request_body(spec);
        shots.push((
            Shot::chat_completion(address, &body, &[("x-bench-call-span", span)]),
            StatusCode::OK,
        ));
    }
    for (shot, expected) in shots {
        let (status, answer) = client::once(&shot).await?;
        if status != expected {
            return Err(format!(
                "expected {expected}, got {status}: {}",
                String::from_utf8_lossy(&answer)
            ));
        }
    }
    Ok(())
}

/// The gateways traced, in this order: the benchmark's guarded one first, so that its
/// functions lead the list; the one with no plugins; then the other policy plugins beside the
/// guard, configured so that they let the benchmark's exchanges through.
#[derive(Debug, Clone, Copy)]
enum Traced {
    Guarded,
    Plain,
    Policies,
}

const OTHER_POLICIES: &str = "\n[[plugins]]\nname = \"tool_budget\"\n\
     [[plugins.settings.budgets]]\ntools = \"*\"\nlimits = [\"1000000/minute\"]\n\n\
     [[plugins]]\nname = \"tool_arguments\"\n\
     [[plugins.settings.rules]]\ntools = \"send_email\"\npointer = \"/to/*\"\nmatches = \".+\"\n";

const PERMISSIONS: &str = "[[routes.plugins]]\nname = \"tool_permission\"\n\
     [routes.plugins.settings]\naccess_level = \"elevated\"\nallow = [\"*\"]\n";

impl Traced {
    fn name(self) -> &'static str {
        match self {
            Traced::Guarded => "guarded",
            Traced::Plain => "plain",
            Traced::Policies => "policies",
        }
    }

    /// Whether a call to an undeclared tool is answered 403.
    fn blocks(self) -> bool {
        !matches!(self, Traced::Plain)
    }
}

/// The benchmark's gateway (`stack`), with the audit line written when plugins run: a deployed
/// gateway audits, so that code belongs with the rest.
fn config_text(traced: Traced, listen: SocketAddr, upstream: SocketAddr, audit: &Path) -> String {
    let audit = audit.display().to_string();
    match traced {
        Traced::Guarded => gateway_config(listen, upstream, &audit, TOOL_SELECTION_PLUGIN, ""),
        Traced::Plain => gateway_config(listen, upstream, "off", "", ""),
        Traced::Policies => gateway_config(
            listen,
            upstream,
            &audit,
            &format!("{TOOL_SELECTION_PLUGIN}{OTHER_POLICIES}"),
            PERMISSIONS,
        ),
    }
}
