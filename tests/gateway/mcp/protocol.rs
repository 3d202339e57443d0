//! JSON-RPC that is not a well-formed call, sent raw to the MCP route: a body that is not JSON,
//! one over the size limit, an unknown method, a message that is not JSON-RPC, a call whose
//! params are not a call (-32602) and a session toolgate never issued each get a JSON-RPC
//! error — never a hang.

use serde_json::{Value, json};

use super::{ACCEPT_MCP, kill_backend, servers_dir, standard_config, temp_dir, wait_until_ready};
use crate::common::{ScriptedUpstream, TestGateway};

/// Sends raw bytes to the MCP route as `dev`, in `session` if given, and returns the status and
/// the JSON-RPC answer (read from the data line when it comes as SSE).
async fn raw_post(
    gateway: &TestGateway,
    body: impl Into<reqwest::Body>,
    session: Option<&str>,
) -> (u16, Value) {
    let mut headers = vec![
        ("authorization", "Bearer sk-dev"),
        ("content-type", "application/json"),
        ("accept", ACCEPT_MCP),
    ];
    if let Some(session) = session {
        headers.push(("mcp-session-id", session));
    }
    let response = gateway.post_bytes("/mcp", &headers, body).await;
    let status = response.status().as_u16();
    let text = response.text().await.expect("a body");
    // An SSE answer carries the JSON-RPC message in its data line.
    let json_text = text
        .lines()
        .find_map(|line| {
            line.strip_prefix("data:")
                .map(str::trim)
                .filter(|data| data.starts_with('{'))
        })
        .unwrap_or(text.as_str())
        .to_owned();
    let value = serde_json::from_str(&json_text)
        .unwrap_or_else(|_| panic!("not JSON-RPC ({status}): {text}"));
    (status, value)
}

#[tokio::test]
async fn malformed_messages_unknown_methods_and_oversized_ones_get_json_rpc_errors() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("malformed");
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start_tuned(
        &upstream,
        "max_request_body_bytes = 4096",
        &standard_config(&servers, &files, ""),
    )
    .await;
    wait_until_ready(&gateway, &["everything"]).await;

    let (status, answer) = raw_post(&gateway, "{not json", None).await;
    assert_eq!(status, 400);
    assert_eq!(answer["error"]["code"], -32700);

    let (status, answer) = raw_post(
        &gateway,
        format!("{{\"pad\":\"{}\"}}", "x".repeat(5000)),
        None,
    )
    .await;
    assert_eq!(status, 413);
    assert_eq!(answer["error"]["code"], -32600);
    assert_eq!(answer["error"]["data"]["code"], "message_too_large");

    // A session, then an unknown method and a message that is not JSON-RPC at all.
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let as_dev = [("authorization", "Bearer sk-dev"), ("accept", ACCEPT_MCP)];
    let response = gateway.post_json_with("/mcp", &as_dev, &initialize).await;
    assert_eq!(response.status(), 200);
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .expect("a session id")
        .to_owned();
    let _ = response.text().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let in_session = [as_dev[0], as_dev[1], ("mcp-session-id", session.as_str())];
    gateway
        .post_json_with("/mcp", &in_session, &initialized)
        .await;

    let (_, answer) = raw_post(
        &gateway,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/frobnicate"}).to_string(),
        Some(&session),
    )
    .await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert_eq!(answer["id"], 2);

    let (status, answer) = raw_post(
        &gateway,
        json!({"hello": "world"}).to_string(),
        Some(&session),
    )
    .await;
    assert!(status >= 400, "{status} {answer}");
    assert!(answer["error"]["code"].is_i64(), "{answer}");

    // tools/call whose params are not a call: invalid params (-32602) for that id, whatever is
    // wrong with them; nothing reaches a backend.
    for (id, params) in [
        (3, json!({})),
        (5, json!({"name": 7})),
        (
            6,
            json!({"name": "everything__echo", "arguments": "not an object"}),
        ),
        (7, json!([1, 2])),
    ] {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let (status, answer) = raw_post(&gateway, call.to_string(), Some(&session)).await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["id"], id, "{answer}");
        assert_eq!(answer["error"]["code"], -32602, "{answer}");
        assert_eq!(
            answer["error"]["data"]["code"], "invalid_params",
            "{answer}"
        );
    }
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call"});
    let (_, answer) = raw_post(&gateway, call.to_string(), Some(&session)).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");

    // A session toolgate never issued.
    let (status, answer) = raw_post(
        &gateway,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}).to_string(),
        Some("no-such-session"),
    )
    .await;
    assert!(status >= 400, "{status} {answer}");
    assert!(answer["error"]["code"].is_i64(), "{answer}");
}

/// Opens a session as `key` (and `agent`) with a raw initialize, and returns its id and the
/// capabilities toolgate advertised.
async fn open_session(gateway: &TestGateway, key: &str, agent: Option<&str>) -> (String, Value) {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    let bearer = format!("Bearer {key}");
    let mut headers = vec![("authorization", bearer.as_str()), ("accept", ACCEPT_MCP)];
    if let Some(agent) = agent {
        headers.push(("x-toolgate-agent", agent));
    }
    let response = gateway.post_json_with("/mcp", &headers, &initialize).await;
    assert_eq!(response.status(), 200);
    let session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .expect("a session id")
        .to_owned();
    let text = response.text().await.unwrap_or_default();
    let answer: Value = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:").map(str::trim))
        .find_map(|data| serde_json::from_str(data).ok())
        .or_else(|| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("an initialize result: {text}"));
    (session, answer["result"]["capabilities"].clone())
}

/// Sends `method` in `session` as `key` (and `agent`); returns the HTTP status and the body.
async fn in_session(
    gateway: &TestGateway,
    http_method: reqwest::Method,
    session: &str,
    key: &str,
    agent: Option<&str>,
) -> (u16, String) {
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
    let mut request = crate::common::http()
        .request(http_method, format!("{}/mcp", gateway.url()))
        .bearer_auth(key)
        .header("accept", ACCEPT_MCP)
        .header("content-type", "application/json")
        .header("mcp-session-id", session);
    if let Some(agent) = agent {
        request = request.header("x-toolgate-agent", agent);
    }
    let response = request.body(list.to_string()).send().await.expect("sent");
    let status = response.status().as_u16();
    (status, response.text().await.unwrap_or_default())
}

#[tokio::test]
async fn a_session_belongs_to_the_tenant_and_agent_that_opened_it() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("sessions");
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &standard_config(&servers, &files, "")).await;
    wait_until_ready(&gateway, &["everything"]).await;
    let (session, capabilities) = open_session(&gateway, "sk-dev", None).await;
    // Tools are what toolgate proxies; the backends' resources and prompts are not, so their
    // capabilities are not advertised either.
    assert!(capabilities["tools"].is_object(), "{capabilities}");
    assert!(capabilities.get("resources").is_none(), "{capabilities}");
    assert!(capabilities.get("prompts").is_none(), "{capabilities}");
    let (post, get, delete) = (
        reqwest::Method::POST,
        reqwest::Method::GET,
        reqwest::Method::DELETE,
    );

    // Another tenant, and the same tenant asserting an agent, are strangers to the session:
    // every use of it is answered as for a session that does not exist, and it survives.
    for (key, agent) in [("sk-ops", None), ("sk-dev", Some("reader"))] {
        for method in [post.clone(), get.clone(), delete.clone()] {
            let (status, body) = in_session(&gateway, method.clone(), &session, key, agent).await;
            assert_eq!(status, 404, "{method} as {key} {agent:?}: {body}");
            assert!(body.contains("ession not found"), "{body}");
        }
    }
    let (status, body) = in_session(&gateway, post.clone(), &session, "sk-dev", None).await;
    assert_eq!(status, 200, "the owner still uses it: {body}");
    assert!(
        body.contains("dev__everything__echo") || body.contains("echo"),
        "{body}"
    );

    // Its owner ends it; then it is gone for everyone.
    let (status, body) = in_session(&gateway, delete, &session, "sk-dev", None).await;
    assert!((200..300).contains(&status), "{status} {body}");
    let (status, _) = in_session(&gateway, post, &session, "sk-dev", None).await;
    assert_eq!(status, 404);

    // The refusals are in the audit trail (written by a task of its own: wait, bounded).
    let mut refused = 0;
    for _ in 0..200 {
        refused = (gateway.audit_lines().iter())
            .filter(|line| line["refusal"] == "session_not_owned")
            .count();
        if refused == 6 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(refused, 6, "{:?}", gateway.audit_lines());
}

/// A notification sent before the client opened its listening stream (`GET`) is not lost: it
/// arrives when the stream attaches.
#[tokio::test]
async fn a_notification_sent_before_the_listening_stream_arrives_when_it_attaches() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("early-notice");
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &standard_config(&servers, &files, "")).await;
    let health = wait_until_ready(&gateway, &["everything", "memory"]).await;
    let (session, _) = open_session(&gateway, "sk-dev", None).await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let in_session = [
        ("authorization", "Bearer sk-dev"),
        ("accept", ACCEPT_MCP),
        ("mcp-session-id", session.as_str()),
    ];
    gateway
        .post_json_with("/mcp", &in_session, &initialized)
        .await;

    // The memory backend dies and comes back: every session is told its tools changed, while
    // this one has no listening stream yet.
    let pid = kill_backend(&health, "memory");
    let mut back = false;
    for _ in 0..300 {
        let health = gateway.admin_json("/health").await;
        let memory = &health["mcp_servers"]["memory"];
        if memory["state"] == "ready" && memory["pid"].as_u64() != Some(pid) {
            back = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(back, "memory came back");

    let mut stream = crate::common::http()
        .get(format!("{}/mcp", gateway.url()))
        .bearer_auth("sk-dev")
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("the listening stream opens");
    assert_eq!(stream.status(), 200);
    let mut seen = String::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    while !seen.contains("notifications/tools/list_changed") {
        match tokio::time::timeout_at(deadline, stream.chunk()).await {
            Ok(Ok(Some(chunk))) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            _ => break,
        }
    }
    assert!(
        seen.contains("notifications/tools/list_changed"),
        "the early notification never arrived: {seen:?}"
    );
}
