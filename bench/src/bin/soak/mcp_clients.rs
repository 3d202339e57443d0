//! The soak's MCP side: clients calling the echo tool through the gateway's MCP route, the
//! backend's switches behind the TCP front (each must be seen on the admin `/health` and a call
//! must succeed after it), and whether a failed call overlapped a switch.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::task::JoinHandle;
use toolgate_bench::mcp::{self, McpError, McpSession};

use crate::{
    MCP_CALL_DEADLINE, MCP_CALLS_PER_SESSION, MCP_RECOVERY, MCP_SERVER, MCP_SWITCH_EVERY, MCP_TOOL,
    Tally, clip, keep_example,
};

/// The MCP backend as the clients see it: whether a switch is under way (from the switch until
/// the gateway was seen to restart the backend and a call succeeded after that).
#[derive(Default)]
pub struct SwitchWatch {
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

    pub fn set(&self, switching: bool) {
        self.switching.store(switching, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether a call between `before` and `after` overlapped a switch.
    fn overlapped(before: (bool, u64), after: (bool, u64)) -> bool {
        before.0 || after.0 || before.1 != after.1
    }
}

/// The MCP backend's `restarts` on the admin `/health` once it is `ready`, waiting up to `wait`.
pub async fn mcp_restarts(admin: SocketAddr, wait: Duration) -> Result<u64, String> {
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

/// The MCP backend's switches as they happen.
pub struct SwitchTimeline {
    next: Instant,
    /// The watcher of the switch under way.
    under_way: Option<JoinHandle<Result<(Duration, Duration), String>>>,
    pub made: u64,
    /// Switches seen on `/health` and followed by a successful call, and the slowest of each.
    pub recovered: u64,
    pub slowest_seen: Duration,
    pub slowest_recovered: Duration,
    pub failures: Vec<String>,
}

impl SwitchTimeline {
    pub fn new(first: Instant) -> SwitchTimeline {
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

    pub fn due(&self) -> bool {
        self.under_way.is_none() && Instant::now() >= self.next
    }

    pub fn postpone(&mut self) {
        self.next = Instant::now() + Duration::from_secs(1);
    }

    pub fn began(&mut self, watcher: JoinHandle<Result<(Duration, Duration), String>>) {
        self.made += 1;
        self.under_way = Some(watcher);
        self.next = Instant::now() + MCP_SWITCH_EVERY;
    }

    /// Collects the switch under way once its watcher is done.
    pub async fn collect(&mut self, watch: &SwitchWatch) {
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
    pub fn abandon(&mut self, watch: &SwitchWatch) {
        if let Some(watcher) = self.under_way.take() {
            watcher.abort();
            self.made -= 1;
            watch.set(false);
        }
    }
}

/// After a switch of the MCP backend: how long until `/health` showed it restarted (`restarts`
/// above `before`, `ready`), and until a call that began after that succeeded.
pub async fn watch_switch(
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

/// An MCP client: sessions of [`MCP_CALLS_PER_SESSION`] calls of the echo tool until `stop`,
/// each failure put down to a backend switch under way, or to none.
pub async fn mcp_client(
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
