//! The soak test: sustained load through toolgate (the `dist` build, tool_selection enforcing) in
//! front of an upstream that injects faults at random — refused and reset connections, stalls
//! mid-stream, 5xx, non-JSON and truncated bodies, streams cut without `[DONE]`, slow heads —
//! while the config file is rewritten every few seconds (valid and invalid versions, and
//! SIGHUP). Hostile answers are in the mix too (a repeated key, a string index, a call in
//! another format's event, a stream sent as JSON and JSON sent as a stream), each carrying a
//! call of the undeclared `delete_user`. Hostile clients too: sockets that fill the connection
//! cap and do nothing (silent, an HTTP/2 preface only, an idle keep-alive), and requests whose
//! body is trickled past its deadline, too large (with a length or chunked) or malformed
//! chunked, each of which must get its own answer (408, 413, 400). The state store is a real
//! `redis-server` behind a tool_budget on `/v1` (a budget never spent), killed every 20 s and
//! started again on the same port, at once or after an outage of 2 s: a restart must cost no
//! request, and requests while it is down are answered 503 (`fail_mode = "block"`). Requests
//! on `/svc` go through a misbehaving validator service (`toolgate_bench::rogue_service`) on
//! keep-alive connections read by their framing, so a forged length or encoding would show as
//! a desync. Loopback only, bounded in time. It reports requests sent and answered, answers by
//! status, lost requests (no HTTP answer, or no end within the client's deadline), misanswered
//! client faults and service faults, desyncs, store answers by Redis's state, bypasses (a
//! hostile call released to the client), panics in the gateway's log and its peak RSS, and
//! fails if anything was lost, misanswered, desynced, bypassed or panicked, or if a budgeted
//! request got 503 while Redis was up throughout.
//!
//! `cargo run --release -p toolgate-bench --bin soak -- [--seconds 600] [--concurrency 32]`

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use toolgate_bench::procs::{Process, TempDir, free_port, status_kib};
use toolgate_bench::redis::RedisServer;
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

/// How often Redis is killed, and how long it stays down every other time (the other times it
/// is started again at once).
const REDIS_EVERY: Duration = Duration::from_secs(20);
const REDIS_OUTAGE: Duration = Duration::from_secs(2);

/// Exchanges a service client makes on one keep-alive connection.
const SERVICE_EXCHANGES_PER_CONNECTION: usize = 3;

/// What the gateway's config points at.
#[derive(Clone, Copy)]
struct Addresses {
    listen: SocketAddr,
    upstream: SocketAddr,
    service: SocketAddr,
    redis_port: u16,
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
/// breaker never opens, so every `/svc` answer is what the service's own answer calls for.
fn config(version: usize, at: Addresses, cap: usize) -> String {
    let Addresses {
        listen,
        upstream,
        service,
        redis_port,
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
        "[server]\nlisten = \"{listen}\"\nadmin_listen = \"off\"\nshutdown_grace_ms = 5000\n\
         max_connections = {cap}\nmax_request_body_bytes = {BODY_CAP}\nfirst_byte_timeout_ms = 2000\n\
         handshake_timeout_ms = 4000\nidle_timeout_ms = 5000\nrequest_body_timeout_ms = 2000\n\
         request_body_deadline_ms = 3000\n\n\
         [store]\nurl = \"redis://127.0.0.1:{redis_port}\"\nfail_mode = \"block\"\ntimeout_ms = 500\n\n\
         [upstreams.faulty]\nurl = \"http://{upstream}\"\nconnect_timeout_ms = 500\n\
         response_timeout_ms = 1000\nread_timeout_ms = 1000\n\n[audit]\noutput = \"off\"\n\n\
         [services.rogue]\nurl = \"http://{service}/validate\"\ntimeout_ms = {SERVICE_TIMEOUT_MS}\n\
         breaker_failures = 1000000\n\n\
         [[plugins]]\nname = \"tool_selection\"\n[plugins.settings]\nstrict = {strict}\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"faulty\"\n\
         [[routes.plugins]]\nname = \"tool_budget\"\n[routes.plugins.settings]\ncount = \"proposed\"\n\
         [[routes.plugins.settings.budgets]]\ntools = \"*\"\nlimits = [\"1000000000/day\"]\n\n\
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
}

/// Keeps up to 10 examples of one kind of trouble for the report.
async fn keep_example(examples: &Mutex<Vec<String>>, example: String) {
    let mut examples = examples.lock().await;
    if examples.len() < 10 {
        examples.push(example);
    }
}

/// Redis as the clients see it: what it was doing when a request began and ended, so a 503 of
/// the store is put down to an outage, a restart, or neither.
#[derive(Default)]
struct RedisWatch {
    /// `UP`, `RESTARTING` (killed, started again at once) or `OUT` (killed for an outage).
    state: AtomicU8,
    /// Bumped when a restart or an outage begins and when it ends.
    restarts: AtomicU64,
    outages: AtomicU64,
}

const UP: u8 = 0;
const RESTARTING: u8 = 1;
const OUT: u8 = 2;

#[derive(Clone, Copy, PartialEq, Eq)]
struct RedisSnapshot {
    state: u8,
    restarts: u64,
    outages: u64,
}

/// What Redis did between two snapshots.
#[derive(PartialEq, Eq)]
enum RedisOverlap {
    Outage,
    Restart,
    UpThroughout,
}

impl RedisWatch {
    fn snapshot(&self) -> RedisSnapshot {
        RedisSnapshot {
            state: self.state.load(Ordering::SeqCst),
            restarts: self.restarts.load(Ordering::SeqCst),
            outages: self.outages.load(Ordering::SeqCst),
        }
    }

    /// Called before Redis is killed.
    fn going_down(&self, outage: bool) {
        let (state, counter) = match outage {
            true => (OUT, &self.outages),
            false => (RESTARTING, &self.restarts),
        };
        self.state.store(state, Ordering::SeqCst);
        counter.fetch_add(1, Ordering::SeqCst);
    }

    /// Called once Redis answers PING again.
    fn back_up(&self) {
        match self.state.swap(UP, Ordering::SeqCst) {
            OUT => self.outages.fetch_add(1, Ordering::SeqCst),
            _ => self.restarts.fetch_add(1, Ordering::SeqCst),
        };
    }
}

fn overlap(before: RedisSnapshot, after: RedisSnapshot) -> RedisOverlap {
    if before.state == OUT || after.state == OUT || before.outages != after.outages {
        RedisOverlap::Outage
    } else if before != after || before.state == RESTARTING {
        RedisOverlap::Restart
    } else {
        RedisOverlap::UpThroughout
    }
}

async fn soak(duration: Duration, concurrency: usize) -> Result<bool, String> {
    let dir = TempDir::new("toolgate-soak").map_err(|error| error.to_string())?;
    let binary = toolgate_binary()?;
    let upstream = start_faulty_upstream()
        .await
        .map_err(|error| error.to_string())?;
    let service = rogue_service::start()
        .await
        .map_err(|error| error.to_string())?;
    // Started from the main thread, as every child (see `Process::start`).
    let mut redis = RedisServer::start(dir.0.clone())?;
    let listen = free_port().map_err(|error| error.to_string())?;
    let at = Addresses {
        listen,
        upstream,
        service,
        redis_port: redis.port(),
    };
    let config_path = dir.0.join("gateway.toml");
    // The idle holders alone fill the cap: every client's connection is let in by reclaiming.
    let cap = concurrency * 2;
    std::fs::write(&config_path, config(0, at, cap)).map_err(|error| error.to_string())?;
    let mut command = Command::new(&binary);
    command
        .args(["serve", "--config"])
        .arg(&config_path)
        .env("TOOLGATE_LOG", "warn");
    let mut gateway =
        Process::start("toolgate", command, &dir.0).map_err(|error| error.to_string())?;
    gateway.wait_for_port(listen, Duration::from_secs(10))?;
    let pid = gateway.pid();
    println!(
        "soak: toolgate {} (pid {pid}) on {listen}, faulty upstream on {upstream}, service on \
         {service}, {} , {concurrency} clients, {}s",
        binary.display(),
        redis.url(),
        duration.as_secs()
    );

    let tally = Arc::new(Tally::default());
    let watch = Arc::new(RedisWatch::default());
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + duration;
    let mut holders = Vec::new();
    for holder in 0..cap {
        let (tally, stop) = (tally.clone(), stop.clone());
        holders.push(tokio::spawn(hold_idle_sockets(
            listen,
            IdleKind::ALL[holder % IdleKind::ALL.len()],
            tally,
            stop,
        )));
    }
    let mut clients = Vec::new();
    for worker in 0..concurrency {
        let (tally, watch, stop) = (tally.clone(), watch.clone(), stop.clone());
        clients.push(tokio::spawn(async move {
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

    let (mut reloads, mut peak_rss_kib) = (0usize, 0u64);
    let (mut redis_restarts, mut redis_outages) = (0u64, 0u64);
    let mut next_reload = Instant::now() + Duration::from_secs(3);
    let mut next_redis_kill = Instant::now() + REDIS_EVERY / 2;
    let mut redis_back_at: Option<Instant> = None;
    let mut redis_failure = None;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        peak_rss_kib = peak_rss_kib.max(status_kib(pid, "VmHWM").unwrap_or(0));
        if gateway.check_alive().is_err() {
            break;
        }
        if Instant::now() >= next_reload {
            reloads += 1;
            let _ = std::fs::write(&config_path, config(reloads, at, cap));
            if reloads % 4 == 0 {
                let _ = Command::new("kill")
                    .args(["-HUP", &pid.to_string()])
                    .status();
            }
            next_reload = Instant::now() + Duration::from_secs(3);
        }
        // Redis is killed every REDIS_EVERY; every other time it stays down for REDIS_OUTAGE.
        let redis_due = match redis_back_at {
            Some(back_at) => Instant::now() >= back_at,
            None => Instant::now() >= next_redis_kill,
        };
        if redis_due {
            if redis_back_at.is_none() {
                let outage = (redis_restarts + redis_outages) % 2 == 1;
                watch.going_down(outage);
                redis.kill();
                if outage {
                    redis_outages += 1;
                    redis_back_at = Some(Instant::now() + REDIS_OUTAGE);
                    continue;
                }
                redis_restarts += 1;
            }
            if let Err(error) = redis.restart() {
                redis_failure = Some(error);
                break;
            }
            watch.back_up();
            redis_back_at = None;
            next_redis_kill = Instant::now() + REDIS_EVERY;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        let _ = client.await;
    }
    for holder in holders {
        let _ = holder.await;
    }
    let alive = gateway.check_alive();
    peak_rss_kib = peak_rss_kib.max(status_kib(pid, "VmHWM").unwrap_or(0));
    drop(gateway);
    drop(redis);
    if let Some(error) = redis_failure {
        return Err(format!("redis-server did not come back: {error}"));
    }
    let log = std::fs::read_to_string(dir.0.join("toolgate.log")).unwrap_or_default();
    let panics = log.matches("panicked").count();
    let refused_reloads = log.matches("not applied").count();

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
    let store_up = count(&tally.store_up_answers);
    let service_exchanges = count(&tally.service_exchanges);
    let service_misanswered = count(&tally.service_misanswered);
    let desynced = count(&tally.desynced);
    let mut report = format!(
        "## Soak: {}s, {concurrency} clients, faults at random, config rewritten every 3 s, \
         Redis killed every {} s, a misbehaving validator service\n\n\
         | measure | value |\n|---|---|\n| requests sent | {sent} |\n| answered | {answered} |\n\
         | lost (no HTTP answer, or none within {}s) | {lost} |\n\
         | desynced (not one whole HTTP answer with a consistent body, or bytes after it) | {desynced} |\n\
         | bypassed (a hostile call released to the client) | {bypassed} |\n\
         | client faults misanswered (not 408 / 413 / 400) | {misanswered} |\n\
         | idle sockets held at the cap ({cap}): opened / closed by the gateway | {idle_opened} / {idle_closed} |\n\
         | Redis killed (SIGKILL) and started again on its port: at once / after {} s down | {redis_restarts} / {redis_outages} |\n\
         | budgeted answers 503 `state_store_unavailable`: store down (during an outage) | {store_down} |\n\
         | … across a restart at once (Redis down for its start-up) | {store_restart} |\n\
         | … with Redis up throughout (a restart costing a request) | {store_up} |\n\
         | exchanges through the misbehaving service (keep-alive, {SERVICE_EXCHANGES_PER_CONNECTION} a connection) | {service_exchanges} |\n\
         | service faults misanswered (passed when it had to block, or the reverse) | {service_misanswered} |\n\
         | panics in the gateway log | {panics} |\n\
         | config rewrites (every 3rd invalid, every 4th with SIGHUP) | {reloads} |\n\
         | invalid versions refused | {refused_reloads} |\n| gateway alive at the end | {} |\n\
         | peak RSS (VmHWM) | {:.1} MiB |\n\n| status | answers |\n|---|---|\n",
        duration.as_secs(),
        REDIS_EVERY.as_secs(),
        CLIENT_DEADLINE.as_secs(),
        REDIS_OUTAGE.as_secs(),
        alive.is_ok(),
        peak_rss_kib as f64 / 1024.0
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
    ];
    for (kind, list) in examples {
        for example in list.lock().await.iter() {
            report.push_str(&format!("\n{kind}: {example}"));
        }
    }
    println!("{report}");
    let results = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results");
    let _ = std::fs::create_dir_all(&results);
    let _ = std::fs::write(results.join("soak.md"), &report);
    Ok(lost == 0
        && desynced == 0
        && bypassed == 0
        && misanswered == 0
        && service_misanswered == 0
        && store_up == 0
        && panics == 0
        && alive.is_ok()
        && answered == sent)
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
                    RedisOverlap::Outage => &tally.store_down_answers,
                    RedisOverlap::Restart => &tally.store_restart_answers,
                    RedisOverlap::UpThroughout => {
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
        hostile if hostile.starts_with("hostile_") => hostile_reply(hostile, sse_head, &json),
        _ => json("400 Bad Request", r#"{"error":{"message":"unknown fault"}}"#),
    };
    let _ = socket.write_all(reply.as_bytes()).await;
    let _ = socket.shutdown().await;
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
        assert!(overlap(up, watch.snapshot()) == RedisOverlap::UpThroughout);
        watch.going_down(false);
        watch.back_up();
        assert!(overlap(up, watch.snapshot()) == RedisOverlap::Restart);
        let after_restart = watch.snapshot();
        watch.going_down(true);
        assert!(overlap(after_restart, watch.snapshot()) == RedisOverlap::Outage);
        watch.back_up();
        assert!(overlap(after_restart, watch.snapshot()) == RedisOverlap::Outage);
    }
}
