//! The benchmark's scripted upstream as a process: `bench-upstream [--listen ADDR]` serves
//! prepared chat completions (see `toolgate_bench::upstream`) on a multi-threaded runtime, prints
//! `LISTEN <address>` once bound, and stops on SIGTERM or SIGINT.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use toolgate_bench::upstream::{self, Answers};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen = "127.0.0.1:0".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an address")?,
            "-h" | "--help" => {
                println!("bench-upstream [--listen 127.0.0.1:0]");
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
