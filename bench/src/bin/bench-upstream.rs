//! The benchmark's scripted upstream as a process: `bench-upstream [--listen ADDR]` serves
//! prepared chat completions (see `toolgate_bench::upstream`) on a multi-threaded runtime, prints
//! `LISTEN <address>` once bound, and stops on SIGTERM or SIGINT. `--write-requests DIR` writes
//! the table's request bodies there instead (`request.json`, `request-history.json`,
//! `request-agent-turns-50k.json`, `request-agent-turns-200k.json`), for load generators other
//! than the driver (`bench/hop-cpu.sh`, `bench/ab-cpu.sh`).

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use toolgate_bench::upstream::{self, Answers};
use toolgate_bench::workload::{self, AGENT_TURN_BYTES, HISTORY_BYTES, RequestSpec};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen = "127.0.0.1:0".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an address")?,
            "--write-requests" => {
                let dir = std::path::PathBuf::from(
                    args.next().ok_or("--write-requests needs a directory")?,
                );
                let history = RequestSpec {
                    message_bytes: HISTORY_BYTES,
                    ..RequestSpec::default()
                };
                std::fs::write(
                    dir.join("request.json"),
                    workload::request_body(RequestSpec::default()),
                )?;
                std::fs::write(
                    dir.join("request-history.json"),
                    workload::request_body(history),
                )?;
                for bytes in AGENT_TURN_BYTES {
                    let agent = RequestSpec {
                        agent_turn_bytes: bytes,
                        ..RequestSpec::default()
                    };
                    std::fs::write(
                        dir.join(format!("request-agent-turns-{}k.json", bytes / 1000)),
                        workload::request_body(agent),
                    )?;
                }
                return Ok(());
            }
            "-h" | "--help" => {
                println!("bench-upstream [--listen 127.0.0.1:0] | --write-requests DIR");
                return Ok(());
            }
            other => return Err(format!("unknown argument '{other}'").into()),
        }
    }
    let listener = TcpListener::bind(&listen).await?;
    println!("LISTEN {}", listener.local_addr()?);
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let shutdown = async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    };
    upstream::run(listener, Arc::new(Answers::new()), shutdown).await;
    Ok(())
}
