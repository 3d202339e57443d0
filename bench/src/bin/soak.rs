//! The soak test: sustained load through toolgate (the `dist` build, tool_selection enforcing) in
//! front of an upstream that injects faults at random — refused and reset connections, stalls
//! mid-stream, 5xx, non-JSON and truncated bodies, streams cut without `[DONE]`, slow heads —
//! while the config file is rewritten every few seconds (valid and invalid versions, and
//! SIGHUP). Hostile answers are in the mix too (a repeated key, a string index, a call in
//! another format's event, a stream sent as JSON and JSON sent as a stream), each carrying a
//! call of the undeclared `delete_user`. Hostile clients too: sockets that fill the connection
//! cap and do nothing (silent, an HTTP/2 preface only, an idle keep-alive), and requests whose
//! body is trickled past its deadline, too large (with a length or chunked) or malformed
//! chunked, each of which must get its own answer (408, 413, 400). Loopback only, bounded in
//! time. It reports requests sent and answered, answers by status, lost requests (no HTTP
//! answer, or no end within the client's deadline), misanswered client faults, bypasses (a
//! hostile call released to the client), panics in the gateway's log and its peak RSS, and
//! fails if anything was lost, misanswered, bypassed or panicked.
//!
//! `cargo run --release -p toolgate-bench --bin soak -- [--seconds 600] [--concurrency 32]`

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;
use toolgate_bench::procs::{Process, TempDir, free_port, status_kib};

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
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(toolgate_bench::dist::binary_dir(&target_dir).join("toolgate"))
}

/// The config, in one of three versions: two valid ones that differ (strict or not, an extra
/// route) and an invalid one the gateway must refuse while it keeps serving.
fn config(version: usize, listen: SocketAddr, upstream: SocketAddr, cap: usize) -> String {
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
         [upstreams.faulty]\nurl = \"http://{upstream}\"\nconnect_timeout_ms = 500\n\
         response_timeout_ms = 1000\nread_timeout_ms = 1000\n\n[audit]\noutput = \"off\"\n\n\
         [[plugins]]\nname = \"tool_selection\"\n[plugins.settings]\nstrict = {strict}\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"faulty\"\n{extra}"
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
}

async fn soak(duration: Duration, concurrency: usize) -> Result<bool, String> {
    let dir = TempDir::new("toolgate-soak").map_err(|error| error.to_string())?;
    let binary = toolgate_binary()?;
    let upstream = start_faulty_upstream()
        .await
        .map_err(|error| error.to_string())?;
    let listen = free_port().map_err(|error| error.to_string())?;
    let config_path = dir.0.join("gateway.toml");
    // The idle holders alone fill the cap: every client's connection is let in by reclaiming.
    let cap = concurrency * 2;
    std::fs::write(&config_path, config(0, listen, upstream, cap))
        .map_err(|error| error.to_string())?;
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
        "soak: toolgate {} (pid {pid}) on {listen}, faulty upstream on {upstream}, {concurrency} clients, {}s",
        binary.display(),
        duration.as_secs()
    );

    let tally = Arc::new(Tally::default());
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
        let (tally, stop) = (tally.clone(), stop.clone());
        clients.push(tokio::spawn(async move {
            let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ (worker as u64 + 1));
            while !stop.load(Ordering::Relaxed) {
                // One request in five is a client's fault, the others an upstream's.
                let (fault, expected) = if random.below(5) == 0 {
                    let (fault, status) = CLIENT_FAULTS[random.below(CLIENT_FAULTS.len())];
                    (fault, Some(status))
                } else {
                    (FAULTS[random.below(FAULTS.len())], None)
                };
                let stream = random.below(2) == 1;
                tally.sent.fetch_add(1, Ordering::Relaxed);
                match exchange(listen, fault, stream).await {
                    Ok(Answer {
                        status,
                        released_hostile,
                    }) => {
                        tally.answered.fetch_add(1, Ordering::Relaxed);
                        if released_hostile {
                            tally.bypassed.fetch_add(1, Ordering::Relaxed);
                            let mut examples = tally.bypass_examples.lock().await;
                            if examples.len() < 10 {
                                examples.push(format!("{fault} stream={stream}: {status}"));
                            }
                        }
                        if let Some(expected) = expected
                            && status != expected
                        {
                            tally.misanswered.fetch_add(1, Ordering::Relaxed);
                            let mut examples = tally.misanswer_examples.lock().await;
                            if examples.len() < 10 {
                                examples.push(format!("{fault}: {status}, not {expected}"));
                            }
                        }
                        *tally.by_status.lock().await.entry(status).or_default() += 1;
                    }
                    Err(why) => {
                        tally.lost.fetch_add(1, Ordering::Relaxed);
                        let mut examples = tally.lost_examples.lock().await;
                        if examples.len() < 10 {
                            examples.push(format!("{fault} stream={stream}: {why}"));
                        }
                    }
                }
            }
        }));
    }

    let (mut reloads, mut peak_rss_kib) = (0usize, 0u64);
    let mut next_reload = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        peak_rss_kib = peak_rss_kib.max(status_kib(pid, "VmHWM").unwrap_or(0));
        if gateway.check_alive().is_err() {
            break;
        }
        if Instant::now() >= next_reload {
            reloads += 1;
            let _ = std::fs::write(&config_path, config(reloads, listen, upstream, cap));
            if reloads % 4 == 0 {
                let _ = Command::new("kill")
                    .args(["-HUP", &pid.to_string()])
                    .status();
            }
            next_reload = Instant::now() + Duration::from_secs(3);
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
    let log = std::fs::read_to_string(dir.0.join("toolgate.log")).unwrap_or_default();
    let panics = log.matches("panicked").count();
    let refused_reloads = log.matches("not applied").count();

    let sent = tally.sent.load(Ordering::Relaxed);
    let answered = tally.answered.load(Ordering::Relaxed);
    let lost = tally.lost.load(Ordering::Relaxed);
    let bypassed = tally.bypassed.load(Ordering::Relaxed);
    let misanswered = tally.misanswered.load(Ordering::Relaxed);
    let idle_opened = tally.idle_sockets_opened.load(Ordering::Relaxed);
    let idle_closed = tally.idle_sockets_closed.load(Ordering::Relaxed);
    let mut report = format!(
        "## Soak: {}s, {concurrency} clients, faults at random, config rewritten every 3 s\n\n\
         | measure | value |\n|---|---|\n| requests sent | {sent} |\n| answered | {answered} |\n\
         | lost (no HTTP answer, or none within {}s) | {lost} |\n\
         | bypassed (a hostile call released to the client) | {bypassed} |\n\
         | client faults misanswered (not 408 / 413 / 400) | {misanswered} |\n\
         | idle sockets held at the cap ({cap}): opened / closed by the gateway | {idle_opened} / {idle_closed} |\n\
         | panics in the gateway log | {panics} |\n\
         | config rewrites (every 3rd invalid, every 4th with SIGHUP) | {reloads} |\n\
         | invalid versions refused | {refused_reloads} |\n| gateway alive at the end | {} |\n\
         | peak RSS (VmHWM) | {:.1} MiB |\n\n| status | answers |\n|---|---|\n",
        duration.as_secs(),
        CLIENT_DEADLINE.as_secs(),
        alive.is_ok(),
        peak_rss_kib as f64 / 1024.0
    );
    for (status, count) in tally.by_status.lock().await.iter() {
        report.push_str(&format!("| {status} | {count} |\n"));
    }
    for example in tally.lost_examples.lock().await.iter() {
        report.push_str(&format!("\nlost: {example}"));
    }
    for example in tally.bypass_examples.lock().await.iter() {
        report.push_str(&format!("\nbypassed: {example}"));
    }
    for example in tally.misanswer_examples.lock().await.iter() {
        report.push_str(&format!("\nmisanswered: {example}"));
    }
    println!("{report}");
    let results = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results");
    let _ = std::fs::create_dir_all(&results);
    let _ = std::fs::write(results.join("soak.md"), &report);
    Ok(lost == 0
        && bypassed == 0
        && misanswered == 0
        && panics == 0
        && alive.is_ok()
        && answered == sent)
}

/// What the client got: the status, and whether a hostile call reached it before any error.
struct Answer {
    status: String,
    released_hostile: bool,
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
        // A 200 stream that ended with an error event is answered too, but say so.
        let status = if status == "200" && text.contains("\"error\"") {
            "200 (stream ended by an error event)".to_owned()
        } else {
            status
        };
        Ok(Answer {
            status,
            released_hostile,
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
