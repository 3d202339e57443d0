//! What passes between a caller and a backend during a call: the backend's progress reaches
//! the caller under the caller's own token, and a caller's cancellation ends the call at once
//! (recorded as cancelled) instead of when the backend finishes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ProgressNotificationParam};
use rmcp::service::NotificationContext;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::json;

use super::{arguments, servers_dir, standard_config, start_config, temp_dir};
use crate::common::TestGateway;

/// A client that keeps every progress notification it hears.
#[derive(Clone, Default)]
struct ProgressLog(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl ClientHandler for ProgressLog {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().expect("not poisoned").push(params);
    }
}

/// The standard backends, with time enough for a long operation to be cancelled mid-way.
async fn start(name: &str) -> Option<(super::TempDir, TestGateway)> {
    let servers = servers_dir()?;
    let files = temp_dir(name);
    let config = standard_config(&servers, &files, "")
        .replace("call_timeout_ms = 1500", "call_timeout_ms = 30000");
    let (_upstream, gateway) = start_config(&config, &["everything"]).await;
    Some((files, gateway))
}

/// A long operation of `steps` over `duration` seconds. rmcp's client gives every request a
/// progress token of its own numbering, so the backend reports progress on each.
fn long_operation(duration: u64, steps: u64) -> CallToolRequestParams {
    CallToolRequestParams::new("everything__trigger-long-running-operation")
        .with_arguments(arguments(json!({"duration": duration, "steps": steps})))
}

#[tokio::test]
async fn the_backends_progress_reaches_the_caller_under_its_own_token() {
    let Some((_files, gateway)) = start("progress").await else {
        return;
    };
    let log = ProgressLog::default();
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", gateway.url()))
        .auth_header("sk-dev");
    let client = log
        .clone()
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize");
    // The caller hears its own token, whatever toolgate's request to the backend carried.
    client
        .call_tool_once(long_operation(1, 3))
        .await
        .expect("the operation completes");
    let heard = log.0.lock().expect("not poisoned").clone();
    assert_eq!(heard.len(), 3, "one notification per step: {heard:?}");
    let caller_token = heard[0].progress_token.clone();
    for (step, params) in heard.iter().enumerate() {
        assert_eq!(params.progress_token, caller_token, "{heard:?}");
        assert_eq!(params.progress, (step + 1) as f64);
        assert_eq!(params.total, Some(3.0));
    }
    // A second call is told its own progress, under its own token.
    log.0.lock().expect("not poisoned").clear();
    client
        .call_tool_once(long_operation(1, 2))
        .await
        .expect("the operation completes");
    let heard = log.0.lock().expect("not poisoned").clone();
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert!(
        heard
            .iter()
            .all(|params| params.progress_token != caller_token && params.total == Some(2.0)),
        "{heard:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_concurrent_callers_no_progress_is_lost() {
    let Some((_files, gateway)) = start("progress-race").await else {
        return;
    };
    let url = format!("{}/mcp", gateway.url());
    let callers = (0..4).map(|_| {
        let url = url.clone();
        tokio::spawn(async move {
            let log = ProgressLog::default();
            let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header("sk-dev");
            let client = log
                .clone()
                .serve(StreamableHttpClientTransport::from_config(config))
                .await
                .expect("initialize");
            for round in 0..4 {
                log.0.lock().expect("not poisoned").clear();
                // Short steps: the last progress and the answer leave the backend together.
                client
                    .call_tool_once(long_operation(0, 5))
                    .await
                    .expect("the operation completes");
                // rmcp's client hands each notification to a task of its own, which may run
                // after the answer reached this caller (seconds later on a loaded machine):
                // what is checked is that none is lost.
                let mut heard = 0;
                for _ in 0..500 {
                    heard = log.0.lock().expect("not poisoned").len();
                    if heard >= 5 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert_eq!(
                    heard, 5,
                    "round {round}: every step's progress reached the caller"
                );
            }
        })
    });
    for caller in callers.collect::<Vec<_>>() {
        caller
            .await
            .expect("a caller's calls all heard their progress");
    }
}

#[tokio::test]
async fn a_cancelled_call_ends_at_once_and_is_audited_as_cancelled() {
    let Some((_files, gateway)) = start("cancel").await else {
        return;
    };
    let client = super::connect(&gateway, "sk-dev", None).await;
    let started = Instant::now();
    // Giving up on the call sends notifications/cancelled (rmcp does so when the call is dropped).
    let gave_up = tokio::time::timeout(
        Duration::from_millis(700),
        client.call_tool_once(long_operation(20, 4)),
    )
    .await;
    assert!(gave_up.is_err(), "a 20 s operation answered in 0.7 s");

    // The exchange is closed (and audited) well before the backend's 20 s are over.
    let mut line = None;
    while started.elapsed() < Duration::from_secs(10) && line.is_none() {
        line = gateway
            .audit_lines()
            .into_iter()
            .find(|line| line["mcp"]["method"] == "tools/call");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let line = line.expect("the cancelled call has its audit line within seconds");
    assert_eq!(line["mcp"]["error_code"], -32006, "{line}");
    assert!(started.elapsed() < Duration::from_secs(10));
    gateway
        .assert_metrics_contain(&[
            r#"toolgate_mcp_calls_total{route="/mcp",server="everything",outcome="cancelled"} 1"#,
        ])
        .await;

    // The session goes on.
    super::call(
        &client,
        "everything__echo",
        json!({"message": "still here"}),
    )
    .await
    .expect("the session survives a cancellation");
}
