//! The benchmark driver, one command for the whole of issue 6's measurements:
//! `cargo run --release -p toolgate-bench --bin loadbench [-- OPTIONS]`. It builds toolgate and
//! the upstream with the `dist` profile (what ships: fat LTO, the hot-function link order,
//! refused when that list is stale), starts upstream, nginx and toolgate on loopback, runs the phases
//! (table, curves, streams, profile, criterion), writes bench/RESULTS.md and
//! bench/results/latest.json, prints the markdown, and stops everything it started.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::signal::unix::{SignalKind, signal};
use toolgate_bench::client::{self, CHAT_COMPLETIONS, Shot, percentile_of};
use toolgate_bench::procs::{
    self, TempDir, cpu_ns, family_cpu_ns, family_kernel_cpu_ns, status_kib,
};
use toolgate_bench::report::{
    CriterionResult, Curve, CurvePoint, DelayResult, FixedRate, Measure, Results, RssResult,
    TargetResult,
};
use toolgate_bench::stack::{self, Gateway, Server};
use toolgate_bench::workload::{self, AGENT_TURN_BYTES, RequestSpec};
use toolgate_bench::{dist, oha};

const PHASES: [&str; 5] = ["table", "curves", "streams", "profile", "criterion"];
/// The table's rows, by key, in the order they run.
const ROWS: [&str; 19] = [
    "a", "b", "h", "g", "c", "d", "c50", "d50", "h50t", "c50t", "d50t", "h200t", "c200t", "d200t",
    "a'", "b'", "h'", "c'", "e",
];
const USAGE: &str =
    "loadbench [--only PHASES] [--skip PHASES] [--rows KEYS] [--duration SECS] [--fixed-duration SECS]
          [--rounds N] [--curve-duration SECS] [--quick] [--profile dist|release] [--no-build]
          [--out FILE] | --bodies DIR
PHASES: a comma-separated list of table, curves, streams, profile, criterion (default: all).
--rows             only these rows of the table, a comma-separated list of their keys
                   (a,b,h,g,c,d,c50,d50,h50t,c50t,d50t,h200t,c200t,d200t,a',b',h',c',e; default all)
--duration         seconds of each saturation run of the table (default 8)
--fixed-duration   seconds of each fixed-rate run of the table (default 5)
--rounds           rounds of saturation and of fixed-rate runs, each over every target
                   (default 3; a row reports its median saturation round)
--curve-duration   seconds of each closed-loop curve point (default 2.5)
--quick            short runs, to check the setup (2 s, 1 s and 1 round)
--profile          the build measured: dist (default, what ships, the run of record) or
                   release (a quicker build, to check a change's direction; no hot-function order)
--no-build         use the binaries of that profile already built
--out              where the markdown goes (default bench/RESULTS.md); given, the raw JSON
                   and the profiles go beside it instead of into bench/results/
--bodies DIR       only write the request bodies the runs send into DIR (for runs by hand)";

struct Options {
    phases: Vec<String>,
    /// The table's rows to run, by key; empty: all.
    rows: Vec<String>,
    /// `dist` or `release`.
    profile: String,
    duration: Duration,
    fixed_duration: Duration,
    rounds: usize,
    curve_duration: Duration,
    build: bool,
    out: PathBuf,
    /// Where the raw JSON (`latest.json`) and the profiles go: bench/results, or beside `--out`.
    raw_dir: PathBuf,
    /// Only write the request bodies here.
    bodies: Option<PathBuf>,
    args: Vec<String>,
}

fn options() -> Result<Options, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut options = Options {
        phases: PHASES.iter().map(|phase| (*phase).to_owned()).collect(),
        rows: Vec::new(),
        profile: "dist".to_owned(),
        duration: Duration::from_secs(8),
        fixed_duration: Duration::from_secs(5),
        rounds: 3,
        curve_duration: Duration::from_millis(2500),
        build: true,
        out: bench_dir().join("RESULTS.md"),
        raw_dir: bench_dir().join("results"),
        bodies: None,
        args: args.clone(),
    };
    let mut args = args.into_iter();
    let seconds = |value: Option<String>, name: &str| -> Result<Duration, String> {
        value
            .and_then(|text| text.parse::<f64>().ok())
            .filter(|secs| *secs > 0.0 && *secs <= 600.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("{name} needs seconds between 0 and 600"))
    };
    let phases = |value: Option<String>| -> Result<Vec<String>, String> {
        let list: Vec<String> = value
            .unwrap_or_default()
            .split(',')
            .map(|phase| phase.trim().to_owned())
            .collect();
        match list.iter().find(|phase| !PHASES.contains(&phase.as_str())) {
            Some(unknown) => Err(format!("unknown phase '{unknown}'\n{USAGE}")),
            None => Ok(list),
        }
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--only" => options.phases = phases(args.next())?,
            "--skip" => {
                let skipped = phases(args.next())?;
                options.phases.retain(|phase| !skipped.contains(phase));
            }
            "--rows" => {
                options.rows = args
                    .next()
                    .ok_or("--rows needs a list of row keys")?
                    .split(',')
                    .map(|key| key.trim().to_owned())
                    .filter(|key| !key.is_empty())
                    .collect();
                if let Some(unknown) = options
                    .rows
                    .iter()
                    .find(|key| !ROWS.contains(&key.as_str()))
                {
                    return Err(format!("unknown row '{unknown}'\n{USAGE}"));
                }
            }
            "--profile" => {
                options.profile = args
                    .next()
                    .filter(|profile| profile == "dist" || profile == "release")
                    .ok_or("--profile needs dist or release")?;
            }
            "--duration" => options.duration = seconds(args.next(), "--duration")?,
            "--fixed-duration" => {
                options.fixed_duration = seconds(args.next(), "--fixed-duration")?;
            }
            "--rounds" => {
                options.rounds = args
                    .next()
                    .and_then(|text| text.parse::<usize>().ok())
                    .filter(|rounds| (1..=20).contains(rounds))
                    .ok_or("--rounds needs a count between 1 and 20")?;
            }
            "--curve-duration" => {
                options.curve_duration = seconds(args.next(), "--curve-duration")?;
            }
            "--quick" => {
                options.duration = Duration::from_secs(2);
                options.fixed_duration = Duration::from_secs(1);
                options.rounds = 1;
                options.curve_duration = Duration::from_secs(1);
            }
            "--no-build" => options.build = false,
            "--out" => {
                options.out = args.next().map(PathBuf::from).ok_or("--out needs a file")?;
                // A run written elsewhere must not overwrite the committed raw results.
                options.raw_dir = match options.out.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
                    _ => PathBuf::from("."),
                };
            }
            "--bodies" => {
                options.bodies = Some(
                    args.next()
                        .map(PathBuf::from)
                        .ok_or("--bodies needs a directory")?,
                );
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument '{other}'\n{USAGE}")),
        }
    }
    Ok(options)
}

/// The request bodies of every run, named after it, for measurements by hand.
fn write_bodies(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut specs = vec![
        ("request.json", RequestSpec::default()),
        (
            "request-stream.json",
            RequestSpec {
                stream: true,
                ..RequestSpec::default()
            },
        ),
    ];
    let tools = [1, 100, 1000].map(|count| (count, format!("request-{count}-tools.json")));
    for (count, name) in &tools {
        specs.push((
            name,
            RequestSpec {
                tools: *count,
                ..RequestSpec::default()
            },
        ));
    }
    let sizes = [1_000, 10_000, 100_000, 1_000_000]
        .map(|bytes| (bytes, format!("request-{bytes}-bytes-of-messages.json")));
    for (bytes, name) in &sizes {
        specs.push((
            name,
            RequestSpec {
                message_bytes: *bytes,
                ..RequestSpec::default()
            },
        ));
    }
    let agent = AGENT_TURN_BYTES.map(|bytes| (bytes, agent_turns_file(bytes)));
    for (bytes, name) in &agent {
        specs.push((
            name,
            RequestSpec {
                agent_turn_bytes: *bytes,
                ..RequestSpec::default()
            },
        ));
    }
    for (name, spec) in specs {
        std::fs::write(dir.join(name), workload::request_body(spec))?;
    }
    Ok(())
}

/// The file of the table's request with `bytes` of agent turns, as bench-upstream names it too.
fn agent_turns_file(bytes: usize) -> String {
    format!("request-agent-turns-{}k.json", bytes / 1000)
}

fn bench_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn workspace_dir() -> PathBuf {
    bench_dir()
        .parent()
        .map_or_else(bench_dir, Path::to_path_buf)
}

fn target_dir() -> PathBuf {
    dist::target_dir(&workspace_dir())
}

fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    if let Some(dir) = &options.bodies {
        return match write_bodies(dir) {
            Ok(()) => {
                eprintln!("request bodies written to {}", dir.display());
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("{}: {error}", dir.display());
                ExitCode::FAILURE
            }
        };
    }
    let fds = procs::raise_fd_limit();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    // The run is this `block_on` future, polled on the main thread: children are spawned from
    // it (see `Process::start`), and on a signal it is dropped, which stops every child.
    let outcome = runtime.block_on(async {
        tokio::select! {
            outcome = run(options, fds) => outcome,
            signal = interrupted() => Err(format!("interrupted by {signal}; everything started was stopped")),
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("loadbench: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn interrupted() -> &'static str {
    let (Ok(mut terminate), Ok(mut interrupt)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    }
}

fn step(message: &str) {
    eprintln!("== {message}");
}

/// The table's request with an agent's turns, and the file it is sent from.
struct AgentBody {
    body: Bytes,
    file: PathBuf,
}

/// The servers of a run and the bodies they are sent.
/// Fields drop in order: the servers stop before their directory is removed.
struct Bench {
    toolgate: PathBuf,
    upstream: Server,
    nginx: Option<Server>,
    hyper_hop: Server,
    /// The bare hyper hop with the least guard in it.
    least_guard_hop: Server,
    plain: Server,
    guard: Server,
    body: Bytes,
    stream_body: Bytes,
    body_file: PathBuf,
    stream_body_file: PathBuf,
    /// The table's request with 50 KB more conversation.
    history_body_file: PathBuf,
    /// The table's request with 50 KB and 200 KB of agent turns (escaped JSON tool results):
    /// what working agents send.
    agent_bodies: [AgentBody; 2],
    dir: TempDir,
}

async fn run(options: Options, fds: u64) -> Result<(), String> {
    let root = workspace_dir();
    let started = Instant::now();
    let wants = |phase: &str| options.phases.iter().any(|wanted| wanted == phase);
    let build_profile = options.profile.as_str();
    if options.build {
        step(&format!(
            "cargo build --profile {build_profile} -p toolgate --bin toolgate -p toolgate-bench --bin bench-upstream --bin hyper-hop{}",
            if build_profile == "dist" {
                " (TOOLGATE_HOT_FUNCTIONS=on)"
            } else {
                ""
            }
        ));
        dist::build_profile(
            &root,
            build_profile,
            &[
                ("toolgate", "toolgate"),
                ("toolgate-bench", "bench-upstream"),
                ("toolgate-bench", "hyper-hop"),
            ],
        )?;
    }
    let dist_dir = target_dir().join(build_profile);
    let toolgate = dist_dir.join("toolgate");
    let upstream_binary = dist_dir.join("bench-upstream");
    let hyper_hop_binary = dist_dir.join("hyper-hop");
    for binary in [&toolgate, &upstream_binary, &hyper_hop_binary] {
        if !binary.exists() {
            return Err(format!(
                "{} is missing: run without --no-build",
                binary.display()
            ));
        }
    }
    if build_profile == "dist" {
        let hot = dist::check_hot_functions(&root, &toolgate)?;
        step(&format!(
            "{}: {} of {} listed functions found in the binary",
            dist::HOT_FUNCTIONS,
            hot.found,
            hot.listed
        ));
    }
    let oha = if wants("table") || wants("profile") {
        Some(oha::find_or_install()?)
    } else {
        None
    };
    let nginx_binary = stack::nginx_binary()?;

    let mut results = Results {
        command: std::iter::once(
            "cargo run --release -p toolgate-bench --bin loadbench".to_owned(),
        )
        .chain((!options.args.is_empty()).then(|| format!("-- {}", options.args.join(" "))))
        .collect::<Vec<_>>()
        .join(" "),
        machine: machine(&nginx_binary, oha.as_deref(), &root, build_profile),
        ..Results::default()
    };
    let body = workload::request_body(RequestSpec::default());
    let stream_body = workload::request_body(RequestSpec {
        stream: true,
        ..RequestSpec::default()
    });
    let request_text = format!(
        "{} bytes, 10 declared tools with schemas; answer: 2 tool calls ({} bytes JSON; streamed as {} SSE events)",
        body.len(),
        workload::completion(workload::AnswerSpec::default()).len(),
        workload::stream_events(workload::AnswerSpec::default()).len(),
    );
    results.settings = vec![
        ("phases".into(), options.phases.join(", ")),
        (
            "table: saturation".into(),
            format!(
                "{:?} per target, 64 connections, HTTP/1.1 keep-alive, after a 2 s warm-up; {} rounds each over every target, the median round reported",
                options.duration, options.rounds
            ),
        ),
        (
            "table: fixed rates".into(),
            format!(
                "{:?} per run, 64 connections, {} rounds each over every target",
                options.fixed_duration, options.rounds
            ),
        ),
        (
            "curves: each point".into(),
            format!(
                "{:?} closed loop, 8 connections, after a 0.5 s warm-up",
                options.curve_duration
            ),
        ),
        ("request (table)".into(), request_text),
        (
            "requests with agent turns (h50t–d200t)".into(),
            AGENT_TURN_BYTES
                .map(|bytes| {
                    let body = workload::request_body(RequestSpec {
                        agent_turn_bytes: bytes,
                        ..RequestSpec::default()
                    });
                    format!("+{} KB: {} bytes", bytes / 1000, body.len())
                })
                .join(", ")
                + "; the table's request with an agent's calls and their results, JSON documents in strings (search results, rows, source and JSON files read whole)",
        ),
        ("open-file limit".into(), fds.to_string()),
    ];

    let dir = TempDir::new("toolgate-bench").map_err(|error| error.to_string())?;
    step(
        "starting the upstream, nginx, the bare hyper hop (plain and with the least guard) and toolgate (plain and tool_selection)",
    );
    let upstream = stack::upstream(&upstream_binary, &dir.0)?;
    let nginx = stack::nginx(&dir.0, upstream.address)?;
    let hyper_hop = stack::hyper_hop(&hyper_hop_binary, &dir.0, upstream.address, false)?;
    let least_guard_hop = stack::hyper_hop(&hyper_hop_binary, &dir.0, upstream.address, true)?;
    let plain = stack::toolgate(
        &toolgate,
        &dir.0,
        "toolgate-plain",
        Gateway::Plain,
        upstream.address,
    )?;
    let guard = stack::toolgate(
        &toolgate,
        &dir.0,
        "toolgate-guard",
        Gateway::Guarded,
        upstream.address,
    )?;
    let body_file = dir.0.join("request.json");
    let stream_body_file = dir.0.join("request-stream.json");
    std::fs::write(&body_file, &body).map_err(|error| error.to_string())?;
    std::fs::write(&stream_body_file, &stream_body).map_err(|error| error.to_string())?;
    let history_body_file = dir.0.join("request-history.json");
    std::fs::write(
        &history_body_file,
        workload::request_body(RequestSpec {
            message_bytes: workload::HISTORY_BYTES,
            ..RequestSpec::default()
        }),
    )
    .map_err(|error| error.to_string())?;
    let agent_bodies = AGENT_TURN_BYTES.map(|bytes| {
        let body = workload::request_body(RequestSpec {
            agent_turn_bytes: bytes,
            ..RequestSpec::default()
        });
        AgentBody {
            file: dir.0.join(agent_turns_file(bytes)),
            body,
        }
    });
    for agent in &agent_bodies {
        std::fs::write(&agent.file, &agent.body).map_err(|error| error.to_string())?;
    }
    let bench = Bench {
        toolgate,
        upstream,
        nginx: Some(nginx),
        hyper_hop,
        least_guard_hop,
        plain,
        guard,
        body,
        stream_body,
        body_file,
        stream_body_file,
        history_body_file,
        agent_bodies,
        dir,
    };
    results.checks = sanity(&bench).await?;

    let (out, raw_dir) = (options.out.clone(), options.raw_dir.clone());
    let save = |results: &Results| {
        if let Err(error) = write_results(results, &out, &raw_dir) {
            eprintln!("cannot write the results: {error}");
        }
    };
    if let (true, Some(oha)) = (wants("table"), &oha) {
        step("table: saturation and fixed rates, targets (a)–(e)");
        let durations = TableDurations {
            saturation: options.duration,
            fixed: options.fixed_duration,
            rounds: options.rounds,
        };
        match table(&bench, oha, &durations, &options.rows, &mut results).await {
            Ok(()) => {}
            Err(error) => results
                .notes
                .push(format!("the table phase failed: {error}")),
        }
        save(&results);
    }
    if wants("curves") {
        step("curves: declared tools, request size, tool calls");
        results.curves = curves(&bench, options.curve_duration).await;
        save(&results);
    }
    if wants("streams") {
        step("streams: time a text delta spends in each hop");
        results.delays = delays(&bench).await;
        step("streams: peak RSS with 1,000 concurrent streams");
        results.rss = rss(&bench, &upstream_binary).await;
        save(&results);
    }
    if let (true, Some(oha)) = (wants("profile"), &oha) {
        step("profile: perf record of toolgate (tool_selection) under saturation");
        match profile(&bench, oha, &options.raw_dir).await {
            Ok(profiles) => results.profiles = profiles,
            Err(error) => results.notes.push(format!("no profile: {error}")),
        }
        save(&results);
    }
    drop(bench);
    if wants("criterion") {
        step("criterion: cargo bench (adapters, tool_selection checks)");
        match criterion(&root) {
            Ok(benches) => results.criterion = benches,
            Err(error) => results.notes.push(format!("criterion failed: {error}")),
        }
    }
    results.notes.push(format!(
        "the run took {:.0} s (builds included); load average at the end: {}",
        started.elapsed().as_secs_f64(),
        load_average()
    ));
    save(&results);
    println!("{}", results.markdown());
    eprintln!("== written to {}", options.out.display());
    Ok(())
}

fn write_results(results: &Results, out: &Path, raw: &Path) -> std::io::Result<()> {
    std::fs::write(out, results.markdown())?;
    std::fs::create_dir_all(raw)?;
    let json = serde_json::to_string_pretty(results).map_err(std::io::Error::other)?;
    std::fs::write(raw.join("latest.json"), json)
}

fn command_output(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .map(|output| {
            let text = if output.stdout.is_empty() {
                output.stderr
            } else {
                output.stdout
            };
            String::from_utf8_lossy(&text).trim().to_owned()
        })
        .unwrap_or_else(|error| format!("({program}: {error})"))
}

fn machine(nginx: &Path, oha: Option<&Path>, root: &Path, profile: &str) -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|line| {
            line.strip_prefix("model name")?
                .split_once(':')
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|line| {
            line.strip_prefix("MemTotal:")
                .map(|rest| rest.trim().to_owned())
        })
        .unwrap_or_default();
    let revision = toolgate_bench::revision::of_tree(root);
    vec![
        (
            "date (UTC)".into(),
            command_output("date", &["-u", "+%Y-%m-%d %H:%M"]),
        ),
        ("load average at start".into(), load_average()),
        (
            "nproc".into(),
            std::thread::available_parallelism()
                .map_or(0, |n| n.get())
                .to_string(),
        ),
        ("CPU".into(), model),
        ("memory".into(), memory),
        (
            "kernel".into(),
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_owned(),
        ),
        ("rustc".into(), command_output("rustc", &["-V"])),
        (
            "nginx".into(),
            command_output(&nginx.display().to_string(), &["-v"]),
        ),
        (
            "oha".into(),
            oha.map(oha::version).unwrap_or_else(|| "not used".into()),
        ),
        ("toolgate".into(), revision),
        (
            "profile".into(),
            format!(
                "`{profile}` (toolgate, bench-upstream, hyper-hop{}); the driver: `{}`",
                if profile == "dist" {
                    "; TOOLGATE_HOT_FUNCTIONS=on"
                } else {
                    "; not the shipped build: a check, not the run of record"
                },
                toolgate_bench::revision::own_profile()
            ),
        ),
    ]
}

/// /proc/loadavg's 1, 5 and 15 minute figures: other work on the machine skews every number.
fn load_average() -> String {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn shot(address: SocketAddr, body: &Bytes, headers: &[(&'static str, String)]) -> Arc<Shot> {
    let headers: Vec<(&'static str, &str)> = headers
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    Arc::new(Shot::chat_completion(address, body, &headers))
}

/// Before measuring: every target answers with the calls, and the guard really guards (an
/// undeclared tool is blocked, plain JSON and streamed), so the numbers are of the real path.
async fn sanity(bench: &Bench) -> Result<Vec<String>, String> {
    let mut checks = Vec::new();
    let nginx = bench.nginx.as_ref().map(|server| server.address);
    let targets = [
        ("direct", Some(bench.upstream.address)),
        ("nginx", nginx),
        ("bare hyper hop", Some(bench.hyper_hop.address)),
        ("toolgate plain", Some(bench.plain.address)),
        ("toolgate tool_selection", Some(bench.guard.address)),
    ];
    for (name, address) in targets {
        let Some(address) = address else { continue };
        for (body, streamed) in [(&bench.body, false), (&bench.stream_body, true)] {
            let (status, answer) = client::once(&shot(address, body, &[])).await?;
            let expected: &[u8] = if streamed {
                b"data: [DONE]"
            } else {
                b"\"tool_calls\""
            };
            if status != 200 || memchr::memmem::find(&answer, expected).is_none() {
                return Err(format!(
                    "{name} ({}) answered {status}: {}",
                    if streamed { "streamed" } else { "JSON" },
                    String::from_utf8_lossy(&answer[..answer.len().min(400)])
                ));
            }
        }
    }
    checks.push(
        "every target answers 200 with the 2 tool calls, as JSON and as SSE ending in [DONE]"
            .to_owned(),
    );
    let hops = [
        ("bare hyper hop", bench.hyper_hop.address),
        ("toolgate plain", bench.plain.address),
        ("toolgate tool_selection", bench.guard.address),
    ];
    for (name, address) in hops {
        for agent in &bench.agent_bodies {
            let (status, answer) = client::once(&shot(address, &agent.body, &[])).await?;
            if status != 200 || memchr::memmem::find(&answer, b"\"tool_calls\"").is_none() {
                return Err(format!(
                    "{name} answered {status} to the request with {} bytes of agent turns: {}",
                    agent.body.len(),
                    String::from_utf8_lossy(&answer[..answer.len().min(400)])
                ));
            }
        }
    }
    checks.push(format!(
        "the bare hyper hop and toolgate (plain, tool_selection) answer 200 with the 2 tool calls to the requests with agent turns ({} bytes)",
        bench
            .agent_bodies
            .iter()
            .map(|agent| agent.body.len().to_string())
            .collect::<Vec<_>>()
            .join(" and ")
    ));
    let undeclared = [("x-bench-undeclared", "1".to_owned())];
    // The least guard reads JSON answers only: it runs in the JSON rows.
    let least_guard = bench.least_guard_hop.address;
    let (passed, answer) = client::once(&shot(least_guard, &bench.body, &[])).await?;
    let (blocked, _) = client::once(&shot(least_guard, &bench.body, &undeclared)).await?;
    if passed != 200 || memchr::memmem::find(&answer, b"\"tool_calls\"").is_none() || blocked != 403
    {
        return Err(format!(
            "the least guard hop answered {passed} to the table's request and {blocked} to an undeclared tool"
        ));
    }
    checks.push(
        "the bare hyper hop with the least guard answers 200 with the 2 tool calls as JSON and blocks a call to an undeclared tool (403)".to_owned(),
    );
    let (status, answer) =
        client::once(&shot(bench.guard.address, &bench.body, &undeclared)).await?;
    if status != 403 || memchr::memmem::find(&answer, b"undeclared_tool").is_none() {
        return Err(format!(
            "tool_selection did not block an undeclared tool: {status}"
        ));
    }
    let (status, answer) =
        client::once(&shot(bench.guard.address, &bench.stream_body, &undeclared)).await?;
    let blocked_in_stream = memchr::memmem::find(&answer, b"undeclared_tool").is_some()
        && memchr::memmem::find(&answer, b"[DONE]").is_none();
    if !blocked_in_stream {
        return Err(format!(
            "tool_selection did not block an undeclared tool in a stream ({status})"
        ));
    }
    let (status, _) = client::once(&shot(bench.plain.address, &bench.body, &undeclared)).await?;
    if status != 200 {
        return Err(format!(
            "toolgate without plugins answered {status} to an undeclared tool"
        ));
    }
    checks.push(
        "toolgate with tool_selection blocks a call to an undeclared tool (403 as JSON; an error event and no [DONE] when streamed), toolgate without plugins lets it through".to_owned(),
    );
    Ok(checks)
}

/// One row of the table: warm-up, saturation, fixed rates.
struct TableTarget<'a> {
    key: &'a str,
    label: &'a str,
    address: SocketAddr,
    streamed: bool,
    /// What the row sends beyond the table's request.
    extra: Extra,
    /// Processes whose CPU is the hop's.
    hop: Option<u32>,
}

/// What a row of the table sends beyond its request.
#[derive(Clone, Copy)]
enum Extra {
    Nothing,
    /// [`workload::HISTORY_BYTES`] more conversation, prose.
    Prose,
    /// The `n`th of [`AGENT_TURN_BYTES`] of agent turns.
    AgentTurns(usize),
}

/// How long the table's runs last.
struct TableDurations {
    saturation: Duration,
    fixed: Duration,
    rounds: usize,
}

/// One saturation run of a target: what oha saw, the hop's CPU per request (all, in the kernel)
/// and the upstream's.
struct SaturationRound {
    report: oha::Report,
    hop: Option<(f64, f64)>,
    upstream_cpu_us: f64,
}

/// The rates of the table's fixed-rate runs.
const FIXED_RATES: [u32; 2] = [1000, 5000];

/// Saturation and CPU per request, then the fixed-rate runs, each in rounds over every target,
/// so that a slow spell of the machine lands on all targets alike rather than on whichever ran
/// during it.
async fn table(
    bench: &Bench,
    oha: &Path,
    durations: &TableDurations,
    rows: &[String],
    results: &mut Results,
) -> Result<(), String> {
    let nginx = bench.nginx.as_ref().ok_or("nginx is not running")?;
    let target = |key, label, server: Option<&Server>, streamed, extra| TableTarget {
        key,
        label,
        address: server.map_or(bench.upstream.address, |server| server.address),
        streamed,
        extra,
        hop: server.map(Server::pid),
    };
    let (hop, plain, guard) = (&bench.hyper_hop, &bench.plain, &bench.guard);
    let (none, prose) = (Extra::Nothing, Extra::Prose);
    let (turns_50, turns_200) = (Extra::AgentTurns(0), Extra::AgentTurns(1));
    let mut targets = vec![
        target("a", "direct", None, false, none),
        target("b", "nginx proxy_pass", Some(nginx), false, none),
        target("h", "bare hyper hop", Some(hop), false, none),
        target(
            "g",
            "bare hyper hop, least guard",
            Some(&bench.least_guard_hop),
            false,
            none,
        ),
        target("c", "toolgate, no plugins", Some(plain), false, none),
        target("d", "toolgate, tool_selection", Some(guard), false, none),
        target(
            "c50",
            "toolgate, no plugins, +50 KB history",
            Some(plain),
            false,
            prose,
        ),
        target(
            "d50",
            "toolgate, tool_selection, +50 KB history",
            Some(guard),
            false,
            prose,
        ),
        target(
            "h50t",
            "bare hyper hop, +50 KB agent turns",
            Some(hop),
            false,
            turns_50,
        ),
        target(
            "c50t",
            "toolgate, no plugins, +50 KB agent turns",
            Some(plain),
            false,
            turns_50,
        ),
        target(
            "d50t",
            "toolgate, tool_selection, +50 KB agent turns",
            Some(guard),
            false,
            turns_50,
        ),
        target(
            "h200t",
            "bare hyper hop, +200 KB agent turns",
            Some(hop),
            false,
            turns_200,
        ),
        target(
            "c200t",
            "toolgate, no plugins, +200 KB agent turns",
            Some(plain),
            false,
            turns_200,
        ),
        target(
            "d200t",
            "toolgate, tool_selection, +200 KB agent turns",
            Some(guard),
            false,
            turns_200,
        ),
        target("a'", "direct, streamed", None, true, none),
        target("b'", "nginx, streamed", Some(nginx), true, none),
        target("h'", "bare hyper hop, streamed", Some(hop), true, none),
        target(
            "c'",
            "toolgate, no plugins, streamed",
            Some(plain),
            true,
            none,
        ),
        target(
            "e",
            "toolgate, tool_selection, streamed",
            Some(guard),
            true,
            none,
        ),
    ];
    debug_assert!(targets.iter().map(|target| target.key).eq(ROWS));
    if !rows.is_empty() {
        targets.retain(|target| rows.iter().any(|key| key == target.key));
    }
    let run = |target: &TableTarget, rate: Option<u32>, duration: Duration| oha::Run {
        address: target.address,
        path: CHAT_COMPLETIONS,
        body_file: match target.extra {
            Extra::Prose => &bench.history_body_file,
            Extra::AgentTurns(n) => &bench.agent_bodies[n].file,
            Extra::Nothing if target.streamed => &bench.stream_body_file,
            Extra::Nothing => &bench.body_file,
        },
        headers: &[],
        connections: 64,
        duration,
        rate,
    };
    // Saturation in rounds too, each over every target: this machine's neighbours move a single
    // run by tens of percent, and a ratio between rows run minutes apart would read that. Each
    // row reports its median round (by requests per second), whole.
    let mut saturation_rounds: Vec<Vec<SaturationRound>> =
        targets.iter().map(|_| Vec::new()).collect();
    for round in 1..=durations.rounds {
        eprintln!("   saturation, round {round} of {}", durations.rounds);
        for (target, rounds) in targets.iter().zip(&mut saturation_rounds) {
            eprintln!("   ({}) {}: saturation", target.key, target.label);
            oha::run(oha, &run(target, None, Duration::from_secs(2))).await?;
            let hop_before = target
                .hop
                .map(|pid| (family_cpu_ns(pid), family_kernel_cpu_ns(pid)));
            let upstream_before = cpu_ns(bench.upstream.pid());
            let report = oha::run(oha, &run(target, None, durations.saturation)).await?;
            let served = (report.ok + report.not_ok).max(1) as f64;
            let hop = target.hop.zip(hop_before).map(|(pid, (cpu, kernel))| {
                (
                    (family_cpu_ns(pid) - cpu) as f64 / served / 1e3,
                    family_kernel_cpu_ns(pid).saturating_sub(kernel) as f64 / served / 1e3,
                )
            });
            let upstream_cpu_us =
                (cpu_ns(bench.upstream.pid()) - upstream_before) as f64 / served / 1e3;
            rounds.push(SaturationRound {
                report,
                hop,
                upstream_cpu_us,
            });
        }
    }
    let first_row = results.table.len();
    for (target, mut rounds) in targets.iter().zip(saturation_rounds) {
        let hop_cpu_rounds_us = rounds
            .iter()
            .filter_map(|round| round.hop.map(|(cpu, _)| cpu))
            .collect();
        rounds.sort_by(|a, b| a.report.ok_per_sec.total_cmp(&b.report.ok_per_sec));
        let median = rounds.swap_remove(rounds.len() / 2);
        results.table.push(TargetResult {
            key: target.key.to_owned(),
            label: target.label.to_owned(),
            streamed: target.streamed,
            saturation: median.report.into(),
            hop_cpu_us: median.hop.map(|(cpu, _)| cpu),
            hop_kernel_us: median.hop.map(|(_, kernel)| kernel),
            hop_cpu_rounds_us,
            upstream_cpu_us: median.upstream_cpu_us,
            fixed: FIXED_RATES
                .iter()
                .map(|&rate| FixedRate {
                    rate,
                    runs: Vec::new(),
                })
                .collect(),
        });
    }
    for round in 1..=durations.rounds {
        eprintln!("   fixed rates, round {round} of {}", durations.rounds);
        for (target, row) in targets.iter().zip(&mut results.table[first_row..]) {
            for fixed in &mut row.fixed {
                let report = oha::run(oha, &run(target, Some(fixed.rate), durations.fixed)).await?;
                fixed.runs.push(report.into());
            }
        }
    }
    Ok(())
}

/// One closed-loop measurement: warm-up, then `duration` with the server's CPU read around it.
async fn measure(shot: Arc<Shot>, server_pid: u32, duration: Duration) -> Measure {
    let _ = client::closed_loop(shot.clone(), 8, Duration::from_millis(500)).await;
    let before = cpu_ns(server_pid);
    let result = client::closed_loop(shot, 8, duration).await;
    let cpu = cpu_ns(server_pid) - before;
    Measure {
        per_sec: result.rate(),
        p50_ms: result.percentile_ms(50.0),
        p99_ms: result.percentile_ms(99.0),
        cpu_us: cpu as f64 / (result.ok + result.failed).max(1) as f64 / 1e3,
        failed: result.failed,
        first_failure: result.first_failure,
    }
}

async fn curve_point(
    bench: &Bench,
    x: String,
    spec: RequestSpec,
    headers: &[(&'static str, String)],
    duration: Duration,
) -> CurvePoint {
    let body = workload::request_body(spec);
    eprintln!("   {x}: {} bytes", body.len());
    let direct = measure(
        shot(bench.upstream.address, &body, headers),
        bench.upstream.pid(),
        duration,
    )
    .await;
    let plain = measure(
        shot(bench.plain.address, &body, headers),
        bench.plain.pid(),
        duration,
    )
    .await;
    let guard = measure(
        shot(bench.guard.address, &body, headers),
        bench.guard.pid(),
        duration,
    )
    .await;
    CurvePoint {
        x,
        request_bytes: body.len(),
        direct,
        plain,
        guard,
    }
}

async fn curves(bench: &Bench, duration: Duration) -> Vec<Curve> {
    let mut tools = Vec::new();
    for count in [1, 10, 100, 1000] {
        let span = [("x-bench-call-span", count.min(10).to_string())];
        let spec = RequestSpec {
            tools: count,
            ..RequestSpec::default()
        };
        tools.push(curve_point(bench, count.to_string(), spec, &span, duration).await);
    }
    let mut sizes = Vec::new();
    for (label, bytes) in [
        ("1 KB", 1_000),
        ("10 KB", 10_000),
        ("100 KB", 100_000),
        ("1 MB", 1_000_000),
    ] {
        let spec = RequestSpec {
            message_bytes: bytes,
            ..RequestSpec::default()
        };
        sizes.push(curve_point(bench, label.to_owned(), spec, &[], duration).await);
    }
    let mut calls = Vec::new();
    for count in [1, 4, 16] {
        let headers = [("x-bench-calls", count.to_string())];
        calls.push(
            curve_point(
                bench,
                count.to_string(),
                RequestSpec::default(),
                &headers,
                duration,
            )
            .await,
        );
    }
    vec![
        Curve {
            title: "Cost per request vs declared tools (2 tool calls, base conversation)".into(),
            axis: "declared tools".into(),
            points: tools,
        },
        Curve {
            title: "Cost per request vs request size (10 tools, 2 calls, conversation padded)"
                .into(),
            axis: "messages".into(),
            points: sizes,
        },
        Curve {
            title: "Cost per request vs tool calls in the answer (10 tools)".into(),
            axis: "tool calls".into(),
            points: calls,
        },
    ]
}

async fn delays(bench: &Bench) -> Vec<DelayResult> {
    let headers = [
        ("x-bench-deltas", "100".to_owned()),
        ("x-bench-interval-us", "5000".to_owned()),
    ];
    let mut targets = vec![("direct", bench.upstream.address)];
    if let Some(nginx) = &bench.nginx {
        targets.push(("nginx proxy_pass", nginx.address));
    }
    targets.push(("toolgate, no plugins", bench.plain.address));
    targets.push(("toolgate, tool_selection", bench.guard.address));
    let mut results = Vec::new();
    for (label, address) in targets {
        let deadline = Instant::now() + Duration::from_secs(30);
        let result =
            client::streams(shot(address, &bench.stream_body, &headers), 20, deadline).await;
        let micros = |percentile: f64| {
            percentile_of(&result.delays_ns, percentile).map_or(f64::NAN, |ns| ns as f64 / 1e3)
        };
        results.push(DelayResult {
            label: label.to_owned(),
            samples: result.delays_ns.len(),
            p50_us: micros(50.0),
            p99_us: micros(99.0),
            max_us: micros(100.0),
            failed: result.failed,
            first_failure: result.first_failure,
        });
    }
    results
}

/// Peak RSS of a fresh toolgate (each kind) relaying 1,000 streams at once, each held open
/// about 4 s by a paced upstream (40 deltas, 100 ms apart).
async fn rss(bench: &Bench, upstream_binary: &Path) -> Vec<RssResult> {
    const STREAMS: usize = 1000;
    let mut results = Vec::new();
    // A fresh upstream as well: the paced streams must not queue behind anything else.
    let upstream = match stack::upstream(upstream_binary, &bench.dir.0) {
        Ok(upstream) => upstream,
        Err(error) => {
            eprintln!("   no upstream for the RSS run: {error}");
            return results;
        }
    };
    // The build keeps mimalloc from asking for transparent huge pages; on a kernel in THP
    // "always" mode only the process-wide switch does, which the second run measures.
    let no_huge_pages: &[(&str, &str)] = &[("MIMALLOC_ALLOW_THP", "0")];
    for (label, kind, env) in [
        ("toolgate, tool_selection", Gateway::Guarded, &[][..]),
        (
            "toolgate, tool_selection, MIMALLOC_ALLOW_THP=0",
            Gateway::Guarded,
            no_huge_pages,
        ),
        ("toolgate, no plugins", Gateway::Plain, &[][..]),
    ] {
        let name = format!("toolgate-rss-{}", results.len());
        let server = match stack::toolgate_with_env(
            &bench.toolgate,
            &bench.dir.0,
            &name,
            kind,
            upstream.address,
            env,
        ) {
            Ok(server) => server,
            Err(error) => {
                eprintln!("   {label}: {error}");
                continue;
            }
        };
        let warm = [("x-bench-deltas", "3".to_owned())];
        let _ = client::once(&shot(server.address, &bench.stream_body, &warm)).await;
        let idle_kib = status_kib(server.pid(), "VmRSS").unwrap_or(0);
        let headers = [
            ("x-bench-deltas", "40".to_owned()),
            ("x-bench-interval-us", "100000".to_owned()),
        ];
        let deadline = Instant::now() + Duration::from_secs(40);
        let streams = client::streams(
            shot(server.address, &bench.stream_body, &headers),
            STREAMS,
            deadline,
        );
        tokio::pin!(streams);
        // VmHWM keeps the peak of all RSS; the anonymous part has no high-water mark of its
        // own, so it is sampled while the streams run.
        let mut peak_anon_kib = 0;
        let result = loop {
            tokio::select! {
                result = &mut streams => break result,
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    let anon = status_kib(server.pid(), "RssAnon").unwrap_or(0);
                    peak_anon_kib = peak_anon_kib.max(anon);
                }
            }
        };
        let peak_kib = status_kib(server.pid(), "VmHWM").unwrap_or(0);
        let file_kib = status_kib(server.pid(), "RssFile").unwrap_or(0);
        eprintln!(
            "   {label}: {} streams completed, peak {} KiB",
            result.completed, peak_kib
        );
        results.push(RssResult {
            label: label.to_owned(),
            streams: STREAMS,
            completed: result.completed,
            failed: result.failed,
            first_failure: result.first_failure,
            idle_kib,
            peak_kib,
            peak_anon_kib,
            file_kib,
        });
    }
    results
}

/// perf samples of the guarded toolgate while oha saturates it, JSON then streamed.
async fn profile(
    bench: &Bench,
    oha: &Path,
    out_dir: &Path,
) -> Result<Vec<(String, String)>, String> {
    let perf = ["/usr/bin/perf", "/usr/local/bin/perf"]
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .ok_or("perf is not installed (apt-get install -y linux-perf)")?;
    std::fs::create_dir_all(out_dir).map_err(|error| error.to_string())?;
    let mut profiles = Vec::new();
    for (name, body_file) in [
        ("json", &bench.body_file),
        ("stream", &bench.stream_body_file),
    ] {
        let data = bench.dir.0.join(format!("perf-{name}.data"));
        let seconds = 8;
        let mut recorder = tokio::process::Command::new(&perf)
            .args(["record", "-q", "-e", "cpu-clock", "-F", "1999", "-o"])
            .arg(&data)
            .args([
                "-p",
                &bench.guard.pid().to_string(),
                "--",
                "sleep",
                &seconds.to_string(),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| format!("cannot run perf: {error}"))?;
        let run = oha::Run {
            address: bench.guard.address,
            path: CHAT_COMPLETIONS,
            body_file,
            headers: &[],
            connections: 64,
            duration: Duration::from_secs(seconds + 1),
            rate: None,
        };
        let load = oha::run(oha, &run).await?;
        let _ = tokio::time::timeout(Duration::from_secs(30), recorder.wait()).await;
        let report = Command::new(&perf)
            .args([
                "report",
                "--stdio",
                "--no-children",
                "--sort",
                "symbol",
                "--percent-limit",
                "0.7",
                "-g",
                "none",
                "-i",
            ])
            .arg(&data)
            .output()
            .map_err(|error| format!("perf report: {error}"))?;
        // perf pads its columns to the terminal it imagines: keep the words only.
        let text: String = String::from_utf8_lossy(&report.stdout)
            .lines()
            .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
            .map(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                let end = words
                    .iter()
                    .rposition(|word| *word != "-")
                    .map_or(0, |i| i + 1);
                format!("{}\n", words[..end].join(" "))
            })
            .collect();
        let top: Vec<&str> = text.lines().take(30).collect();
        std::fs::write(out_dir.join(format!("profile-{name}.txt")), text.as_bytes())
            .map_err(|error| error.to_string())?;
        profiles.push((
            format!(
                "toolgate with tool_selection, {} requests at saturation ({:.0} req/s during the recording); self time by symbol, top entries (full: bench/results/profile-{name}.txt)",
                if name == "json" { "JSON" } else { "streamed" },
                load.ok_per_sec
            ),
            top.join("\n"),
        ));
    }
    Ok(profiles)
}

/// Runs the criterion benches and reads their medians from target/criterion.
fn criterion(root: &Path) -> Result<Vec<CriterionResult>, String> {
    for (package, bench) in [
        ("toolgate-formats", "adapters"),
        ("toolgate-tool-selection", "checks"),
    ] {
        let status = Command::new("cargo")
            .current_dir(root)
            .args(["bench", "-p", package, "--bench", bench])
            .status()
            .map_err(|error| format!("cannot run cargo bench: {error}"))?;
        if !status.success() {
            return Err(format!("cargo bench -p {package} --bench {bench} failed"));
        }
    }
    let mut found = Vec::new();
    collect_estimates(&target_dir().join("criterion"), &mut found);
    found.retain(|bench| {
        bench.id.starts_with("adapters/") || bench.id.starts_with("tool_selection/")
    });
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

fn collect_estimates(dir: &Path, found: &mut Vec<CriterionResult>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if path.file_name().is_some_and(|name| name == "new") {
            if let Some(result) = read_estimate(&path) {
                found.push(result);
            }
        } else if path
            .file_name()
            .is_none_or(|name| name != "base" && name != "change" && name != "report")
        {
            collect_estimates(&path, found);
        }
    }
}

fn read_estimate(dir: &Path) -> Option<CriterionResult> {
    let benchmark: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("benchmark.json")).ok()?).ok()?;
    let estimates: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("estimates.json")).ok()?).ok()?;
    let median = &estimates["median"];
    let throughput = benchmark["throughput"].as_object().and_then(|throughput| {
        let (unit, value) = throughput.iter().next()?;
        Some((unit.to_lowercase(), value.as_f64()?))
    });
    Some(CriterionResult {
        id: benchmark["full_id"].as_str()?.to_owned(),
        median_ns: median["point_estimate"].as_f64()?,
        low_ns: median["confidence_interval"]["lower_bound"].as_f64()?,
        high_ns: median["confidence_interval"]["upper_bound"].as_f64()?,
        throughput,
    })
}
