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
//! (`TOOLGATE_BIN=path/to/toolgate` runs that binary instead of building `dist`; `redis-server`
//! and `node` must be installed, and `.ci/mcp-servers.sh` run.)

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use toolgate_bench::big_answers;
use toolgate_bench::front::SwitchingFront;
use toolgate_bench::mcp::{self, McpError, McpSession};
use toolgate_bench::procs::{Process, TempDir, free_port, status_kib};
use toolgate_bench::raw_http::{self, Ending};
use toolgate_bench::redis::{Acl, RedisServer};
use toolgate_bench::rogue_service::{self, Expect, SERVICE_FAULTS, SERVICE_TIMEOUT_MS};

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

/// The store events, in the order they take turns, one every [`STORE_EVERY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StoreEvent {
    /// Killed (SIGKILL) and started again on its port at once.
    Restart,
    /// The gateway's ACL user's password changed and its connections killed, then set back.
    Flip,
    /// Killed, and started again after [`REDIS_OUTAGE`].
    Outage,
    /// Made a replica of another redis-server, then promoted back (`REPLICAOF NO ONE`).
    Failover,
}

const STORE_EVENTS: [StoreEvent; 4] = [
    StoreEvent::Restart,
    StoreEvent::Flip,
    StoreEvent::Outage,
    StoreEvent::Failover,
];

impl StoreEvent {
    fn code(self) -> u8 {
        match self {
            StoreEvent::Restart => 1,
            StoreEvent::Flip => 2,
            StoreEvent::Outage => 3,
            StoreEvent::Failover => 4,
        }
    }

    fn from_code(code: u8) -> Option<StoreEvent> {
        STORE_EVENTS.into_iter().find(|event| event.code() == code)
    }
}

/// Redis as the clients see it: what it was doing when a request began and ended, so a 503 of
/// the store is put down to the event under way (or the gateway's reconnecting after it), or
/// to none.
#[derive(Default)]
struct RedisWatch {
    /// `UP`, `DOWN` (an event under way) or `RECOVERING` (it ended; the gateway has not been
    /// seen to answer a budgeted request since).
    state: AtomicU8,
    /// The latest event's code ([`StoreEvent::code`]).
    event: AtomicU8,
    /// Bumped when an event begins and when it is over (Redis back, the gateway recovered).
    epoch: AtomicU64,
}

const UP: u8 = 0;
const DOWN: u8 = 1;
const RECOVERING: u8 = 2;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct RedisSnapshot {
    state: u8,
    event: u8,
    epoch: u64,
}

impl RedisWatch {
    fn snapshot(&self) -> RedisSnapshot {
        RedisSnapshot {
            state: self.state.load(Ordering::SeqCst),
            event: self.event.load(Ordering::SeqCst),
            epoch: self.epoch.load(Ordering::SeqCst),
        }
    }

    /// Called before the event is done to Redis.
    fn begins(&self, event: StoreEvent) {
        self.event.store(event.code(), Ordering::SeqCst);
        self.state.store(DOWN, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Called once Redis is itself again: a restart at once must cost no request, so it is
    /// over then; after the other events the gateway may take a backoff to reconnect.
    fn ends(&self, event: StoreEvent) {
        match event {
            StoreEvent::Restart => self.over(),
            _ => self.state.store(RECOVERING, Ordering::SeqCst),
        }
    }

    /// Called once a budgeted request was answered 200 after the event (or it never was).
    fn over(&self) {
        if self.state.swap(UP, Ordering::SeqCst) != UP {
            self.epoch.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The event a request that began at `before` and ended at `after` overlapped, if any.
fn overlap(before: RedisSnapshot, after: RedisSnapshot) -> Option<StoreEvent> {
    if before.state != UP {
        StoreEvent::from_code(before.event)
    } else if after.state != UP || before.epoch != after.epoch {
        StoreEvent::from_code(after.event)
    } else {
        None
    }
}

/// The MCP backend as the clients see it: whether a switch is under way (from the switch until
/// the gateway was seen to restart the backend and a call succeeded after that).
#[derive(Default)]
struct SwitchWatch {
    switching: AtomicBool,
    /// Bumped when a switch begins and when it is over.
    epoch: AtomicU64,
    /// When the latest successful call began, in ms since the soak began.
    last_ok_began_ms: AtomicU64,
}

impl SwitchWatch {
    fn snapshot(&self) -> (bool, u64) {
        (
            self.switching.load(Ordering::SeqCst),
            self.epoch.load(Ordering::SeqCst),
        )
    }

    fn set(&self, switching: bool) {
        self.switching.store(switching, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether a call between `before` and `after` overlapped a switch.
    fn overlapped(before: (bool, u64), after: (bool, u64)) -> bool {
        before.0 || after.0 || before.1 != after.1
    }
}

async fn soak(duration: Duration, concurrency: usize) -> Result<bool, String> {
    let dir = TempDir::new("toolgate-soak").map_err(|error| error.to_string())?;
    let binary = toolgate_binary()?;
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
    command
        .args(["serve", "--config"])
        .arg(&config_path)
        .env("TOOLGATE_LOG", "warn");
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
    let log = std::fs::read_to_string(dir.0.join("toolgate.log")).unwrap_or_default();
    let panics = log.matches("panicked").count();
    let refused_reloads = log.matches("not applied").count();
    let rss = Rss::of(&rss_samples, load_ended, peak_rss_kib, rss_after_kib);
    let outcome = Outcome {
        duration,
        concurrency,
        cap,
        reloads,
        refused_reloads,
        panics,
        alive: alive.is_ok(),
        store,
        switches,
        rss,
    };
    let (report, passed) = outcome.report(&tally).await;
    println!("{report}");
    let results = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results");
    let _ = std::fs::create_dir_all(&results);
    let _ = std::fs::write(results.join("soak.md"), &report);
    Ok(passed)
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

/// The MCP backend's `restarts` on the admin `/health` once it is `ready`, waiting up to `wait`.
async fn mcp_restarts(admin: SocketAddr, wait: Duration) -> Result<u64, String> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let last = match mcp::get_json(admin, "/health", deadline).await {
            Ok(health) => {
                let server = &health["mcp_servers"][MCP_SERVER];
                if server["state"] == "ready" {
                    return Ok(server["restarts"].as_u64().unwrap_or(0));
                }
                server.to_string()
            }
            Err(error) => error,
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the MCP backend was not ready within {wait:?}: {last}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The store's events as they happen: the one under way, the recovery awaited after it, and
/// what came of each.
struct StoreTimeline {
    next: Instant,
    turn: usize,
    /// The event under way and when it is to end.
    under_way: Option<(StoreEvent, Instant)>,
    /// The probe for the gateway's recovery after an event.
    recovery: Option<(StoreEvent, JoinHandle<Result<Duration, String>>)>,
    /// Events begun, by kind, in [`STORE_EVENTS`]'s order.
    events: [u64; 4],
    recoveries: u64,
    slowest_recovery: Duration,
    failures: Vec<String>,
}

impl StoreTimeline {
    fn new(first: Instant) -> StoreTimeline {
        StoreTimeline {
            next: first,
            turn: 0,
            under_way: None,
            recovery: None,
            events: [0; 4],
            recoveries: 0,
            slowest_recovery: Duration::ZERO,
            failures: Vec::new(),
        }
    }

    /// Ends the event under way when it is time, collects a finished recovery, and begins the
    /// next event when it is due and the last one is over. `Err` when Redis cannot be started
    /// again (the soak cannot go on).
    async fn step(
        &mut self,
        redis: &mut RedisServer,
        primary_port: u16,
        watch: &Arc<RedisWatch>,
        listen: SocketAddr,
    ) -> Result<(), String> {
        if let Some((event, ends_at)) = self.under_way
            && Instant::now() >= ends_at
        {
            self.under_way = None;
            let ended = match event {
                StoreEvent::Outage => redis.restart(),
                StoreEvent::Flip => expect_reply(
                    redis.command(&[
                        "ACL",
                        "SETUSER",
                        STORE_USER,
                        "resetpass",
                        &format!(">{STORE_PASSWORD}"),
                    ]),
                    "+OK",
                ),
                StoreEvent::Failover => {
                    expect_reply(redis.command(&["REPLICAOF", "NO", "ONE"]), "+OK")
                }
                StoreEvent::Restart => Ok(()),
            };
            if let Err(error) = ended {
                if event == StoreEvent::Outage {
                    return Err(format!("redis-server did not come back: {error}"));
                }
                self.failures.push(format!("ending a {event:?}: {error}"));
            }
            watch.ends(event);
            self.recovery = Some((event, tokio::spawn(store_recovery(listen))));
        }
        if let Some((event, recovery)) = self
            .recovery
            .take_if(|(_, recovery)| recovery.is_finished())
        {
            match recovery.await {
                Ok(Ok(took)) => {
                    self.recoveries += 1;
                    self.slowest_recovery = self.slowest_recovery.max(took);
                }
                Ok(Err(why)) => self.failures.push(format!("after a {event:?}: {why}")),
                Err(error) => self.failures.push(format!("the recovery probe: {error}")),
            }
            watch.over();
        }
        if self.under_way.is_some() || self.recovery.is_some() || Instant::now() < self.next {
            return Ok(());
        }
        let event = STORE_EVENTS[self.turn % STORE_EVENTS.len()];
        self.events[self.turn % STORE_EVENTS.len()] += 1;
        self.turn += 1;
        self.next = Instant::now() + STORE_EVERY;
        watch.begins(event);
        let lasts = match event {
            StoreEvent::Restart => {
                redis.kill();
                redis
                    .restart()
                    .map_err(|error| format!("redis-server did not come back: {error}"))?;
                watch.ends(event);
                self.recovery = Some((event, tokio::spawn(store_recovery(listen))));
                return Ok(());
            }
            StoreEvent::Outage => {
                redis.kill();
                Ok(())
            }
            StoreEvent::Flip => expect_reply(
                redis.command(&[
                    "ACL",
                    "SETUSER",
                    STORE_USER,
                    "resetpass",
                    &format!(">{FLIPPED_PASSWORD}"),
                ]),
                "+OK",
            )
            .and_then(|()| {
                expect_reply(redis.command(&["CLIENT", "KILL", "USER", STORE_USER]), ":")
            }),
            StoreEvent::Failover => expect_reply(
                redis.command(&["REPLICAOF", "127.0.0.1", &primary_port.to_string()]),
                "+OK",
            ),
        };
        if let Err(error) = lasts {
            self.failures
                .push(format!("beginning a {event:?}: {error}"));
        }
        self.under_way = Some((event, Instant::now() + REDIS_OUTAGE));
        Ok(())
    }

    /// At the end of the run: an event or a recovery still under way is not counted.
    fn abandon(&mut self, watch: &RedisWatch) {
        if let Some((_, recovery)) = self.recovery.take() {
            recovery.abort();
        }
        self.under_way = None;
        watch.over();
    }
}

/// `Ok` when `reply` starts with `expected`.
fn expect_reply(reply: Result<String, String>, expected: &str) -> Result<(), String> {
    match reply {
        Ok(reply) if reply.starts_with(expected) => Ok(()),
        Ok(reply) => Err(format!("Redis replied {reply:?}")),
        Err(error) => Err(error),
    }
}

/// After a store event: budgeted requests until one is answered 200 (the store counted its
/// call), within [`STORE_RECOVERY`]; how long that took.
async fn store_recovery(listen: SocketAddr) -> Result<Duration, String> {
    let began = Instant::now();
    let mut last = String::from("none sent");
    while began.elapsed() < STORE_RECOVERY {
        let remaining = STORE_RECOVERY.saturating_sub(began.elapsed());
        match tokio::time::timeout(remaining, exchange(listen, "ok_json", false)).await {
            Ok(Ok(answer)) if answer.status == "200" && !answer.store_unavailable => {
                return Ok(began.elapsed());
            }
            Ok(Ok(answer)) => {
                last = format!(
                    "{}{}",
                    answer.status,
                    match answer.store_unavailable {
                        true => " state_store_unavailable",
                        false => "",
                    }
                );
            }
            Ok(Err(why)) => last = why,
            Err(_) => break,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!(
        "no budgeted request answered 200 within {}s of its end (the last: {last})",
        STORE_RECOVERY.as_secs()
    ))
}

/// The MCP backend's switches as they happen.
struct SwitchTimeline {
    next: Instant,
    /// The watcher of the switch under way.
    under_way: Option<JoinHandle<Result<(Duration, Duration), String>>>,
    made: u64,
    /// Switches seen on `/health` and followed by a successful call, and the slowest of each.
    recovered: u64,
    slowest_seen: Duration,
    slowest_recovered: Duration,
    failures: Vec<String>,
}

impl SwitchTimeline {
    fn new(first: Instant) -> SwitchTimeline {
        SwitchTimeline {
            next: first,
            under_way: None,
            made: 0,
            recovered: 0,
            slowest_seen: Duration::ZERO,
            slowest_recovered: Duration::ZERO,
            failures: Vec::new(),
        }
    }

    fn due(&self) -> bool {
        self.under_way.is_none() && Instant::now() >= self.next
    }

    fn postpone(&mut self) {
        self.next = Instant::now() + Duration::from_secs(1);
    }

    fn began(&mut self, watcher: JoinHandle<Result<(Duration, Duration), String>>) {
        self.made += 1;
        self.under_way = Some(watcher);
        self.next = Instant::now() + MCP_SWITCH_EVERY;
    }

    /// Collects the switch under way once its watcher is done.
    async fn collect(&mut self, watch: &SwitchWatch) {
        let Some(watcher) = self.under_way.take_if(|watcher| watcher.is_finished()) else {
            return;
        };
        match watcher.await {
            Ok(Ok((seen, recovered))) => {
                self.recovered += 1;
                self.slowest_seen = self.slowest_seen.max(seen);
                self.slowest_recovered = self.slowest_recovered.max(recovered);
            }
            Ok(Err(why)) => self.failures.push(format!("switch {}: {why}", self.made)),
            Err(error) => self.failures.push(format!("the switch watcher: {error}")),
        }
        watch.set(false);
    }

    /// At the end of the run: a switch still under way is not counted.
    fn abandon(&mut self, watch: &SwitchWatch) {
        if let Some(watcher) = self.under_way.take() {
            watcher.abort();
            self.made -= 1;
            watch.set(false);
        }
    }
}

/// After a switch of the MCP backend: how long until `/health` showed it restarted (`restarts`
/// above `before`, `ready`), and until a call that began after that succeeded.
async fn watch_switch(
    admin: SocketAddr,
    before: u64,
    watch: Arc<SwitchWatch>,
    soak_began: Instant,
) -> Result<(Duration, Duration), String> {
    let switched = Instant::now();
    let deadline = switched + MCP_RECOVERY;
    let seen = loop {
        let ask_until = tokio::time::Instant::now() + Duration::from_secs(2);
        let last = match mcp::get_json(admin, "/health", ask_until).await {
            Ok(health) => {
                let server = &health["mcp_servers"][MCP_SERVER];
                if server["restarts"].as_u64().unwrap_or(0) > before && server["state"] == "ready" {
                    break switched.elapsed();
                }
                server.to_string()
            }
            Err(error) => error,
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "not seen on /health within {}s (restarts were {before}): {last}",
                MCP_RECOVERY.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let seen_at_ms = soak_began.elapsed().as_millis() as u64;
    while watch.last_ok_began_ms.load(Ordering::SeqCst) < seen_at_ms {
        if Instant::now() >= deadline {
            return Err(format!(
                "seen after {seen:?}, but no call succeeded within {}s of the switch",
                MCP_RECOVERY.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((seen, switched.elapsed()))
}

/// The gateway's RSS over the run, in KiB.
struct Rss {
    /// The first sample from 1 minute on, and the last under load.
    at_one_minute: Option<u64>,
    at_end: u64,
    /// Once the load was gone.
    after_load: u64,
    peak: u64,
    /// Medians of the second minute's samples and of the last minute's (runs of 5 minutes or
    /// more), to tell steady growth from a moment's load.
    second_minute_median: Option<u64>,
    last_minute_median: Option<u64>,
}

impl Rss {
    fn of(samples: &[(f64, u64)], load_ended: f64, peak: u64, after_load: u64) -> Rss {
        let median = |from: f64, to: f64| {
            let mut within: Vec<u64> = samples
                .iter()
                .filter(|(at, _)| *at >= from && *at < to)
                .map(|(_, kib)| *kib)
                .collect();
            within.sort_unstable();
            within.get(within.len() / 2).copied()
        };
        let long = load_ended >= 300.0;
        Rss {
            at_one_minute: samples
                .iter()
                .find(|(at, _)| *at >= 60.0)
                .map(|(_, kib)| *kib),
            at_end: samples.last().map(|(_, kib)| *kib).unwrap_or(0),
            after_load,
            peak,
            second_minute_median: long.then(|| median(60.0, 120.0)).flatten(),
            last_minute_median: long
                .then(|| median(load_ended - 60.0, load_ended))
                .flatten(),
        }
    }

    /// Whether the last minute's median is over 1.25 × the second minute's + 16 MiB.
    fn grew(&self) -> bool {
        match (self.second_minute_median, self.last_minute_median) {
            (Some(early), Some(late)) => late as f64 > early as f64 * 1.25 + 16.0 * 1024.0,
            _ => false,
        }
    }
}

/// MiB of a KiB count, for the report.
fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// What the main loop saw, for the report.
struct Outcome {
    duration: Duration,
    concurrency: usize,
    cap: usize,
    reloads: usize,
    refused_reloads: usize,
    panics: usize,
    alive: bool,
    store: StoreTimeline,
    switches: SwitchTimeline,
    rss: Rss,
}

impl Outcome {
    /// The markdown report and whether every check passed.
    async fn report(&self, tally: &Tally) -> (String, bool) {
        let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let sent = count(&tally.sent);
        let answered = count(&tally.answered);
        let lost = count(&tally.lost);
        let bypassed = count(&tally.bypassed);
        let misanswered = count(&tally.misanswered);
        let idle_opened = count(&tally.idle_sockets_opened);
        let idle_closed = count(&tally.idle_sockets_closed);
        let store_down = count(&tally.store_down_answers);
        let store_restart = count(&tally.store_restart_answers);
        let store_flip = count(&tally.store_flip_answers);
        let store_failover = count(&tally.store_failover_answers);
        let store_up = count(&tally.store_up_answers);
        let service_exchanges = count(&tally.service_exchanges);
        let service_misanswered = count(&tally.service_misanswered);
        let desynced = count(&tally.desynced);
        let slow_reads = count(&tally.slow_reads);
        let slow_whole = count(&tally.slow_whole);
        let slow_cut = count(&tally.slow_cut);
        let slow_not_ok = count(&tally.slow_not_ok);
        let slow_mib = count(&tally.slow_bytes) as f64 / (1024.0 * 1024.0);
        let stalled = count(&tally.stalled);
        let stalled_let_go = count(&tally.stalled_let_go);
        let stalled_kept = count(&tally.stalled_kept);
        let mcp_sessions = count(&tally.mcp_sessions);
        let mcp_calls = count(&tally.mcp_calls);
        let mcp_ok = count(&tally.mcp_ok);
        let mcp_unavailable = count(&tally.mcp_unavailable_in_switch);
        let mcp_other = count(&tally.mcp_other_in_switch);
        let mcp_failed = count(&tally.mcp_failed);
        let mcp_hung = count(&tally.mcp_hung);
        let store = &self.store;
        let [restarts, flips, outages, failovers] = store.events;
        let store_events = restarts + flips + outages + failovers;
        let switches = &self.switches;
        let rss = &self.rss;
        let optional = |kib: Option<u64>| kib.map(mib).unwrap_or_else(|| "—".to_owned());
        let mut report = format!(
            "## Soak: {}s, {} clients, faults at random, config rewritten every 3 s, a store \
             event every {} s, a misbehaving validator service, slow and stalled readers, an \
             MCP backend switched every {} s\n\n\
             | measure | value |\n|---|---|\n| requests sent | {sent} |\n| answered | {answered} |\n\
             | lost (no HTTP answer, or none within {}s) | {lost} |\n\
             | desynced (not one whole HTTP answer with a consistent body, or bytes after it) | {desynced} |\n\
             | bypassed (a hostile call released to the client) | {bypassed} |\n\
             | client faults misanswered (not 408 / 413 / 400) | {misanswered} |\n\
             | idle sockets held at the cap ({}): opened / closed by the gateway | {idle_opened} / {idle_closed} |\n\
             | slow readers ({SLOW_READERS}, 64 KiB every 20–30 ms, 4–8 MiB JSON and SSE, idle_timeout_ms {IDLE_TIMEOUT_MS}): answers read whole | {slow_whole} of {slow_reads} ({slow_mib:.0} MiB of text) |\n\
             | … cut (not all of the upstream's text) | {slow_cut} |\n\
             | … answered otherwise than 200 | {slow_not_ok} |\n\
             | stalled clients ({STALLED_CLIENTS}, 8 MiB asked, nothing read for {} s, write_timeout_ms {WRITE_TIMEOUT_MS}): let go by the gateway | {stalled_let_go} of {stalled} |\n\
             | … not let go (the whole answer still there, or the connection never ended) | {stalled_kept} |\n\
             | store events (one every {} s): Redis killed (SIGKILL) and started again at once / ACL password flipped for {} s / killed for {} s / failover (a replica for {} s) | {restarts} / {flips} / {outages} / {failovers} |\n\
             | store recoveries (a budgeted request answered 200 within {} s of an event's end) | {} of {store_events}, slowest {} ms |\n\
             | store events that failed or were not recovered from | {} |\n\
             | budgeted answers 503 `state_store_unavailable`: during an outage or before the reconnect after it | {store_down} |\n\
             | … across a restart at once (Redis down for its start-up) | {store_restart} |\n\
             | … during a password flip or before the reconnect after it | {store_flip} |\n\
             | … during a failover or before the reconnect after it | {store_failover} |\n\
             | … with Redis up throughout (an event costing a request it should not) | {store_up} |\n\
             | exchanges through the misbehaving service (keep-alive, {SERVICE_EXCHANGES_PER_CONNECTION} a connection) | {service_exchanges} |\n\
             | service faults misanswered (passed when it had to block, or the reverse) | {service_misanswered} |\n\
             | MCP calls ({MCP_CLIENTS} clients, `{MCP_TOOL}`, {MCP_CALLS_PER_SESSION} a session): answered | {mcp_ok} of {mcp_calls} ({mcp_sessions} sessions) |\n\
             | … failed during a backend switch: -32002 / otherwise | {mcp_unavailable} / {mcp_other} |\n\
             | … failed with no switch under way | {mcp_failed} |\n\
             | … hung (no answer within {} s) | {mcp_hung} |\n\
             | MCP backend switches (silent restarts): seen on `/health` and a call answered after | {} of {}, slowest seen {} ms, answered {} ms |\n\
             | panics in the gateway log | {} |\n\
             | config rewrites (every 3rd invalid, every 4th with SIGHUP) | {} |\n\
             | invalid versions refused | {} |\n| gateway alive at the end | {} |\n\
             | RSS after 1 min / at the end of the load / 2 s after it | {} / {} / {} |\n\
             | RSS median of the 2nd minute / of the last minute (growth fails over 1.25 × + 16 MiB) | {} / {} |\n\
             | peak RSS (VmHWM) | {} |\n\n| status | answers |\n|---|---|\n",
            self.duration.as_secs(),
            self.concurrency,
            STORE_EVERY.as_secs(),
            MCP_SWITCH_EVERY.as_secs(),
            CLIENT_DEADLINE.as_secs(),
            self.cap,
            STALL.as_secs(),
            STORE_EVERY.as_secs(),
            REDIS_OUTAGE.as_secs(),
            REDIS_OUTAGE.as_secs(),
            REDIS_OUTAGE.as_secs(),
            STORE_RECOVERY.as_secs(),
            store.recoveries,
            store.slowest_recovery.as_millis(),
            store.failures.len(),
            MCP_CALL_DEADLINE.as_secs(),
            switches.recovered,
            switches.made,
            switches.slowest_seen.as_millis(),
            switches.slowest_recovered.as_millis(),
            self.panics,
            self.reloads,
            self.refused_reloads,
            self.alive,
            optional(rss.at_one_minute),
            mib(rss.at_end),
            mib(rss.after_load),
            optional(rss.second_minute_median),
            optional(rss.last_minute_median),
            mib(rss.peak),
        );
        for (status, count) in tally.by_status.lock().await.iter() {
            report.push_str(&format!("| {status} | {count} |\n"));
        }
        report.push_str("\n| service fault | passed | blocked |\n|---|---|---|\n");
        for (fault, (passed, blocked)) in tally.service_outcomes.lock().await.iter() {
            report.push_str(&format!("| {fault} | {passed} | {blocked} |\n"));
        }
        let examples = [
            ("lost", &tally.lost_examples),
            ("desynced", &tally.desync_examples),
            ("bypassed", &tally.bypass_examples),
            ("misanswered", &tally.misanswer_examples),
            ("service misanswered", &tally.service_misanswer_examples),
            ("store 503 with Redis up", &tally.store_up_examples),
            ("slow reader", &tally.slow_examples),
            ("stalled client", &tally.stalled_examples),
            ("MCP", &tally.mcp_examples),
        ];
        for (kind, list) in examples {
            for example in list.lock().await.iter() {
                report.push_str(&format!("\n{kind}: {example}"));
            }
        }
        for failure in &store.failures {
            report.push_str(&format!("\nstore event: {failure}"));
        }
        for failure in &switches.failures {
            report.push_str(&format!("\nMCP switch: {failure}"));
        }
        if rss.grew() {
            report.push_str("\nRSS: the last minute's median is over 1.25 × the second's + 16 MiB");
        }
        let passed = lost == 0
            && desynced == 0
            && bypassed == 0
            && misanswered == 0
            && service_misanswered == 0
            && store_up == 0
            && store.failures.is_empty()
            && slow_cut == 0
            && slow_not_ok == 0
            && stalled_kept == 0
            && mcp_hung == 0
            && mcp_failed == 0
            && mcp_other == 0
            && switches.failures.is_empty()
            && switches.recovered == switches.made
            && self.panics == 0
            && self.alive
            && answered == sent
            && !rss.grew();
        (report, passed)
    }
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

/// A client of `/svc`: a few exchanges on one keep-alive connection, each with a service fault
/// picked at random, each answer read by its own framing and checked against the fault. A
/// forged length or encoding would leave bytes between answers, or make the next one unreadable.
async fn service_session(gateway: SocketAddr, random: &mut Random, tally: &Tally) {
    let mut connection: Option<Connection> = None;
    for _ in 0..SERVICE_EXCHANGES_PER_CONNECTION {
        let (fault, expect) = SERVICE_FAULTS[random.below(SERVICE_FAULTS.len())];
        let stream = random.below(2) == 1;
        tally.sent.fetch_add(1, Ordering::Relaxed);
        tally.service_exchanges.fetch_add(1, Ordering::Relaxed);
        let attempt = async {
            let mut open = match connection.take() {
                Some(open) => open,
                None => Connection::open(gateway).await?,
            };
            let answer = open.exchange(&service_request(fault, stream)).await?;
            Ok::<_, Broken>((open, answer))
        };
        let outcome = tokio::time::timeout(CLIENT_DEADLINE, attempt)
            .await
            .unwrap_or_else(|_| Err(Broken::Lost("no end within the deadline".to_owned())));
        let answer = match outcome {
            Ok((open, answer)) => {
                if !answer.close {
                    connection = Some(open);
                }
                answer
            }
            Err(Broken::Lost(why)) => {
                tally.lost.fetch_add(1, Ordering::Relaxed);
                keep_example(
                    &tally.lost_examples,
                    format!("service {fault} stream={stream}: {why}"),
                )
                .await;
                continue;
            }
            Err(Broken::Desync(why)) => {
                tally.desynced.fetch_add(1, Ordering::Relaxed);
                keep_example(
                    &tally.desync_examples,
                    format!("service {fault} stream={stream}: {why}"),
                )
                .await;
                continue;
            }
        };
        tally.answered.fetch_add(1, Ordering::Relaxed);
        let text = String::from_utf8_lossy(&answer.body);
        let ended_by_error = text.contains("\"error\"");
        let passed = answer.status == 200 && !ended_by_error;
        let blocked = answer.status == 403 || (answer.status == 200 && ended_by_error);
        let trouble =
            if (expect == Expect::Pass && !passed) || (expect == Expect::Block && !blocked) {
                Some(format!("{}, expected {expect:?}", answer.status))
            } else if text.contains("call_invented") || text.contains("wire_money") {
                Some("the service's invented call reached the client".to_owned())
            } else if answer.status == 403 && has_control_characters_in_message(&answer.body) {
                Some("a control character in the error message".to_owned())
            } else {
                None
            };
        if let Some(trouble) = trouble {
            tally.service_misanswered.fetch_add(1, Ordering::Relaxed);
            keep_example(
                &tally.service_misanswer_examples,
                format!("{fault} stream={stream}: {trouble}: {}", clip(&text)),
            )
            .await;
        }
        let mut outcomes = tally.service_outcomes.lock().await;
        let (pass_count, block_count) = outcomes.entry(fault).or_default();
        *if passed { pass_count } else { block_count } += 1;
        drop(outcomes);
        let status = match (answer.status, ended_by_error) {
            (200, true) => "200 (stream ended by an error event)".to_owned(),
            (status, _) => status.to_string(),
        };
        *tally.by_status.lock().await.entry(status).or_default() += 1;
    }
    // Nothing may follow the last answer: the client closes its side, the gateway its own.
    if let Some(open) = connection
        && let Err(Broken::Desync(why) | Broken::Lost(why)) = open.finish().await
    {
        tally.desynced.fetch_add(1, Ordering::Relaxed);
        keep_example(
            &tally.desync_examples,
            format!("service session end: {why}"),
        )
        .await;
    }
}

/// A `/svc` request whose latest user turn names the service's fault; the upstream answers with
/// a valid call of `get_weather`, so only the service decides.
fn service_request(fault: &str, stream: bool) -> Vec<u8> {
    let upstream_fault = if stream { "ok_sse" } else { "ok_json" };
    let body = format!(
        r#"{{"model":"m","stream":{stream},"messages":[{{"role":"user","content":"weather? soak-service:{fault}"}}],"tools":[{{"type":"function","function":{{"name":"get_weather","parameters":{{"type":"object","properties":{{"city":{{"type":"string"}}}},"required":["city"]}}}}}}]}}"#
    );
    format!(
        "POST /svc/v1/chat/completions HTTP/1.1\r\nhost: soak\r\ncontent-type: application/json\r\n\
         x-soak-fault: {upstream_fault}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Whether an error envelope's message holds a control character (they must be removed).
fn has_control_characters_in_message(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|value| value["error"]["message"].as_str().map(str::to_owned))
        .is_some_and(|message| message.chars().any(char::is_control))
}

/// The first 200 characters of an answer, for an example in the report.
fn clip(text: &str) -> String {
    text.chars().take(200).collect()
}

/// Why an exchange on a keep-alive connection failed.
enum Broken {
    /// No answer at all (refused, closed before a head, or too late).
    Lost(String),
    /// Bytes that are not one whole, consistent HTTP answer.
    Desync(String),
}

/// An answer as read off the socket.
struct HttpAnswer {
    status: u16,
    body: Vec<u8>,
    /// The gateway closes the connection after this answer.
    close: bool,
}

/// A client's keep-alive connection and the bytes read off it not consumed yet.
struct Connection {
    socket: TcpStream,
    buffer: Vec<u8>,
}

impl Connection {
    async fn open(gateway: SocketAddr) -> Result<Connection, Broken> {
        let socket = TcpStream::connect(gateway)
            .await
            .map_err(|error| Broken::Lost(format!("connect: {error}")))?;
        Ok(Connection {
            socket,
            buffer: Vec::new(),
        })
    }

    /// Reads more bytes into the buffer; 0 at the end of the stream.
    async fn fill(&mut self) -> Result<usize, Broken> {
        let mut piece = [0u8; 16 * 1024];
        let read = self
            .socket
            .read(&mut piece)
            .await
            .map_err(|error| Broken::Desync(format!("read: {error}")))?;
        self.buffer.extend_from_slice(&piece[..read]);
        Ok(read)
    }

    /// Until the buffer holds `wanted` bytes; the stream ending first cuts the answer.
    async fn fill_to(&mut self, wanted: usize) -> Result<(), Broken> {
        while self.buffer.len() < wanted {
            if self.fill().await? == 0 {
                return Err(Broken::Desync(format!(
                    "the answer was cut: {} of {wanted} bytes",
                    self.buffer.len()
                )));
            }
        }
        Ok(())
    }

    /// Takes one `\r\n`-ended line off the buffer (without its end).
    async fn line(&mut self) -> Result<Vec<u8>, Broken> {
        loop {
            if let Some(at) = self.buffer.windows(2).position(|pair| pair == b"\r\n") {
                let line = self.buffer[..at].to_vec();
                self.buffer.drain(..at + 2);
                return Ok(line);
            }
            if self.buffer.len() > 64 * 1024 {
                return Err(Broken::Desync("a chunk line of over 64 KiB".to_owned()));
            }
            if self.fill().await? == 0 {
                return Err(Broken::Desync("cut inside a chunk line".to_owned()));
            }
        }
    }

    /// Sends `request` and reads its whole answer, which must be consistent and alone.
    async fn exchange(&mut self, request: &[u8]) -> Result<HttpAnswer, Broken> {
        self.socket
            .write_all(request)
            .await
            .map_err(|error| Broken::Lost(format!("write: {error}")))?;
        let (status, framing, close, content_type, head_length) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut response = httparse::Response::new(&mut headers);
            match response.parse(&self.buffer) {
                Ok(httparse::Status::Complete(head_length)) => {
                    let status = response.code.unwrap_or_default();
                    let (framing, close, content_type) = framing_of(response.headers)?;
                    break (status, framing, close, content_type, head_length);
                }
                Ok(httparse::Status::Partial) => {}
                Err(error) => {
                    return Err(Broken::Desync(format!(
                        "not an HTTP answer head ({error}): {:?}",
                        clip(&String::from_utf8_lossy(&self.buffer))
                    )));
                }
            }
            if self.fill().await? == 0 {
                return Err(match self.buffer.is_empty() {
                    true => Broken::Lost("closed before an answer".to_owned()),
                    false => Broken::Desync("closed inside an answer head".to_owned()),
                });
            }
        };
        self.buffer.drain(..head_length);
        let mut close = close;
        let body = match framing {
            Framing::Length(length) => {
                self.fill_to(length).await?;
                self.buffer.drain(..length).collect()
            }
            Framing::Chunked => self.chunked_body().await?,
            Framing::None if status == 204 || status == 304 || status < 200 => Vec::new(),
            Framing::None => {
                while self.fill().await? > 0 {}
                close = true;
                std::mem::take(&mut self.buffer)
            }
        };
        consistent_body(&content_type, &body)?;
        if !self.buffer.is_empty() {
            return Err(Broken::Desync(format!(
                "{} bytes after a {status} answer: {:?}",
                self.buffer.len(),
                clip(&String::from_utf8_lossy(&self.buffer))
            )));
        }
        Ok(HttpAnswer {
            status,
            body,
            close,
        })
    }

    async fn chunked_body(&mut self) -> Result<Vec<u8>, Broken> {
        let mut body = Vec::new();
        loop {
            let line = self.line().await?;
            let size_text = String::from_utf8_lossy(&line);
            let size_text = size_text.split(';').next().unwrap_or_default().trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| Broken::Desync(format!("not a chunk size: {size_text:?}")))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.line().await?.is_empty() {}
                return Ok(body);
            }
            self.fill_to(size + 2).await?;
            if &self.buffer[size..size + 2] != b"\r\n" {
                return Err(Broken::Desync("a chunk longer than its size".to_owned()));
            }
            body.extend(self.buffer.drain(..size));
            self.buffer.drain(..2);
        }
    }

    /// Closes the client's side; the gateway must close its own with nothing more sent.
    async fn finish(mut self) -> Result<(), Broken> {
        let _ = self.socket.shutdown().await;
        let ending = async {
            while self.fill().await? > 0 {}
            Ok::<_, Broken>(())
        };
        // A gateway slow to close is not a desync; bytes are.
        let _ = tokio::time::timeout(Duration::from_secs(2), ending).await;
        match self.buffer.is_empty() {
            true => Ok(()),
            false => Err(Broken::Desync(format!(
                "{} bytes after the last answer: {:?}",
                self.buffer.len(),
                clip(&String::from_utf8_lossy(&self.buffer))
            ))),
        }
    }
}

enum Framing {
    Length(usize),
    Chunked,
    None,
}

/// An answer's framing, whether it closes the connection, and its content type. Two framings,
/// or two lengths, are a desync in the making.
fn framing_of(headers: &[httparse::Header]) -> Result<(Framing, bool, String), Broken> {
    let value = |name: &str| -> Vec<String> {
        headers
            .iter()
            .filter(|header| header.name.eq_ignore_ascii_case(name))
            .map(|header| {
                String::from_utf8_lossy(header.value)
                    .trim()
                    .to_ascii_lowercase()
            })
            .collect()
    };
    let lengths = value("content-length");
    let encodings = value("transfer-encoding");
    let close = value("connection")
        .iter()
        .any(|token| token.contains("close"));
    let content_type = value("content-type").into_iter().next().unwrap_or_default();
    let framing = match (lengths.as_slice(), encodings.as_slice()) {
        ([], []) => Framing::None,
        ([length], []) => Framing::Length(
            length
                .parse()
                .map_err(|_| Broken::Desync(format!("content-length {length:?}")))?,
        ),
        ([], [encoding]) if encoding == "chunked" => Framing::Chunked,
        _ => {
            return Err(Broken::Desync(format!(
                "framing headers content-length {lengths:?}, transfer-encoding {encodings:?}"
            )));
        }
    };
    Ok((framing, close, content_type))
}

/// A body is what its content type says: JSON parses, every SSE `data:` is JSON or `[DONE]`.
fn consistent_body(content_type: &str, body: &[u8]) -> Result<(), Broken> {
    if content_type.contains("json") {
        serde_json::from_slice::<serde_json::Value>(body).map_err(|error| {
            Broken::Desync(format!(
                "a JSON answer that does not parse ({error}): {:?}",
                clip(&String::from_utf8_lossy(body))
            ))
        })?;
    } else if content_type.contains("event-stream") {
        let text = String::from_utf8_lossy(body);
        for data in text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim)
        {
            if data != "[DONE]" && serde_json::from_str::<serde_json::Value>(data).is_err() {
                return Err(Broken::Desync(format!(
                    "an event that is not JSON: {data:?}"
                )));
            }
        }
    }
    Ok(())
}

/// The request for a big answer on `/big`: `size` bytes of text, whole or streamed.
fn big_request(size: usize, stream: bool) -> Vec<u8> {
    let body = format!(
        r#"{{"model":"m","stream":{stream},"messages":[{{"role":"user","content":"a long story, please"}}]}}"#
    );
    let fault = if stream { "big_sse" } else { "big_json" };
    format!(
        "POST /big/v1/chat/completions HTTP/1.1\r\nhost: soak\r\ncontent-type: application/json\r\n\
         x-soak-fault: {fault}\r\nx-soak-size: {size}\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Whether a 200 answer carries all of the text of `size` (as JSON or as a stream, as its
/// content type says).
fn big_answer_whole(answer: &raw_http::RawAnswer, size: usize) -> Result<(), String> {
    if !answer.whole {
        return Err(format!(
            "the body ended after {} bytes, before its framing's end",
            answer.body.len()
        ));
    }
    if answer.trailing > 0 {
        return Err(format!("{} bytes after the body", answer.trailing));
    }
    match answer.header("content-type").unwrap_or_default() {
        kind if kind.contains("event-stream") => big_answers::check_sse(&answer.body, size),
        _ => big_answers::check_json(&answer.body, size),
    }
}

/// A client that reads big answers slowly, one after another until `stop`: each must be whole.
async fn slow_reader(listen: SocketAddr, seed: u64, tally: Arc<Tally>, stop: Arc<AtomicBool>) {
    let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ seed);
    while !stop.load(Ordering::Relaxed) {
        let size = BIG_MIN + random.below(BIG_MAX - BIG_MIN + 1);
        let stream = random.below(2) == 1;
        tally.slow_reads.fetch_add(1, Ordering::Relaxed);
        let began = Instant::now();
        let (counter, trouble) = match slow_read(listen, size, stream, &mut random).await {
            Ok(()) => {
                tally.slow_bytes.fetch_add(size as u64, Ordering::Relaxed);
                (&tally.slow_whole, None)
            }
            Err((status, why)) if status != 200 && status != 0 => (
                &tally.slow_not_ok,
                Some(format!("answered {status}: {why}")),
            ),
            Err((_, why)) => (&tally.slow_cut, Some(why)),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Some(trouble) = trouble {
            keep_example(
                &tally.slow_examples,
                format!(
                    "{size} bytes stream={stream}, after {:.1} s: {trouble}",
                    began.elapsed().as_secs_f64()
                ),
            )
            .await;
        }
    }
}

/// One big answer read 64 KiB at a time with a pause of 20–30 ms after each read; `Err` with
/// the status (0 without one) and what was wrong.
async fn slow_read(
    listen: SocketAddr,
    size: usize,
    stream: bool,
    random: &mut Random,
) -> Result<(), (u16, String)> {
    let mut socket = raw_http::connect_with_receive_buffer(listen, SLOW_RECEIVE_BUFFER)
        .await
        .map_err(|error| (0, format!("connect: {error}")))?;
    socket
        .write_all(&big_request(size, stream))
        .await
        .map_err(|error| (0, format!("write: {error}")))?;
    let deadline = tokio::time::Instant::now() + SLOW_DEADLINE;
    let pause = || Duration::from_millis(20 + random.below(11) as u64);
    let (bytes, ending) = raw_http::read_paced(&mut socket, SLOW_PIECE, pause, deadline).await;
    let answer = raw_http::parse(&bytes).map_err(|why| (0, format!("{why} ({ending:?})")))?;
    if answer.status != 200 {
        return Err((answer.status, clip(&String::from_utf8_lossy(&answer.body))));
    }
    if ending == Ending::Deadline {
        return Err((200, format!("no end within {}s", SLOW_DEADLINE.as_secs())));
    }
    big_answer_whole(&answer, size).map_err(|why| (200, format!("{why} ({ending:?})")))
}

/// A client that asks for a big answer and stops reading, one after another until `stop`: the
/// gateway must end the connection before the answer is all written.
async fn stalled_client(listen: SocketAddr, seed: u64, tally: Arc<Tally>, stop: Arc<AtomicBool>) {
    let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ seed);
    while !stop.load(Ordering::Relaxed) {
        let stream = random.below(2) == 1;
        tally.stalled.fetch_add(1, Ordering::Relaxed);
        match stall(listen, BIG_MAX, stream).await {
            Ok(()) => {
                tally.stalled_let_go.fetch_add(1, Ordering::Relaxed);
            }
            Err(why) => {
                tally.stalled_kept.fetch_add(1, Ordering::Relaxed);
                keep_example(&tally.stalled_examples, format!("stream={stream}: {why}")).await;
            }
        }
    }
}

/// Asks for `size` bytes, reads nothing for [`STALL`], then drains: `Ok` when the connection
/// ended before the answer did.
async fn stall(listen: SocketAddr, size: usize, stream: bool) -> Result<(), String> {
    let mut socket = raw_http::connect_with_receive_buffer(listen, STALL_RECEIVE_BUFFER)
        .await
        .map_err(|error| format!("connect: {error}"))?;
    socket
        .write_all(&big_request(size, stream))
        .await
        .map_err(|error| format!("write: {error}"))?;
    tokio::time::sleep(STALL).await;
    let deadline = tokio::time::Instant::now() + STALL_DRAIN;
    let (bytes, ending) =
        raw_http::read_paced(&mut socket, 256 * 1024, || Duration::ZERO, deadline).await;
    if ending == Ending::Deadline {
        return Err(format!(
            "the connection had not ended {}s after the client read again ({} bytes)",
            STALL_DRAIN.as_secs(),
            bytes.len()
        ));
    }
    let Ok(answer) = raw_http::parse(&bytes) else {
        return Ok(());
    };
    let complete = match answer.status {
        200 => big_answer_whole(&answer, size).is_ok(),
        _ => answer.whole,
    };
    match complete {
        true => Err(format!(
            "a whole {} answer ({} bytes) after {}s without reading",
            answer.status,
            bytes.len(),
            STALL.as_secs()
        )),
        false => Ok(()),
    }
}

/// An MCP client: sessions of [`MCP_CALLS_PER_SESSION`] calls of the echo tool until `stop`,
/// each failure put down to a backend switch under way, or to none.
async fn mcp_client(
    listen: SocketAddr,
    client: usize,
    soak_began: Instant,
    tally: Arc<Tally>,
    watch: Arc<SwitchWatch>,
    stop: Arc<AtomicBool>,
) {
    let mut number = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let before = watch.snapshot();
        let deadline = tokio::time::Instant::now() + MCP_CALL_DEADLINE;
        let mut session = match McpSession::open(listen, "/mcp", deadline).await {
            Ok(session) => session,
            Err(error) => {
                mcp_failure(&tally, &watch, before, "initialize", error).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        tally.mcp_sessions.fetch_add(1, Ordering::Relaxed);
        for _ in 0..MCP_CALLS_PER_SESSION {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            number += 1;
            let message = format!("soak {client}.{number}");
            tally.mcp_calls.fetch_add(1, Ordering::Relaxed);
            let before = watch.snapshot();
            let began_ms = soak_began.elapsed().as_millis() as u64;
            let deadline = tokio::time::Instant::now() + MCP_CALL_DEADLINE;
            let result = session
                .call(MCP_TOOL, json!({ "message": message }), deadline)
                .await;
            match result {
                Ok(result)
                    if result["isError"] != json!(true)
                        && result["content"][0]["text"]
                            .as_str()
                            .is_some_and(|text| text.contains(&message)) =>
                {
                    tally.mcp_ok.fetch_add(1, Ordering::Relaxed);
                    watch.last_ok_began_ms.fetch_max(began_ms, Ordering::SeqCst);
                }
                Ok(result) => {
                    let error =
                        McpError::Http(200, format!("not the echo: {}", clip(&result.to_string())));
                    mcp_failure(&tally, &watch, before, "tools/call", error).await;
                }
                Err(error) => mcp_failure(&tally, &watch, before, "tools/call", error).await,
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        session
            .close(tokio::time::Instant::now() + MCP_CALL_DEADLINE)
            .await;
    }
}

/// Counts an MCP failure: hung, or during a switch (-32002 or not), or with none under way.
async fn mcp_failure(
    tally: &Tally,
    watch: &SwitchWatch,
    before: (bool, u64),
    what: &str,
    error: McpError,
) {
    let during_switch = SwitchWatch::overlapped(before, watch.snapshot());
    let (counter, example) = match &error {
        McpError::Transport { hung: true, .. } => (&tally.mcp_hung, true),
        McpError::Rpc { code: -32002, .. } if during_switch => {
            (&tally.mcp_unavailable_in_switch, false)
        }
        _ if during_switch => (&tally.mcp_other_in_switch, true),
        _ => (&tally.mcp_failed, true),
    };
    counter.fetch_add(1, Ordering::Relaxed);
    if example {
        keep_example(
            &tally.mcp_examples,
            format!("{what} (during a switch: {during_switch}): {error}"),
        )
        .await;
    }
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

/// The faulty upstream: reads a request head, then misbehaves as `x-soak-fault` says.
async fn start_faulty_upstream() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(serve_fault(socket));
        }
    });
    Ok(address)
}

const CALL_OK: &str = r#"{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}"#;
const CALL_BAD: &str =
    r#"{"id":"call_1","type":"function","function":{"name":"wipe_disk","arguments":"{}"}}"#;

fn completion(call: &str) -> String {
    format!(
        r#"{{"id":"chatcmpl-soak","object":"chat.completion","created":1,"model":"m","choices":[{{"index":0,"finish_reason":"tool_calls","message":{{"role":"assistant","content":null,"tool_calls":[{call}]}}}}]}}"#
    )
}

fn stream_events(with_done: bool) -> String {
    let chunk = |delta: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    };
    let mut text = chunk(r#"{"role":"assistant","content":""}"#, "null");
    text += &chunk(r#"{"content":"Checking."}"#, "null");
    text += &chunk(
        r#"{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}"#,
        "null",
    );
    text += &chunk(
        r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}"#,
        "null",
    );
    text += &chunk(
        r#"{"tool_calls":[{"index":0,"function":{"arguments":"\"Oslo\"}"}}]}"#,
        "null",
    );
    text += &chunk("{}", "\"tool_calls\"");
    if with_done {
        text += "data: [DONE]\n\n";
    }
    text
}

async fn serve_fault(mut socket: TcpStream) {
    let mut head = Vec::new();
    let mut buffer = [0u8; 8192];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        match socket.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => head.extend_from_slice(&buffer[..read]),
        }
        if head.len() > 1 << 20 {
            return;
        }
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let fault = text
        .lines()
        .find_map(|line| line.strip_prefix("x-soak-fault:"))
        .map(str::trim)
        .unwrap_or("ok_json")
        .to_owned();
    let json = |status: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let sse_head =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let reply = match fault.as_str() {
        "refuse" => return,
        "ok_json" => json("200 OK", &completion(CALL_OK)),
        "bad_call" => json("200 OK", &completion(CALL_BAD)),
        "ok_sse" => format!("{sse_head}{}", stream_events(true)),
        "sse_cut" => format!("{sse_head}{}", stream_events(false)),
        "error_5xx" => json("503 Service Unavailable", r#"{"error":{"message":"overloaded"}}"#),
        "not_json" => "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 9\r\nconnection: close\r\n\r\nnot json!".to_owned(),
        "truncated_json" => json("200 OK", r#"{"choices":[{"index":0,"message":{"tool_calls":["#),
        "reset_mid_body" => {
            let partial = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 4000\r\n\r\n{\"choices\":[";
            let _ = socket.write_all(partial.as_bytes()).await;
            return;
        }
        "stall_mid_stream" => {
            let events = stream_events(true);
            let cut = events.find("Oslo").unwrap_or(events.len() / 2);
            let _ = socket.write_all(format!("{sse_head}{}", &events[..cut]).as_bytes()).await;
            tokio::time::sleep(Duration::from_secs(20)).await;
            return;
        }
        "slow_head" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            json("200 OK", &completion(CALL_OK))
        }
        "big_json" => json("200 OK", &big_answers::json_body(big_size(&text))),
        "big_sse" => format!("{sse_head}{}", big_answers::sse_body(big_size(&text))),
        hostile if hostile.starts_with("hostile_") => hostile_reply(hostile, sse_head, &json),
        _ => json("400 Bad Request", r#"{"error":{"message":"unknown fault"}}"#),
    };
    let _ = socket.write_all(reply.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// The text size a big answer's request asks for (`x-soak-size`, in a lowercased head).
fn big_size(head: &str) -> usize {
    head.lines()
        .find_map(|line| line.strip_prefix("x-soak-size:"))
        .and_then(|size| size.trim().parse().ok())
        .unwrap_or(BIG_MIN)
        .min(BIG_MAX)
}

/// A hostile answer: a call of `delete_user` hidden where a lenient client still reads it.
fn hostile_reply(fault: &str, sse_head: &str, json: &dyn Fn(&str, &str) -> String) -> String {
    let chunk = |delta: &str| {
        format!(
            "data: {{\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":null}}]}}\n\n"
        )
    };
    let call = format!(
        r#"{{"id":"call_9","type":"function","function":{{"name":"{HOSTILE_TOOL}","arguments":"{{}}"}}}}"#
    );
    match fault {
        "hostile_repeated_key" => json(
            "200 OK",
            &completion(&format!(
                r#"{{"id":"call_9","type":"function","function":{{"name":"get_weather","name":"{HOSTILE_TOOL}","arguments":"{{\"city\":\"Oslo\"}}"}}}}"#
            )),
        ),
        "hostile_string_index" => format!(
            "{sse_head}{}{}data: [DONE]\n\n",
            chunk(&format!(
                r#"{{"tool_calls":[{{"index":"0","id":"call_9","type":"function","function":{{"name":"{HOSTILE_TOOL}","arguments":"{{}}"}}}}]}}"#
            )),
            chunk("{}"),
        ),
        "hostile_foreign_event" => format!(
            "{sse_head}{}event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"{HOSTILE_TOOL}\",\"input\":{{}}}}}}\n\ndata: [DONE]\n\n",
            chunk(r#"{"content":"Checking."}"#),
        ),
        "hostile_stream_as_json" => {
            let body = format!(
                "{}{}data: [DONE]\n\n",
                chunk(&format!(
                    r#"{{"tool_calls":[{}]}}"#,
                    call.replace("{\"id\"", "{\"index\":0,\"id\"")
                )),
                chunk("{}"),
            );
            json("200 OK", &body)
        }
        _ => format!("{sse_head}{}", completion(&call)),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the answers a scripted server sends as one block of bytes, as a soak client does.
    async fn answers_of(bytes: &'static [u8], requests: usize) -> Vec<Result<u16, String>> {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let address = listener.local_addr().expect("bound");
        tokio::spawn(async move {
            if let Ok((mut socket, _)) = listener.accept().await {
                let mut sink = [0u8; 4096];
                let _ = socket.read(&mut sink).await;
                let _ = socket.write_all(bytes).await;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
        let Ok(mut connection) = Connection::open(address).await else {
            panic!("connects to the scripted server");
        };
        let mut results = Vec::new();
        for _ in 0..requests {
            results.push(match connection.exchange(b"GET / HTTP/1.1\r\n\r\n").await {
                Ok(answer) => Ok(answer.status),
                Err(Broken::Desync(why)) => Err(format!("desync: {why}")),
                Err(Broken::Lost(why)) => Err(format!("lost: {why}")),
            });
        }
        results
    }

    #[tokio::test]
    async fn a_chunked_json_answer_is_read_whole() {
        let answer = b"HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\n\
                       transfer-encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n";
        assert_eq!(answers_of(answer, 1).await, vec![Ok(403)]);
    }

    #[tokio::test]
    async fn a_forged_length_is_a_desync() {
        // What a service's `content-length: 3` patch did before issue 22: the rest of the body
        // is read as the next answer.
        let answer =
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 3\r\n\r\n\
                       {\"a\":1}";
        let results = answers_of(answer, 1).await;
        assert!(
            matches!(&results[0], Err(why) if why.starts_with("desync")),
            "{results:?}"
        );
    }

    #[tokio::test]
    async fn two_framings_or_an_event_that_is_not_json_are_desyncs() {
        let both = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n{}";
        assert!(matches!(&answers_of(both, 1).await[0], Err(why) if why.starts_with("desync")));
        let events =
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 14\r\n\
                       \r\ndata: {\"a\":1\n\n";
        assert!(matches!(&answers_of(events, 1).await[0], Err(why) if why.starts_with("desync")));
    }

    #[tokio::test]
    async fn a_connection_closed_before_an_answer_is_lost() {
        let results = answers_of(b"", 1).await;
        assert!(
            matches!(&results[0], Err(why) if why.starts_with("lost")),
            "{results:?}"
        );
    }

    #[test]
    fn a_store_503_is_put_down_to_what_redis_did_meanwhile() {
        let watch = RedisWatch::default();
        let up = watch.snapshot();
        assert_eq!(overlap(up, watch.snapshot()), None);
        watch.begins(StoreEvent::Restart);
        watch.ends(StoreEvent::Restart);
        assert_eq!(overlap(up, watch.snapshot()), Some(StoreEvent::Restart));
        // A restart at once is over when Redis is back: a request after it must not fail.
        let after_restart = watch.snapshot();
        assert_eq!(overlap(after_restart, watch.snapshot()), None);
        watch.begins(StoreEvent::Flip);
        assert_eq!(
            overlap(after_restart, watch.snapshot()),
            Some(StoreEvent::Flip)
        );
        // The others last until the gateway was seen to recover.
        watch.ends(StoreEvent::Flip);
        let recovering = watch.snapshot();
        assert_eq!(overlap(recovering, recovering), Some(StoreEvent::Flip));
        watch.over();
        assert_eq!(
            overlap(recovering, watch.snapshot()),
            Some(StoreEvent::Flip)
        );
        let after = watch.snapshot();
        assert_eq!(overlap(after, watch.snapshot()), None);
    }

    #[test]
    fn an_mcp_failure_is_put_down_to_a_switch_it_overlapped() {
        let watch = SwitchWatch::default();
        let quiet = watch.snapshot();
        assert!(!SwitchWatch::overlapped(quiet, watch.snapshot()));
        watch.set(true);
        assert!(SwitchWatch::overlapped(quiet, watch.snapshot()));
        let during = watch.snapshot();
        watch.set(false);
        assert!(SwitchWatch::overlapped(during, watch.snapshot()));
        let after = watch.snapshot();
        assert!(!SwitchWatch::overlapped(after, watch.snapshot()));
    }

    #[test]
    fn steady_rss_growth_fails_and_a_flat_run_does_not() {
        let flat: Vec<(f64, u64)> = (0..2400).map(|i| (i as f64 / 4.0, 60_000)).collect();
        assert!(!Rss::of(&flat, 600.0, 70_000, 50_000).grew());
        let growing: Vec<(f64, u64)> = (0..2400)
            .map(|i| (i as f64 / 4.0, 60_000 + i as u64 * 40))
            .collect();
        assert!(Rss::of(&growing, 600.0, 200_000, 150_000).grew());
        // A short run is not judged.
        assert!(!Rss::of(&growing[..240], 60.0, 200_000, 150_000).grew());
    }
}
