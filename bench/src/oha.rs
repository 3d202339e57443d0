//! The fixed-rate load generator: finds `oha` (installing it with `cargo install` when missing),
//! runs it against one target, and reads its JSON report. oha's `-q RATE --latency-correction`
//! measures each request from when it was due, not when it was sent, so a stall is not hidden
//! (coordinated omission).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;

/// Where oha is, installing it first when it is neither on PATH nor in ~/.cargo/bin.
pub fn find_or_install() -> Result<PathBuf, String> {
    if let Some(found) = find() {
        return Ok(found);
    }
    eprintln!("== oha not found: cargo install oha --locked (several minutes on 2 cores)");
    // oha 1.16 does not compile without its default TLS feature, so the defaults it is.
    let status = std::process::Command::new("cargo")
        .args(["install", "oha", "--locked"])
        .status()
        .map_err(|error| format!("cannot run cargo install: {error}"))?;
    match find() {
        Some(found) if status.success() => Ok(found),
        _ => Err("oha could not be installed (cargo install oha --locked)".to_owned()),
    }
}

fn find() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("oha"))
                .collect()
        })
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("CARGO_HOME") {
        candidates.push(Path::new(&home).join("bin/oha"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(Path::new(&home).join(".cargo/bin/oha"));
    }
    candidates.into_iter().find(|candidate| {
        std::process::Command::new(candidate)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    })
}

/// `oha --version`, for the report.
pub fn version(oha: &Path) -> String {
    std::process::Command::new(oha)
        .arg("--version")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// One oha run.
#[derive(Debug, Clone)]
pub struct Run<'a> {
    pub address: SocketAddr,
    pub path: &'a str,
    pub body_file: &'a Path,
    pub headers: &'a [(&'a str, &'a str)],
    pub connections: usize,
    pub duration: Duration,
    /// Fixed rate (requests per second), or as fast as possible.
    pub rate: Option<u32>,
}

/// What oha measured.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// 200 answers per second over the run.
    pub ok_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub ok: u64,
    /// Answers other than 200, and failed requests (except those cut by the deadline).
    pub not_ok: u64,
    pub problems: Vec<String>,
}

#[derive(Deserialize)]
struct Json {
    summary: Summary,
    metrics: Metrics,
    #[serde(rename = "statusCodeDistribution", default)]
    statuses: BTreeMap<String, u64>,
    #[serde(rename = "errorDistribution", default)]
    errors: BTreeMap<String, u64>,
}

#[derive(Deserialize)]
struct Summary {
    /// Seconds.
    total: f64,
}

#[derive(Deserialize)]
struct Metrics {
    latency_ms: Latency,
}

#[derive(Deserialize)]
struct Latency {
    p50: f64,
    p99: f64,
}

/// Runs oha to completion (it stops itself at the duration; a kill guards against a hang).
pub async fn run(oha: &Path, run: &Run<'_>) -> Result<Report, String> {
    let mut command = tokio::process::Command::new(oha);
    command
        .arg(format!("http://{}{}", run.address, run.path))
        .args(["--no-tui", "--output-format", "json", "-m", "POST"])
        .args(["-T", "application/json"])
        .arg("-D")
        .arg(run.body_file)
        .args(["-c", &run.connections.to_string()])
        .args(["-z", &format!("{}ms", run.duration.as_millis())]);
    for (name, value) in run.headers {
        command.args(["-H", &format!("{name}: {value}")]);
    }
    if let Some(rate) = run.rate {
        command.args(["-q", &rate.to_string(), "--latency-correction"]);
    }
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command
        .spawn()
        .map_err(|error| format!("cannot start oha: {error}"))?;
    let limit = run.duration + Duration::from_secs(30);
    let output = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .map_err(|_| format!("oha did not finish within {limit:?}"))?
        .map_err(|error| format!("oha: {error}"))?;
    if !output.status.success() {
        return Err(format!(
            "oha failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    parse(&output.stdout)
}

fn parse(stdout: &[u8]) -> Result<Report, String> {
    let json: Json = serde_json::from_slice(stdout).map_err(|error| {
        format!(
            "oha's report is not the expected JSON ({error}): {}",
            String::from_utf8_lossy(&stdout[..stdout.len().min(400)])
        )
    })?;
    let ok = json.statuses.get("200").copied().unwrap_or(0);
    let mut problems = Vec::new();
    let mut not_ok = 0;
    for (status, count) in &json.statuses {
        if status != "200" {
            not_ok += count;
            problems.push(format!("{count}× status {status}"));
        }
    }
    for (error, count) in &json.errors {
        // Requests in flight when the run's time is up are cut by oha itself.
        if !error.contains("deadline") {
            not_ok += count;
            problems.push(format!("{count}× {error}"));
        }
    }
    Ok(Report {
        ok_per_sec: ok as f64 / json.summary.total.max(1e-9),
        p50_ms: json.metrics.latency_ms.p50,
        p99_ms: json.metrics.latency_ms.p99,
        ok,
        not_ok,
        problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_counts_only_200s_and_ignores_deadline_cuts() {
        let json = br#"{"summary":{"total":2.0,"successRate":1.0},
            "metrics":{"success_rate":1.0,"requests_per_sec":5.0,
              "latency_ms":{"min":0.1,"mean":0.2,"p50":0.2,"p95":0.3,"p99":0.4,"max":0.9}},
            "statusCodeDistribution":{"200":8,"403":2},
            "errorDistribution":{"aborted due to deadline":3}}"#;
        let report = parse(json).expect("parses");
        assert_eq!(report.ok, 8);
        assert_eq!(report.not_ok, 2);
        assert_eq!(report.ok_per_sec, 4.0);
        assert_eq!((report.p50_ms, report.p99_ms), (0.2, 0.4));
        assert_eq!(report.problems, ["2× status 403"]);
    }
}
