//! The soak test: sustained load through toolgate (the `dist` build, tool_selection enforcing) in
//! front of an upstream that injects faults at random — refused and reset connections, stalls
//! mid-stream, 5xx, non-JSON and truncated bodies, streams cut without `[DONE]`, slow heads —
//! while the config file is rewritten every few seconds (valid and invalid versions, and
//! SIGHUP). Hostile answers are in the mix too (a repeated key, a string index, a call in
//! another format's event, a stream sent as JSON and JSON sent as a stream), each carrying a
//! call of the undeclared `delete_user`. Hostile clients too: sockets that fill the connection
//! cap and do nothing (silent, an HTTP/2 preface only, an idle keep-alive), and requests whose
//! body is trickled past its deadline, too large (with a length or chunked) or malformed
//! chunked, each of which must get its own answer (408, 413, 400). Clients that read slowly or
//! stop reading: slow readers take 4–8 MiB answers (whole JSON and SSE, on `/big`) 64 KiB every
//! 20–30 ms through a small receive buffer, and must get all of the upstream's text although
//! `idle_timeout_ms` is far shorter than the write; stalled clients ask for 8 MiB and never read,
//! and the gateway must let them go after `write_timeout_ms` (they see the connection end before
//! the answer does). The state store is a real `redis-server` behind a tool_budget on `/v1` (a
//! budget never spent), the gateway logging in as an ACL user. Every 10 s one store event, in
//! turn: Redis killed and started again on the same port at once, the user's password changed
//! (`ACL SETUSER … resetpass`, its connections killed) for 2 s, Redis killed for an outage of
//! 2 s, and a failover (the node made a replica of a second redis-server for 2 s, then
//! `REPLICAOF NO ONE`). A restart at once must cost no request; during an outage, a flip or a
//! failover, and until the gateway has reconnected after it, requests may be answered 503
//! (`fail_mode = "block"`), but a budgeted request must be answered 200 again within 10 s of
//! each event's end (a store recovery). Requests on `/svc` go through a misbehaving validator
//! service (`toolgate_bench::rogue_service`) on keep-alive connections read by their framing, so
//! a forged length or encoding would show as a desync. MCP clients call `everything__echo` on a
//! `kind = "mcp"` route whose Streamable HTTP backend (`server-everything`, two processes behind
//! a TCP front, `toolgate_bench::front`) is "restarted" silently every 40 s: the front switches
//! to the other process and the one it left is restarted, so no connection is refused and only
//! the session is gone. Each switch must show in the admin `/health` (`restarts` up) and calls
//! must succeed again after it; calls during a switch may fail with -32002, none may hang.
//! Loopback only, bounded in time. It reports requests sent and answered, answers by status,
//! lost requests (no HTTP answer, or no end within the client's deadline), misanswered client
//! faults and service faults, desyncs, slow readers' answers cut, stalled clients let go, store
//! answers by what Redis was doing and store recoveries, MCP calls and backend switches seen,
//! bypasses (a hostile call released to the client), panics in the gateway's log, its RSS after
//! 1 minute and at the end and its peak, and fails if anything was lost, cut, misanswered,
//! desynced, bypassed or panicked, if a stalled client was not let go, if a budgeted request got
//! 503 while Redis was up throughout or the store did not recover after an event, if an MCP call
//! hung or failed outside a switch or a switch was not seen or not recovered from, or if the RSS
//! grew steadily (the last minute's median over 1.25 × the second minute's + 16 MiB, in runs of
//! 5 minutes or more).
//!
//! `cargo run --release -p toolgate-bench --bin soak -- [--seconds 600] [--concurrency 32]`
//! (`TOOLGATE_BIN=path/to/toolgate` runs that binary instead of building `dist`;
//! `TOOLGATE_COMMIT=HASH` names the commit when the source is a `git archive` export, for the
//! report's stamp (`toolgate_bench::revision`);
//! `SOAK_GATEWAY_LOG=debug` logs the gateway at that level, default `warn`, and
//! `SOAK_KEEP_GATEWAY_LOG=FILE` keeps its log there; `redis-server`
//! and `node` must be installed, and `.ci/mcp-servers.sh` run.)
//!
//! # Layout
//! - `main.rs`: the run (processes, config, clients, the timeline of faults) and the `/v1`
//!   clients and socket holders.
//! - `upstream`: the faulty upstream. `keep_alive`: the `/svc` clients and their framing reader.
//! - `big_readers`: slow readers and stalled clients. `store`: the store events and recoveries.
//! - `mcp_clients`: MCP clients and the backend's switches. `outcome`: the report and its checks.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use toolgate_bench::front::SwitchingFront;
use toolgate_bench::mcp;
use toolgate_bench::procs::{Process, TempDir, free_port, status_kib};
use toolgate_bench::redis::{Acl, RedisServer};
use toolgate_bench::rogue_service::{self, SERVICE_TIMEOUT_MS};

mod big_readers;
mod keep_alive;
mod mcp_clients;
mod outcome;
mod store;
mod upstream;

use big_readers::{slow_reader, stalled_client};
use keep_alive::service_session;
use mcp_clients::{SwitchTimeline, SwitchWatch, mcp_client, mcp_restarts, watch_switch};
use outcome::{Outcome, Rss};
use store::{RedisWatch, StoreEvent, StoreTimeline, overlap};
use upstream::start_faulty_upstream;

/// How long a client waits for a whole answer before counting the request lost.
const CLIENT_DEADLINE: Duration = Duration::from_secs(15);

/// The faults the upstream injects, chosen per request by the client (`x-soak-fault`).
const FAULTS: [&str; 16] = [
    "ok_json",
    "ok_sse",
    "bad_call",
    "refuse",
    "reset_mid_body",
    "stall_mid_stream",
    "error_5xx",
    "not_json",
    "truncated_json",
    "sse_cut",
    "slow_head",
    "hostile_repeated_key",
    "hostile_string_index",
    "hostile_foreign_event",
    "hostile_stream_as_json",
    "hostile_json_as_stream",
];

/// The faults a client commits, with the status each must be answered with.
const CLIENT_FAULTS: [(&str, &str); 4] = [
    ("trickle_body", "408"),
    ("oversize_body", "413"),
    ("oversize_chunked", "413"),
    ("malformed_chunked", "400"),
];

/// The request body cap the soak's gateway runs with, and the oversize bodies' size.
const BODY_CAP: usize = 1024 * 1024;

const OVERSIZE: usize = 2 * 1024 * 1024;

/// The undeclared tool every hostile answer calls: the client must never receive its call.
const HOSTILE_TOOL: &str = "delete_user";

/// How often a store event begins (they take turns, see [`STORE_EVENTS`]), how long an outage,
/// a password flip and a failover last, and how soon after one ends a budgeted request must be
/// answered 200 again.
const STORE_EVERY: Duration = Duration::from_secs(10);

const REDIS_OUTAGE: Duration = Duration::from_secs(2);

const STORE_RECOVERY: Duration = Duration::from_secs(10);

/// The ACL user the gateway logs in as, its password and the one a flip sets, and the default
/// user's (the soak's own, for its commands).
const STORE_USER: &str = "toolgate";

const STORE_PASSWORD: &str = "soak-pw";

const FLIPPED_PASSWORD: &str = "soak-flipped";

const ADMIN_PASSWORD: &str = "soak-admin";

/// The gateway's write and idle timeouts: a slow reader's answer takes seconds to write, far
/// longer than the idle timeout, and a stalled client is let go after the write timeout.
const WRITE_TIMEOUT_MS: u64 = 1000;

const IDLE_TIMEOUT_MS: u64 = 500;

/// Clients of big answers, besides the `--concurrency` ones: slow readers and stalled clients.
const SLOW_READERS: usize = 3;

const STALLED_CLIENTS: usize = 2;

/// A big answer's text is 4–8 MiB; a slow reader reads 64 KiB, then pauses 20–30 ms, through a
/// 64 KiB receive buffer, and must have the whole answer within its deadline.
const BIG_MIN: usize = 4 << 20;

const BIG_MAX: usize = 8 << 20;

const SLOW_PIECE: usize = 64 * 1024;

const SLOW_RECEIVE_BUFFER: u32 = 64 * 1024;

const SLOW_DEADLINE: Duration = Duration::from_secs(60);

/// A stalled client asks for 8 MiB through a 16 KiB receive buffer and reads nothing for 3 s
/// (three write timeouts); then it drains what is left, which must end before the answer does.
const STALL: Duration = Duration::from_secs(3);

const STALL_RECEIVE_BUFFER: u32 = 16 * 1024;

const STALL_DRAIN: Duration = Duration::from_secs(15);

/// MCP clients, the calls each makes on one session, how long a call may take, how often the
/// backend behind the front is switched, and how soon after a switch it must be seen
/// (`/health`) and a call succeed again.
const MCP_CLIENTS: usize = 2;

const MCP_CALLS_PER_SESSION: usize = 20;

const MCP_CALL_DEADLINE: Duration = Duration::from_secs(15);

const MCP_SWITCH_EVERY: Duration = Duration::from_secs(40);

const MCP_RECOVERY: Duration = Duration::from_secs(30);

/// The MCP server's name in the gateway's config, and the tool the clients call.
const MCP_SERVER: &str = "everything";

const MCP_TOOL: &str = "everything__echo";

/// Exchanges a service client makes on one keep-alive connection.
const SERVICE_EXCHANGES_PER_CONNECTION: usize = 3;

/// What the gateway's config points at.
#[derive(Clone)]
struct Addresses {
    listen: SocketAddr,
    admin: SocketAddr,
    upstream: SocketAddr,
    service: SocketAddr,
    redis_url: String,
    mcp_front: SocketAddr,
}

fn main() -> ExitCode {
    let mut seconds = 600u64;
    let mut concurrency = 32usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().and_then(|value| value.parse::<u64>().ok());
        match (arg.as_str(), value) {
            ("--seconds", Some(value)) => seconds = value,
            ("--concurrency", Some(value)) => concurrency = value.max(1) as usize,
            _ => {
                eprintln!("usage: soak [--seconds N] [--concurrency N]");
                return ExitCode::from(2);
            }
        }
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("soak: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(soak(Duration::from_secs(seconds), concurrency)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("soak: {error}");
            ExitCode::FAILURE
        }
    }
}

fn toolgate_binary() -> Result<PathBuf, String> {
    if let Ok(path) = std::env::var("TOOLGATE_BIN") {
        return Ok(PathBuf::from(path));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    toolgate_bench::dist::build(&root, &[("toolgate", "toolgate")])?;
    let target_dir = toolgate_bench::dist::target_dir(&root);
    Ok(toolgate_bench::dist::binary_dir(&target_dir).join("toolgate"))
}

/// The config, in one of three versions: two valid ones that differ (strict or not, an extra
/// route) and an invalid one the gateway must refuse while it keeps serving. The service's
/// breaker never opens, so every `/svc` answer is what the service's own answer calls for. The
/// MCP server's settings are the same in every version, so reloads keep it running.
fn config(version: usize, at: &Addresses, cap: usize) -> String {
    let Addresses {
        listen,
        admin,
        upstream,
        service,
        redis_url,
        mcp_front,
    } = at;
    let (strict, extra) = match version % 3 {
        0 => ("false", ""),
        1 => (
            "true",
            "\n[[routes]]\npath = \"/v2\"\nupstream = \"faulty\"\n",
        ),
        _ => (
            "false",
            "\n[[routes]]\npath = \"/v3\"\nupstream = \"does_not_exist\"\n",
        ),
    };
    format!(
        "[server]\nlisten = \"{listen}\"\nadmin_listen = \"{admin}\"\nshutdown_grace_ms = 5000\n\
         max_connections = {cap}\nmax_request_body_bytes = {BODY_CAP}\nfirst_byte_timeout_ms = 2000\n\
         handshake_timeout_ms = 4000\nidle_timeout_ms = {IDLE_TIMEOUT_MS}\n\
         write_timeout_ms = {WRITE_TIMEOUT_MS}\nrequest_body_timeout_ms = 2000\n\
         request_body_deadline_ms = 3000\n\n\
         [store]\nurl = \"{redis_url}\"\nfail_mode = \"block\"\ntimeout_ms = 500\n\n\
         [upstreams.faulty]\nurl = \"http://{upstream}\"\nconnect_timeout_ms = 500\n\
         response_timeout_ms = 1000\nread_timeout_ms = 1000\n\n[audit]\noutput = \"off\"\n\n\
         [services.rogue]\nurl = \"http://{service}/validate\"\ntimeout_ms = {SERVICE_TIMEOUT_MS}\n\
         breaker_failures = 1000000\n\n\
         [mcp_servers.{MCP_SERVER}]\nurl = \"http://{mcp_front}/mcp\"\nexposed_tools = [\"echo\"]\n\
         call_timeout_ms = 10000\n\n\
         [mcp.default_policy]\nallow_unknown_servers = true\n\n\
         [[plugins]]\nname = \"tool_selection\"\n[plugins.settings]\nstrict = {strict}\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"faulty\"\n\
         [[routes.plugins]]\nname = \"tool_budget\"\n[routes.plugins.settings]\ncount = \"proposed\"\n\
         [[routes.plugins.settings.budgets]]\ntools = \"*\"\nlimits = [\"1000000000/day\"]\n\n\
         [[routes]]\npath = \"/big\"\nupstream = \"faulty\"\n\n\
         [[routes]]\npath = \"/mcp\"\nkind = \"mcp\"\n\n\
         [[routes]]\npath = \"/svc\"\nupstream = \"faulty\"\n\
         [[routes.plugins]]\nname = \"service\"\n[routes.plugins.settings]\nservice = \"rogue\"\n\
         stages = [\"pre_request\", \"pre_response\"]\nfail_mode = \"block\"\n{extra}"
    )
}

#[derive(Default)]
struct Tally {
    sent: AtomicU64,
    answered: AtomicU64,
    lost: AtomicU64,
    by_status: Mutex<BTreeMap<String, u64>>,
    lost_examples: Mutex<Vec<String>>,
    bypassed: AtomicU64,
    bypass_examples: Mutex<Vec<String>>,
    /// A client fault answered otherwise than its status.
    misanswered: AtomicU64,
    misanswer_examples: Mutex<Vec<String>>,
    /// Sockets the slowloris holders opened, and how many the gateway closed.
    idle_sockets_opened: AtomicU64,
    idle_sockets_closed: AtomicU64,
    /// Budgeted answers 503 `state_store_unavailable`, by what Redis did during the request.
    store_down_answers: AtomicU64,
    store_restart_answers: AtomicU64,
    store_up_answers: AtomicU64,
    store_up_examples: Mutex<Vec<String>>,
    /// Exchanges through the misbehaving service, and those answered against its fault.
    service_exchanges: AtomicU64,
    /// Kept-alive `/svc` connections found closed by the gateway (idle) when their client
    /// came back to them, and opened again, as a pooling client does.
    keep_alive_closed_idle: AtomicU64,
    service_misanswered: AtomicU64,
    service_misanswer_examples: Mutex<Vec<String>>,
    /// Per service fault: exchanges passed and blocked.
    service_outcomes: Mutex<BTreeMap<&'static str, (u64, u64)>>,
    /// Answers that were not one whole HTTP answer with a consistent body, or bytes after one.
    desynced: AtomicU64,
    desync_examples: Mutex<Vec<String>>,
    /// Budgeted answers 503 `state_store_unavailable` during a password flip or a failover, or
    /// before the gateway reconnected after one.
    store_flip_answers: AtomicU64,
    store_failover_answers: AtomicU64,
    /// Big answers read slowly: asked for, read whole, cut (not all of the upstream's text),
    /// answered otherwise than 200, and the bytes of text read whole.
    slow_reads: AtomicU64,
    slow_whole: AtomicU64,
    slow_cut: AtomicU64,
    slow_not_ok: AtomicU64,
    slow_bytes: AtomicU64,
    slow_examples: Mutex<Vec<String>>,
    /// Clients that stopped reading: sent, let go by the gateway, and kept (their whole answer
    /// was still there when they read again, or the connection never ended).
    stalled: AtomicU64,
    stalled_let_go: AtomicU64,
    stalled_kept: AtomicU64,
    stalled_examples: Mutex<Vec<String>>,
    /// MCP: sessions opened, calls made and answered with the echo, errors during a backend
    /// switch (-32002, and others), errors with no switch under way, and calls that hung.
    mcp_sessions: AtomicU64,
    mcp_calls: AtomicU64,
    mcp_ok: AtomicU64,
    mcp_unavailable_in_switch: AtomicU64,
    mcp_other_in_switch: AtomicU64,
    mcp_failed: AtomicU64,
    mcp_hung: AtomicU64,
    mcp_examples: Mutex<Vec<String>>,
}

/// Keeps up to 10 examples of one kind of trouble for the report.
async fn keep_example(examples: &Mutex<Vec<String>>, example: String) {
    let mut examples = examples.lock().await;
    if examples.len() < 10 {
        examples.push(example);
    }
}

async fn soak(duration: Duration, concurrency: usize) -> Result<bool, String> {
    let dir = TempDir::new("toolgate-soak").map_err(|error| error.to_string())?;
    let binary = toolgate_binary()?;
    let header = stamp(&binary, duration, concurrency);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let everything_script = mcp::everything_script(&root)
        .ok_or_else(|| "server-everything is not installed: run .ci/mcp-servers.sh".to_owned())?;
    let upstream = start_faulty_upstream()
        .await
        .map_err(|error| error.to_string())?;
    let service = rogue_service::start()
        .await
        .map_err(|error| error.to_string())?;
    // Started from the main thread, as every child (see `Process::start`).
    let acl = Acl {
        user: STORE_USER.to_owned(),
        password: STORE_PASSWORD.to_owned(),
        admin_password: ADMIN_PASSWORD.to_owned(),
    };
    let mut redis = RedisServer::start_named("redis", dir.0.clone(), Some(acl))?;
    // The primary the store's node follows during a failover.
    let primary = RedisServer::start_named("redis-primary", dir.0.clone(), None)?;
    let mcp_ports = [free_port_number()?, free_port_number()?];
    let mut everything = Vec::new();
    for (port, name) in mcp_ports.into_iter().zip(["everything-a", "everything-b"]) {
        let mut process = mcp::start_everything(&everything_script, port, name, &dir.0)
            .map_err(|error| error.to_string())?;
        process.wait_for_port(
            SocketAddr::from(([127, 0, 0, 1], port)),
            Duration::from_secs(30),
        )?;
        everything.push(process);
    }
    let front = SwitchingFront::start(mcp_ports[0])
        .await
        .map_err(|error| error.to_string())?;
    let mut active = 0usize;
    let listen = free_port().map_err(|error| error.to_string())?;
    let admin = free_port().map_err(|error| error.to_string())?;
    let at = Addresses {
        listen,
        admin,
        upstream,
        service,
        redis_url: redis.url(),
        mcp_front: front.address(),
    };
    let config_path = dir.0.join("gateway.toml");
    // The idle holders alone fill the cap: every client's connection is let in by reclaiming.
    let cap = concurrency * 2;
    std::fs::write(&config_path, config(0, &at, cap)).map_err(|error| error.to_string())?;
    let mut command = Command::new(&binary);
    command.args(["serve", "--config"]).arg(&config_path).env(
        "TOOLGATE_LOG",
        std::env::var("SOAK_GATEWAY_LOG").unwrap_or_else(|_| "warn".to_owned()),
    );
    let mut gateway =
        Process::start("toolgate", command, &dir.0).map_err(|error| error.to_string())?;
    gateway.wait_for_port(listen, Duration::from_secs(10))?;
    gateway.wait_for_port(admin, Duration::from_secs(10))?;
    mcp_restarts(admin, Duration::from_secs(30)).await?;
    let pid = gateway.pid();
    println!(
        "soak: toolgate {} (pid {pid}) on {listen} (admin {admin}), faulty upstream on \
         {upstream}, service on {service}, {} (failover to port {}), MCP front {} to ports \
         {mcp_ports:?}, {concurrency} clients + {SLOW_READERS} slow readers + {STALLED_CLIENTS} \
         stalled + {MCP_CLIENTS} MCP, {}s",
        binary.display(),
        redis.url(),
        primary.port(),
        front.address(),
        duration.as_secs()
    );

    let tally = Arc::new(Tally::default());
    let watch = Arc::new(RedisWatch::default());
    let switch_watch = Arc::new(SwitchWatch::default());
    let stop = Arc::new(AtomicBool::new(false));
    let began = Instant::now();
    let deadline = began + duration;
    let mut tasks = Vec::new();
    for holder in 0..cap {
        let (tally, stop) = (tally.clone(), stop.clone());
        tasks.push(tokio::spawn(hold_idle_sockets(
            listen,
            IdleKind::ALL[holder % IdleKind::ALL.len()],
            tally,
            stop,
        )));
    }
    for worker in 0..concurrency {
        let (tally, watch, stop) = (tally.clone(), watch.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ (worker as u64 + 1));
            while !stop.load(Ordering::Relaxed) {
                // One turn in five is a client's fault, one a service session, the others an
                // upstream's fault.
                match random.below(5) {
                    0 => {
                        let (fault, status) = CLIENT_FAULTS[random.below(CLIENT_FAULTS.len())];
                        upstream_turn(listen, fault, Some(status), &mut random, &tally, &watch)
                            .await;
                    }
                    1 => service_session(listen, &mut random, &tally).await,
                    _ => {
                        let fault = FAULTS[random.below(FAULTS.len())];
                        upstream_turn(listen, fault, None, &mut random, &tally, &watch).await;
                    }
                }
            }
        }));
    }
    for reader in 0..SLOW_READERS {
        let seed = 0x5105_u64 + reader as u64;
        tasks.push(tokio::spawn(slow_reader(
            listen,
            seed,
            tally.clone(),
            stop.clone(),
        )));
    }
    for staller in 0..STALLED_CLIENTS {
        let seed = 0x57A1_u64 + staller as u64;
        tasks.push(tokio::spawn(stalled_client(
            listen,
            seed,
            tally.clone(),
            stop.clone(),
        )));
    }
    for client in 0..MCP_CLIENTS {
        tasks.push(tokio::spawn(mcp_client(
            listen,
            client,
            began,
            tally.clone(),
            switch_watch.clone(),
            stop.clone(),
        )));
    }

    let (mut reloads, mut peak_rss_kib) = (0usize, 0u64);
    let mut rss_samples: Vec<(f64, u64)> = Vec::new();
    let mut next_reload = Instant::now() + Duration::from_secs(3);
    let mut store = StoreTimeline::new(Instant::now() + STORE_EVERY);
    let mut switches = SwitchTimeline::new(Instant::now() + MCP_SWITCH_EVERY / 2);
    let mut fatal = None;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        peak_rss_kib = peak_rss_kib.max(status_kib(pid, "VmHWM").unwrap_or(0));
        if let Some(rss) = status_kib(pid, "VmRSS") {
            rss_samples.push((began.elapsed().as_secs_f64(), rss));
        }
        if gateway.check_alive().is_err() {
            break;
        }
        if Instant::now() >= next_reload {
            reloads += 1;
            let _ = std::fs::write(&config_path, config(reloads, &at, cap));
            if reloads % 4 == 0 {
                let _ = Command::new("kill")
                    .args(["-HUP", &pid.to_string()])
                    .status();
            }
            next_reload = Instant::now() + Duration::from_secs(3);
        }
        if let Err(error) = store.step(&mut redis, primary.port(), &watch, listen).await {
            fatal = Some(error);
            break;
        }
        switches.collect(&switch_watch).await;
        if switches.due() {
            let next = 1 - active;
            if !listening(mcp_ports[next]) {
                // The process restarted at the previous switch is not up yet: wait for it.
                continue;
            }
            let before = match mcp_restarts(admin, Duration::from_secs(2)).await {
                Ok(before) => before,
                Err(error) => {
                    switches.failures.push(format!("before a switch: {error}"));
                    switches.postpone();
                    continue;
                }
            };
            switch_watch.set(true);
            front.switch_to(mcp_ports[next]);
            // The process left behind is restarted (killed: its connections end), so the next
            // switch reaches a fresh one too.
            everything[active].kill();
            let name = ["everything-a", "everything-b"][active];
            everything[active] =
                mcp::start_everything(&everything_script, mcp_ports[active], name, &dir.0)
                    .map_err(|error| error.to_string())?;
            active = next;
            switches.began(tokio::spawn(watch_switch(
                admin,
                before,
                switch_watch.clone(),
                began,
            )));
        }
    }
    let load_ended = began.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    store.abandon(&watch);
    switches.abandon(&switch_watch);
    // The RSS once the load is gone (2 s for the last connections to close).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after_kib = status_kib(pid, "VmRSS").unwrap_or(0);
    let alive = gateway.check_alive();
    peak_rss_kib = peak_rss_kib.max(status_kib(pid, "VmHWM").unwrap_or(0));
    drop(gateway);
    drop(redis);
    drop(primary);
    drop(everything);
    if let Some(error) = fatal {
        return Err(error);
    }
    // Kept for whoever explains a loss: the gateway's log (at `SOAK_GATEWAY_LOG`'s level).
    if let Ok(kept) = std::env::var("SOAK_KEEP_GATEWAY_LOG") {
        let _ = std::fs::copy(dir.0.join("toolgate.log"), kept);
    }
    let log = std::fs::read_to_string(dir.0.join("toolgate.log")).unwrap_or_default();
    let panics = log.matches("panicked").count();
    let refused_reloads = log.matches("not applied").count();
    // Why the gateway let clients that stopped reading go, as it logs each.
    let stalled_closes = (
        log.matches("the client accepted no bytes within write_timeout_ms")
            .count(),
        log.matches("stalled, closed for a new client at max_connections")
            .count(),
    );
    let rss = Rss::of(&rss_samples, load_ended, peak_rss_kib, rss_after_kib);
    let outcome = Outcome {
        duration,
        concurrency,
        cap,
        reloads,
        refused_reloads,
        stalled_closes,
        panics,
        alive: alive.is_ok(),
        store,
        switches,
        rss,
    };
    let (report, passed) = outcome.report(&tally).await;
    let load_at_end = load_average();
    let report = format!("{header}| load average at the end | {load_at_end} |\n\n{report}");
    println!("{report}");
    let results = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results");
    let _ = std::fs::create_dir_all(&results);
    let _ = std::fs::write(results.join("soak.md"), &report);
    Ok(passed)
}

/// The report's head, written by the tool rather than by hand: the commit measured (with its
/// dirty flag), the profile of the gateway under test and of this driver, the command, the date
/// and the load average at the start (the row of the load at the end follows the run).
fn stamp(binary: &std::path::Path, duration: Duration, concurrency: usize) -> String {
    use toolgate_bench::revision;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let gateway = match std::env::var("TOOLGATE_BIN") {
        Ok(path) => format!("`{}` (TOOLGATE_BIN={path})", revision::profile_of(binary)),
        Err(_) => "`dist`, built by the soak (TOOLGATE_HOT_FUNCTIONS=on)".to_owned(),
    };
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M"])
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned())
        .unwrap_or_default();
    format!(
        "# toolgate soak — results\n\n\
         Generated by the soak; do not edit by hand. What it does: `bench/README.md` (\"The \
         soak\").\n\n\
         | run | |\n|---|---|\n\
         | commit | {} |\n\
         | profile of the gateway | {gateway} |\n\
         | profile of the soak driver | `{}` |\n\
         | command | `soak --seconds {} --concurrency {concurrency}` |\n\
         | date (UTC) | {date} |\n\
         | nproc | {} |\n\
         | load average at the start | {} |\n",
        revision::of_tree(&root),
        revision::own_profile(),
        duration.as_secs(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
    )
}

/// /proc/loadavg's 1, 5 and 15 minute figures: a concurrent build skews the run.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A free loopback port's number.
fn free_port_number() -> Result<u16, String> {
    free_port()
        .map(|address| address.port())
        .map_err(|error| error.to_string())
}

/// Whether something listens on a loopback `port` (a short blocking connect).
fn listening(port: u16) -> bool {
    std::net::TcpStream::connect_timeout(
        &SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// One request with an upstream's or a client's `fault` on `/v1`, counted in `tally`. A 503 of
/// the store is put down to what Redis did meanwhile.
async fn upstream_turn(
    listen: SocketAddr,
    fault: &'static str,
    expected: Option<&'static str>,
    random: &mut Random,
    tally: &Tally,
    watch: &RedisWatch,
) {
    let stream = random.below(2) == 1;
    tally.sent.fetch_add(1, Ordering::Relaxed);
    let before = watch.snapshot();
    let answer = exchange(listen, fault, stream).await;
    let after = watch.snapshot();
    match answer {
        Ok(Answer {
            status,
            released_hostile,
            store_unavailable,
        }) => {
            tally.answered.fetch_add(1, Ordering::Relaxed);
            if released_hostile {
                tally.bypassed.fetch_add(1, Ordering::Relaxed);
                keep_example(
                    &tally.bypass_examples,
                    format!("{fault} stream={stream}: {status}"),
                )
                .await;
            }
            if let Some(expected) = expected
                && status != expected
            {
                tally.misanswered.fetch_add(1, Ordering::Relaxed);
                keep_example(
                    &tally.misanswer_examples,
                    format!("{fault}: {status}, not {expected}"),
                )
                .await;
            }
            if store_unavailable {
                let counter = match overlap(before, after) {
                    Some(StoreEvent::Outage) => &tally.store_down_answers,
                    Some(StoreEvent::Restart) => &tally.store_restart_answers,
                    Some(StoreEvent::Flip) => &tally.store_flip_answers,
                    Some(StoreEvent::Failover) => &tally.store_failover_answers,
                    None => {
                        keep_example(
                            &tally.store_up_examples,
                            format!("{fault} stream={stream}: {status}"),
                        )
                        .await;
                        &tally.store_up_answers
                    }
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
            *tally.by_status.lock().await.entry(status).or_default() += 1;
        }
        Err(why) => {
            tally.lost.fetch_add(1, Ordering::Relaxed);
            keep_example(
                &tally.lost_examples,
                format!("{fault} stream={stream}: {why}"),
            )
            .await;
        }
    }
}

/// What the client got: the status, and whether a hostile call reached it before any error.
struct Answer {
    status: String,
    released_hostile: bool,
    /// The state store could not be asked (`state_store_unavailable`).
    store_unavailable: bool,
}

/// One request through the gateway; `Ok` once the whole answer was read.
async fn exchange(gateway: SocketAddr, fault: &str, stream: bool) -> Result<Answer, String> {
    let body = format!(
        r#"{{"model":"m","stream":{stream},"messages":[{{"role":"user","content":"weather?"}}],"tools":[{{"type":"function","function":{{"name":"get_weather","parameters":{{"type":"object","properties":{{"city":{{"type":"string"}}}},"required":["city"]}}}}}}]}}"#
    );
    let (framing, sending) = client_body(fault, body);
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: soak\r\ncontent-type: application/json\r\n\
         x-soak-fault: {fault}\r\nconnection: close\r\n{framing}\r\n"
    );
    let attempt = async {
        let socket = TcpStream::connect(gateway)
            .await
            .map_err(|error| format!("connect: {error}"))?;
        let (mut reader, mut writer) = socket.into_split();
        writer
            .write_all(head.as_bytes())
            .await
            .map_err(|error| format!("write: {error}"))?;
        // The body is sent while the answer is read: a gateway that refuses a body answers
        // before it is whole, and a client that stops writing then is what a real one does.
        let sender = tokio::spawn(async move {
            for (pause, piece) in sending {
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
                if writer.write_all(&piece).await.is_err() {
                    break;
                }
            }
            writer
        });
        let mut answer = Vec::new();
        let read = reader.read_to_end(&mut answer).await;
        sender.abort();
        if answer.is_empty() {
            read.map_err(|error| format!("read: {error}"))?;
        }
        let head = String::from_utf8_lossy(&answer[..answer.len().min(64)]).into_owned();
        let status = head
            .strip_prefix("HTTP/1.1 ")
            .and_then(|rest| rest.get(..3))
            .ok_or_else(|| format!("no HTTP answer ({} bytes)", answer.len()))?
            .to_owned();
        let text = String::from_utf8_lossy(&answer);
        // What came before an error (a block names the tool in its violations) was released.
        let released = text.split("\"error\"").next().unwrap_or_default();
        let released_hostile = status == "200" && released.contains(HOSTILE_TOOL);
        let store_unavailable = text.contains("state_store_unavailable");
        // A 200 stream that ended with an error event is answered too, but say so.
        let status = if status == "200" && text.contains("\"error\"") {
            "200 (stream ended by an error event)".to_owned()
        } else {
            status
        };
        Ok(Answer {
            status,
            released_hostile,
            store_unavailable,
        })
    };
    tokio::time::timeout(CLIENT_DEADLINE, attempt)
        .await
        .unwrap_or_else(|_| Err("no end within the deadline".to_owned()))
}

/// The body's framing header line(s) and its bytes, each after a pause, as the client `fault`
/// sends them (a well-behaved client sends `body` at once).
fn client_body(fault: &str, body: String) -> (String, Vec<(Duration, Vec<u8>)>) {
    let chunked = "transfer-encoding: chunked\r\n".to_owned();
    match fault {
        // A byte every 300 ms: never silent for the 2 s timeout, past the 3 s deadline.
        "trickle_body" => (
            format!("content-length: {}\r\n", body.len()),
            body.bytes()
                .map(|byte| (Duration::from_millis(300), vec![byte]))
                .collect(),
        ),
        "oversize_body" => (
            format!("content-length: {OVERSIZE}\r\n"),
            vec![(Duration::ZERO, vec![b' '; OVERSIZE])],
        ),
        "oversize_chunked" => {
            let piece = 64 * 1024;
            let mut chunk = format!("{piece:x}\r\n").into_bytes();
            chunk.extend(std::iter::repeat_n(b' ', piece));
            chunk.extend_from_slice(b"\r\n");
            let mut pieces = vec![(Duration::ZERO, chunk); OVERSIZE / piece];
            pieces.push((Duration::ZERO, b"0\r\n\r\n".to_vec()));
            (chunked, pieces)
        }
        "malformed_chunked" => (
            chunked,
            vec![(
                Duration::ZERO,
                b"5\r\n{\"a\":\r\nzz\r\nnot a chunk\r\n0\r\n\r\n".to_vec(),
            )],
        ),
        _ => (
            format!("content-length: {}\r\n", body.len()),
            vec![(Duration::ZERO, body.into_bytes())],
        ),
    }
}

/// The first 200 characters of an answer, for an example in the report.
fn clip(text: &str) -> String {
    text.chars().take(200).collect()
}

/// What a socket held open at the cap does.
#[derive(Debug, Clone, Copy)]
enum IdleKind {
    /// Connects and sends nothing.
    Silent,
    /// Sends the HTTP/2 preface and nothing after.
    Http2Preface,
    /// Makes one request on a keep-alive connection, then holds it idle.
    IdleKeepAlive,
}

impl IdleKind {
    const ALL: [IdleKind; 3] = [
        IdleKind::Silent,
        IdleKind::Http2Preface,
        IdleKind::IdleKeepAlive,
    ];
}

/// Holds one socket of `kind` open at a time until `stop`, opening another each time the
/// gateway closes it (at a phase deadline, or reclaimed for a client).
async fn hold_idle_sockets(
    gateway: SocketAddr,
    kind: IdleKind,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(mut socket) = TcpStream::connect(gateway).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        tally.idle_sockets_opened.fetch_add(1, Ordering::Relaxed);
        let opening: &[u8] = match kind {
            IdleKind::Silent => b"",
            IdleKind::Http2Preface => b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            IdleKind::IdleKeepAlive => {
                b"GET /v1/models HTTP/1.1\r\nhost: soak\r\nx-soak-fault: ok_json\r\n\r\n"
            }
        };
        if socket.write_all(opening).await.is_err() {
            continue;
        }
        // Whatever the gateway sends (its HTTP/2 settings, an answer) is read and dropped, until
        // it closes the socket or the soak ends.
        let mut sink = [0u8; 4096];
        loop {
            match tokio::time::timeout(Duration::from_millis(250), socket.read(&mut sink)).await {
                Ok(Ok(0) | Err(_)) => {
                    tally.idle_sockets_closed.fetch_add(1, Ordering::Relaxed);
                    break;
                }
                Ok(Ok(_)) => {}
                Err(_) if stop.load(Ordering::Relaxed) => return,
                Err(_) => {}
            }
        }
    }
}

/// xorshift64: enough randomness to mix faults, and reproducible per worker.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % bound as u64) as usize
    }
}
