//! Measures progressive tool disclosure (`tool_disclosure`, issue 43 point 5) on a realistic
//! 200-tool catalog (`toolgate_bench::catalog`), with a scripted model as the upstream
//! (`toolgate_bench::scripted_model`), and prints a markdown report:
//!
//! - **bytes**: what the upstream receives over a whole exchange in which the model loads two
//!   tools (one a turn, then both in one turn) and calls one, with `tool_disclosure` on the
//!   route and without it; per upstream request, the `tools` bytes and the index's.
//! - **CPU**: the gateway process's CPU time per exchange (all threads: `/proc/PID/task/*/
//!   schedstat`, and `/proc/PID/stat` utime+stime as a cross-check), for exchanges without a
//!   discovery round and with one or two, on routes with and without `tool_selection`; the
//!   difference is the CPU of a round. Interleaved rounds, medians reported.
//!
//! ```sh
//! cargo build --release -p toolgate            # the gateway measured (or TOOLGATE_BIN)
//! cargo run --release -p toolgate-bench --bin disclosure -- [--toolgate PATH] \
//!     [--exchanges 2000] [--connections 4] [--rounds 3] [--warmup 200] [--quick] \
//!     [--write-request FILE] [--only gd0,gd1]
//! ```
//!
//! `--only` runs only those kinds of exchange (their ids, in brackets in the report) and no
//! bytes phase: to hold one kind under `perf record -p PID` long enough (`--exchanges 20000`).
//!
//! ```text
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::net::TcpListener;
use toolgate_bench::catalog::{self, Tool};
use toolgate_bench::client::{self, AnswerCheck, Shot};
use toolgate_bench::procs::{self, Process, TempDir, free_port};
use toolgate_bench::scripted_model::{self, CALL_HEADER, LOAD_HEADER, Model, TOGETHER_HEADER};
use toolgate_bench::stack::{TOOL_SELECTION_PLUGIN, gateway_config};

const DISCLOSURE_PLUGIN: &str = "\n[[plugins]]\nname = \"tool_disclosure\"\n";
const START_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest one batch of exchanges may run.
const BATCH_DEADLINE: Duration = Duration::from_secs(600);

struct Options {
    toolgate: PathBuf,
    exchanges: u64,
    connections: usize,
    rounds: usize,
    warmup: u64,
    write_request: Option<PathBuf>,
    /// Only these kinds of exchange (their ids: `gd0,gd1`), and no bytes phase: for profiling.
    only: Option<Vec<String>>,
}

fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("disclosure: {message}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("disclosure: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(&options)) {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("disclosure: {error}");
            ExitCode::FAILURE
        }
    }
}

fn options() -> Result<Options, String> {
    let root = workspace_root();
    let default_binary = std::env::var_os("TOOLGATE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            toolgate_bench::dist::target_dir(&root)
                .join("release")
                .join("toolgate")
        });
    let mut options = Options {
        toolgate: default_binary,
        exchanges: 2000,
        connections: 4,
        rounds: 3,
        warmup: 200,
        write_request: None,
        only: None,
    };
    let mut args = std::env::args().skip(1);
    let number = |value: Option<String>, name: &str| -> Result<u64, String> {
        value
            .and_then(|text| text.parse::<u64>().ok())
            .filter(|number| *number > 0)
            .ok_or_else(|| format!("{name} needs a whole number above 0"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--toolgate" => {
                options.toolgate = PathBuf::from(args.next().ok_or("--toolgate needs a path")?)
            }
            "--exchanges" => options.exchanges = number(args.next(), "--exchanges")?,
            "--connections" => options.connections = number(args.next(), "--connections")? as usize,
            "--rounds" => options.rounds = number(args.next(), "--rounds")? as usize,
            "--warmup" => options.warmup = number(args.next(), "--warmup")?,
            "--quick" => {
                options.exchanges = 200;
                options.rounds = 1;
                options.warmup = 20;
            }
            "--only" => {
                let ids = args.next().ok_or("--only needs kinds, e.g. gd0,gd1")?;
                options.only = Some(ids.split(',').map(str::to_owned).collect());
            }
            "--write-request" => {
                options.write_request = Some(PathBuf::from(
                    args.next().ok_or("--write-request needs a file")?,
                ))
            }
            "-h" | "--help" => {
                return Err("usage: disclosure [--toolgate PATH] [--exchanges N] [--connections C] [--rounds R] [--warmup W] [--quick] [--write-request FILE] [--only KINDS]".to_owned());
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    Ok(options)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// A gateway the driver started.
struct Gateway {
    address: SocketAddr,
    process: Process,
}

fn start_gateway(
    binary: &Path,
    dir: &Path,
    name: &str,
    plugins: &str,
    route: &str,
    audit: &str,
    upstream: SocketAddr,
) -> Result<Gateway, String> {
    let address = free_port().map_err(|error| error.to_string())?;
    let config = dir.join(format!("{name}.toml"));
    std::fs::write(
        &config,
        gateway_config(address, upstream, audit, plugins, route),
    )
    .map_err(|error| error.to_string())?;
    let mut command = Command::new(binary);
    command
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .env("TOOLGATE_LOG", "warn");
    let mut process = Process::start(name, command, dir).map_err(|error| error.to_string())?;
    process.wait_for_port(address, START_TIMEOUT)?;
    Ok(Gateway { address, process })
}

/// The model's script for one exchange, as request headers.
#[derive(Debug, Clone, Copy)]
struct Script {
    load: &'static str,
    together: bool,
    call: &'static str,
}

impl Script {
    fn headers(&self) -> Vec<(&'static str, &'static str)> {
        let mut headers = vec![(CALL_HEADER, self.call)];
        if !self.load.is_empty() {
            headers.push((LOAD_HEADER, self.load));
        }
        if self.together {
            headers.push((TOGETHER_HEADER, "1"));
        }
        headers
    }

    fn shot(&self, address: SocketAddr, body: &Bytes) -> Shot {
        Shot::chat_completion(address, body, &self.headers())
    }

    /// Checks that the client got exactly the call of the script, and no discovery call.
    fn check(&self) -> AnswerCheck {
        let call = self.call;
        Arc::new(move |body: &[u8]| {
            let answer: Value = serde_json::from_slice(body)
                .map_err(|error| format!("the answer is not JSON: {error}"))?;
            let calls = answer["choices"][0]["message"]["tool_calls"]
                .as_array()
                .map(|calls| {
                    calls
                        .iter()
                        .map(|call| call["function"]["name"].as_str().unwrap_or_default())
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            if calls == [call] {
                Ok(())
            } else {
                Err(format!(
                    "the client got calls {calls:?}, not [{call}]: {}",
                    String::from_utf8_lossy(&body[..body.len().min(300)])
                ))
            }
        })
    }
}

const TWO_LOADS: &str = "github_create_issue,slack_post_message";
const CREATE_ISSUE: &str = "github_create_issue";
const WEATHER: &str = "get_weather";

async fn run(options: &Options) -> Result<String, String> {
    if !options.toolgate.exists() {
        return Err(format!(
            "no toolgate at {} (cargo build --release -p toolgate, or --toolgate PATH)",
            options.toolgate.display()
        ));
    }
    let tools = catalog::catalog();
    let body = catalog::request_body(&tools);
    if let Some(path) = &options.write_request {
        std::fs::write(path, &body).map_err(|error| format!("{}: {error}", path.display()))?;
    }
    let dir = TempDir::new("toolgate-disclosure").map_err(|error| error.to_string())?;
    let model = Arc::new(Model::new(&tools));
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|error| error.to_string())?;
    let upstream = listener.local_addr().map_err(|error| error.to_string())?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(scripted_model::serve(listener, model.clone(), async move {
        let _ = stopped.await;
    }));

    let mut report = String::new();
    report.push_str(&machine(options));
    report.push_str(&catalog_section(&tools, &body)?);
    if options.only.is_none() {
        eprintln!("== bytes");
        report.push_str(&bytes_section(options, &dir.0, upstream, &model, &body).await?);
    }
    eprintln!("== CPU");
    report.push_str(&cpu_section(options, &dir.0, upstream, &model, &body).await?);
    let _ = stop.send(());
    let _ = server.await;
    Ok(report)
}

fn machine(options: &Options) -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|line| line.strip_prefix("model name"))
                .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "## Run\n\n- toolgate: `{}`\n- machine: {cores} cores, {cpu}\n- load average at the start: {}\n- {} exchanges per batch, {} connections, {} rounds, {} warm-up exchanges per kind\n\n",
        options.toolgate.display(),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        options.exchanges,
        options.connections,
        options.rounds,
        options.warmup
    )
}

fn catalog_section(tools: &[Tool], body: &Bytes) -> Result<String, String> {
    let declarations: Vec<usize> = tools
        .iter()
        .map(|tool| tool.declaration().to_string().len())
        .collect();
    let tools_bytes = raw_field(body, "tools")?.map_or(0, str::len);
    let properties: Vec<usize> = tools.iter().map(|tool| tool.properties).collect();
    let find = |name: &str| {
        tools
            .iter()
            .find(|tool| tool.name == name)
            .map_or(0, |tool| tool.declaration().to_string().len())
    };
    Ok(format!(
        "## The catalog\n\n{} tools; the client's request is {} bytes, of which `tools` is {} bytes \
         (a declaration is {}–{} bytes, {} on average; {}–{} properties). \
         `get_weather` is {} bytes, `github_create_issue` {}, `slack_post_message` {}.\n\n",
        tools.len(),
        body.len(),
        tools_bytes,
        declarations.iter().min().copied().unwrap_or_default(),
        declarations.iter().max().copied().unwrap_or_default(),
        declarations.iter().sum::<usize>() / declarations.len().max(1),
        properties.iter().min().copied().unwrap_or_default(),
        properties.iter().max().copied().unwrap_or_default(),
        find(WEATHER),
        find(CREATE_ISSUE),
        find("slack_post_message"),
    ))
}

/// A top-level field of a JSON object, as written.
fn raw_field<'a>(body: &'a [u8], field: &str) -> Result<Option<&'a str>, String> {
    let object: std::collections::HashMap<&str, &RawValue> =
        serde_json::from_slice(body).map_err(|error| format!("not a JSON object: {error}"))?;
    Ok(object.get(field).map(|raw| raw.get()))
}

/// One upstream request, taken apart.
struct Sent {
    bytes: usize,
    tools_bytes: usize,
    tools: Vec<String>,
    /// The index tool_disclosure adds to the system prompt (the message's content, unescaped).
    index_bytes: usize,
    index_lines: usize,
    messages: usize,
    /// The results of the discovery calls (`tool` messages' contents, unescaped).
    results_bytes: usize,
}

fn take_apart(body: &[u8]) -> Result<Sent, String> {
    let tools_bytes = raw_field(body, "tools")?.map_or(0, str::len);
    let request: Value =
        serde_json::from_slice(body).map_err(|error| format!("not JSON: {error}"))?;
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let index = messages.iter().find_map(|message| {
        let content = message["content"].as_str()?;
        (message["role"] == "system" && content.starts_with("You can use ")).then_some(content)
    });
    let results_bytes = messages
        .iter()
        .filter(|message| message["role"] == "tool")
        .filter_map(|message| message["content"].as_str())
        .map(str::len)
        .sum();
    Ok(Sent {
        bytes: body.len(),
        tools_bytes,
        tools: scripted_model::declared_names(body)?,
        index_bytes: index.map_or(0, str::len),
        index_lines: index.map_or(0, |index| {
            index.lines().filter(|line| line.starts_with("- ")).count()
        }),
        messages: messages.len(),
        results_bytes,
    })
}

/// One exchange through `gateway`, every upstream request kept.
async fn recorded_exchange(
    gateway: &Gateway,
    model: &Model,
    body: &Bytes,
    script: Script,
) -> Result<(Vec<Sent>, scripted_model::Received), String> {
    model.reset();
    model.record();
    let (status, answer) = client::once(&script.shot(gateway.address, body)).await?;
    let bodies = model.take_recorded();
    let received = model.received();
    if status != http::StatusCode::OK {
        return Err(format!(
            "the exchange answered {status}: {}",
            String::from_utf8_lossy(&answer[..answer.len().min(500)])
        ));
    }
    (script.check())(&answer)?;
    let sent = bodies
        .iter()
        .map(|body| take_apart(body))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((sent, received))
}

/// The `disclosure` of each audit line in a gateway's log, in order.
fn audit_disclosures(log: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|line| line.get("disclosure").cloned())
        .collect()
}

/// The `disclosure` of the audit line after the first `seen`: the gateway writes it once the
/// answer is sent, so it is waited for (up to 3 s).
async fn next_audit_disclosure(log: &Path, seen: usize) -> Option<Value> {
    for _ in 0..150 {
        if let Some(line) = audit_disclosures(log).into_iter().nth(seen) {
            return Some(line);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

async fn bytes_section(
    options: &Options,
    dir: &Path,
    upstream: SocketAddr,
    model: &Model,
    body: &Bytes,
) -> Result<String, String> {
    let both = format!("{TOOL_SELECTION_PLUGIN}{DISCLOSURE_PLUGIN}");
    let plain = start_gateway(
        &options.toolgate,
        dir,
        "bytes-guard",
        TOOL_SELECTION_PLUGIN,
        "",
        "stdout",
        upstream,
    )?;
    let disclosed = start_gateway(
        &options.toolgate,
        dir,
        "bytes-guard-disclosure",
        &both,
        "",
        "stdout",
        upstream,
    )?;
    let conversations = [
        (
            "loads github_create_issue, then slack_post_message (one a turn), then calls github_create_issue",
            Script {
                load: TWO_LOADS,
                together: false,
                call: CREATE_ISSUE,
            },
        ),
        (
            "loads github_create_issue and slack_post_message in one turn, then calls github_create_issue",
            Script {
                load: TWO_LOADS,
                together: true,
                call: CREATE_ISSUE,
            },
        ),
        (
            "calls get_weather at once (no load)",
            Script {
                load: "",
                together: false,
                call: WEATHER,
            },
        ),
    ];
    let mut out = String::from(
        "## Bytes the upstream receives (one exchange, chat completions, not streamed)\n\n",
    );
    out.push_str(&format!(
        "The client sends {} bytes (all 200 tools declared) once; the upstream receives (both routes run `tool_selection`, which a route needs for tool calls to pass):\n\n",
        body.len()
    ));
    out.push_str("| conversation | route | upstream requests | body bytes, total | of which `tools` | of which the index | request line + headers, total |\n|---|---|---:|---:|---:|---:|---:|\n");
    let mut details = String::new();
    let mut audits = String::new();
    for (label, script) in conversations {
        for (route, gateway) in [
            ("tool_selection, without disclosure", &plain),
            ("tool_selection + tool_disclosure", &disclosed),
        ] {
            let seen = audit_disclosures(&gateway.process.log).len();
            let (sent, received) = recorded_exchange(gateway, model, body, script).await?;
            let total: usize = sent.iter().map(|sent| sent.bytes).sum();
            let tools: usize = sent.iter().map(|sent| sent.tools_bytes).sum();
            let index: usize = sent.iter().map(|sent| sent.index_bytes).sum();
            if total as u64 != received.body_bytes {
                return Err(format!(
                    "{label}, {route}: {total} bytes recorded, {} counted",
                    received.body_bytes
                ));
            }
            out.push_str(&format!(
                "| {label} | {route} | {} | {total} | {tools} | {index} | {} |\n",
                sent.len(),
                received.head_bytes
            ));
            if route.ends_with("tool_disclosure") {
                details.push_str(&format!("\n{label}, with `tool_disclosure`:\n\n| upstream request | body bytes | `tools` bytes | tools declared | index bytes (lines) | messages | discovery results bytes |\n|---:|---:|---:|---|---:|---:|---:|\n"));
                for (number, sent) in sent.iter().enumerate() {
                    details.push_str(&format!(
                        "| {} | {} | {} | {} | {} ({}) | {} | {} |\n",
                        number + 1,
                        sent.bytes,
                        sent.tools_bytes,
                        sent.tools.join(", "),
                        sent.index_bytes,
                        sent.index_lines,
                        sent.messages,
                        sent.results_bytes
                    ));
                }
                match next_audit_disclosure(&gateway.process.log, seen).await {
                    Some(audit) => audits.push_str(&format!("- {label}: `{audit}`\n")),
                    None => audits.push_str(&format!("- {label}: no audit line\n")),
                }
            }
        }
    }
    out.push_str(&details);
    if !audits.is_empty() {
        out.push_str("\nThe gateway's own count (the audit line's `disclosure`: `declared_bytes` are the declared definitions summed over the exchange's upstream requests, `sent_bytes` what went in their place):\n\n");
        out.push_str(&audits);
    }
    out.push('\n');
    Ok(out)
}

/// One kind of exchange the CPU phase drives.
struct Kind {
    /// Its id in brackets, then what it is.
    label: &'static str,
    /// Index into the gateways.
    gateway: usize,
    script: Script,
    /// Upstream requests per exchange.
    upstream: u64,
}

impl Kind {
    /// The id in the label's brackets: `gd1`.
    fn id(&self) -> &'static str {
        self.label
            .strip_prefix('(')
            .and_then(|rest| rest.split(')').next())
            .unwrap_or(self.label)
    }
}

/// One batch's reading.
#[derive(Debug, Clone, Copy)]
struct Reading {
    /// schedstat, ns per exchange.
    cpu_ns: f64,
    /// /proc/PID/stat utime+stime, ns per exchange.
    stat_ns: f64,
    rate: f64,
}

async fn batch(
    gateway: &Gateway,
    model: &Model,
    body: &Bytes,
    kind: &Kind,
    exchanges: u64,
    connections: usize,
) -> Result<Reading, String> {
    let pid = gateway.process.pid();
    let shot = Arc::new(kind.script.shot(gateway.address, body));
    let before = model.received();
    let (cpu_before, stat_before) = (procs::cpu_ns(pid), procs::stat_cpu_ns(pid));
    let result = client::counted(
        shot,
        connections,
        exchanges,
        kind.script.check(),
        BATCH_DEADLINE,
    )
    .await;
    let (cpu_after, stat_after) = (procs::cpu_ns(pid), procs::stat_cpu_ns(pid));
    let requests = model.received().requests - before.requests;
    if result.failed > 0 || result.ok != exchanges {
        return Err(format!(
            "{}: {} of {exchanges} exchanges succeeded, {} failed; first failure: {}",
            kind.label,
            result.ok,
            result.failed,
            result.first_failure.unwrap_or_default()
        ));
    }
    if requests != exchanges * kind.upstream {
        return Err(format!(
            "{}: the upstream got {requests} requests for {exchanges} exchanges, not {} each",
            kind.label, kind.upstream
        ));
    }
    let per = |ns: u64| ns as f64 / exchanges as f64;
    Ok(Reading {
        cpu_ns: per(cpu_after - cpu_before),
        stat_ns: per(stat_after.saturating_sub(stat_before)),
        rate: result.rate(),
    })
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

async fn cpu_section(
    options: &Options,
    dir: &Path,
    upstream: SocketAddr,
    model: &Model,
    body: &Bytes,
) -> Result<String, String> {
    let both = format!("{TOOL_SELECTION_PLUGIN}{DISCLOSURE_PLUGIN}");
    // Every route passes unguarded calls (`stack::gateway_config` says so), as the unchecked
    // ones must to answer at all.
    let configs: [(&str, &str, &str); 4] = [
        ("plain", "", ""),
        ("disclosure", DISCLOSURE_PLUGIN, ""),
        ("guard", TOOL_SELECTION_PLUGIN, ""),
        ("guard-disclosure", &both, ""),
    ];
    let mut gateways = Vec::new();
    for (name, plugins, route) in configs {
        gateways.push(start_gateway(
            &options.toolgate,
            dir,
            name,
            plugins,
            route,
            "off",
            upstream,
        )?);
    }
    let direct = |call| Script {
        load: "",
        together: false,
        call,
    };
    let loads = |load, call| Script {
        load,
        together: false,
        call,
    };
    let mut kinds = vec![
        Kind {
            label: "(p) no plugins (`unguarded_calls = \"pass\"`): calls get_weather",
            gateway: 0,
            script: direct(WEATHER),
            upstream: 1,
        },
        Kind {
            label: "(g) tool_selection: calls get_weather",
            gateway: 2,
            script: direct(WEATHER),
            upstream: 1,
        },
        Kind {
            label: "(gd0) tool_selection + tool_disclosure: calls get_weather directly (no round)",
            gateway: 3,
            script: direct(WEATHER),
            upstream: 1,
        },
        Kind {
            label: "(gd1) tool_selection + tool_disclosure: loads get_weather, then calls it (1 round)",
            gateway: 3,
            script: loads(WEATHER, WEATHER),
            upstream: 2,
        },
        Kind {
            label: "(ge0) tool_selection + tool_disclosure: calls github_create_issue directly (no round)",
            gateway: 3,
            script: direct(CREATE_ISSUE),
            upstream: 1,
        },
        Kind {
            label: "(ge2) tool_selection + tool_disclosure: loads github_create_issue, then slack_post_message, calls the first (2 rounds)",
            gateway: 3,
            script: loads(TWO_LOADS, CREATE_ISSUE),
            upstream: 3,
        },
        Kind {
            label: "(d0) tool_disclosure alone (`unguarded_calls = \"pass\"`): calls get_weather directly",
            gateway: 1,
            script: direct(WEATHER),
            upstream: 1,
        },
        Kind {
            label: "(d1) tool_disclosure alone (`unguarded_calls = \"pass\"`): loads get_weather, then calls it",
            gateway: 1,
            script: loads(WEATHER, WEATHER),
            upstream: 2,
        },
    ];
    if let Some(only) = &options.only {
        kinds.retain(|kind| only.iter().any(|id| id == kind.id()));
        if kinds.is_empty() {
            return Err(format!("--only names no kind of exchange: {only:?}"));
        }
    }
    for kind in &kinds {
        eprintln!(
            "   gateway {} is pid {}",
            kind.id(),
            gateways[kind.gateway].process.pid()
        );
    }
    for kind in &kinds {
        batch(
            &gateways[kind.gateway],
            model,
            body,
            kind,
            options.warmup,
            options.connections,
        )
        .await?;
    }
    let mut readings: Vec<Vec<Reading>> = kinds.iter().map(|_| Vec::new()).collect();
    for round in 1..=options.rounds {
        eprintln!("   round {round} of {}", options.rounds);
        for (kind, taken) in kinds.iter().zip(readings.iter_mut()) {
            for gateway in &mut gateways {
                gateway.process.check_alive()?;
            }
            let reading = batch(
                &gateways[kind.gateway],
                model,
                body,
                kind,
                options.exchanges,
                options.connections,
            )
            .await?;
            eprintln!(
                "   {:<100} {:>8.1} µs/exchange",
                kind.label,
                reading.cpu_ns / 1e3
            );
            taken.push(reading);
        }
    }
    let mut out = String::from("## The gateway's CPU per exchange\n\n");
    out.push_str(&format!(
        "Each batch: {} exchanges on {} keep-alive connections, the client's 200-tool request, the answer checked (exactly the scripted call reaches the client) and the upstream requests counted (1 + rounds per exchange). CPU is the gateway process's, all threads, over the batch, divided by the exchanges: from `/proc/PID/task/*/schedstat` (exact) and from `/proc/PID/stat` utime+stime (10 ms ticks). Median over {} interleaved rounds; each round's value in brackets.\n\n",
        options.exchanges, options.connections, options.rounds
    ));
    out.push_str("| exchange | upstream requests each | CPU µs/exchange (schedstat) | rounds | CPU µs/exchange (stat) | exchanges/s |\n|---|---:|---:|---|---:|---:|\n");
    for (kind, taken) in kinds.iter().zip(&readings) {
        let mut cpu: Vec<f64> = taken.iter().map(|reading| reading.cpu_ns / 1e3).collect();
        let each = cpu
            .iter()
            .map(|value| format!("{value:.0}"))
            .collect::<Vec<_>>()
            .join(", ");
        let mut stat: Vec<f64> = taken.iter().map(|reading| reading.stat_ns / 1e3).collect();
        let mut rate: Vec<f64> = taken.iter().map(|reading| reading.rate).collect();
        let cpu_median = median(&mut cpu);
        out.push_str(&format!(
            "| {} | {} | **{cpu_median:.0}** | {each} | {:.0} | {:.0} |\n",
            kind.label,
            kind.upstream,
            median(&mut stat),
            median(&mut rate)
        ));
    }
    // A round's cost: the difference within each round (the same spell of the machine), median.
    let position = |id: &str| kinds.iter().position(|kind| kind.id() == id);
    let difference = |with: &str, without: &str, rounds: f64| {
        let (with, without) = (position(with)?, position(without)?);
        let mut values: Vec<f64> = readings[with]
            .iter()
            .zip(&readings[without])
            .map(|(with, without)| (with.cpu_ns - without.cpu_ns) / 1e3 / rounds)
            .collect();
        let mut stat: Vec<f64> = readings[with]
            .iter()
            .zip(&readings[without])
            .map(|(with, without)| (with.stat_ns - without.stat_ns) / 1e3 / rounds)
            .collect();
        Some((median(&mut values), median(&mut stat)))
    };
    out.push_str("\nThe CPU of one discovery round (the median of the round-by-round differences, µs; /proc/PID/stat in brackets):\n\n");
    for (label, with, without, rounds) in [
        (
            "(gd1) − (gd0): tool_selection + tool_disclosure, one load of get_weather",
            "gd1",
            "gd0",
            1.0,
        ),
        (
            "((ge2) − (ge0)) / 2: tool_selection + tool_disclosure, each of two loads",
            "ge2",
            "ge0",
            2.0,
        ),
        (
            "(d1) − (d0): tool_disclosure alone, one load of get_weather",
            "d1",
            "d0",
            1.0,
        ),
    ] {
        if let Some((cpu, stat)) = difference(with, without, rounds) {
            out.push_str(&format!("- {label}: **{cpu:.0} µs** ({stat:.0} µs)\n"));
        }
    }
    for (label, with, without) in [
        (
            "(gd0) − (g): disclosing the 200-tool request, no round, beside tool_selection",
            "gd0",
            "g",
        ),
        ("(g) − (p): tool_selection over 200 tools", "g", "p"),
    ] {
        if let Some((cpu, stat)) = difference(with, without, 1.0) {
            out.push_str(&format!(
                "- for reference, {label}: {cpu:.0} µs ({stat:.0} µs)\n"
            ));
        }
    }
    out.push_str(&format!(
        "\nLoad average at the end: {}\n",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    ));
    Ok(out)
}
