//! `[audit] capture`: the exchanges the setting names are kept with their bodies, on the admin
//! listener (`/captures`, `/captures/{request_id}`), without headers, query keys or the values the
//! route redacts, and `toolgate explain` replays one from a file or by its request id.

use std::process::Command;

use serde_json::{Value, json};

use crate::common::answers::request_id;
use crate::common::upstream::chat_stream;
use crate::common::{Reply, ScriptedUpstream, TestGateway, temp_audit_path};

const ROUTES: &str = "[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
    [[routes.plugins]]\nname = \"tool_selection\"\n\
    [[routes.plugins]]\nname = \"tool_arguments\"\n\
    [[routes.plugins.settings.rules]]\ntools = \"login\"\npointer = \"/password\"\n\
    matches = \"\"\naction = \"redact\"\n";

fn request() -> Value {
    let tool = |name: &str| json!({"type": "function", "function": {"name": name, "parameters": {"type": "object"}}});
    json!({"model": "m", "messages": [{"role": "user", "content": "Log me in, then tidy up."}],
           "tools": [tool("login"), tool("get_weather")]})
}

async fn start(capture: &str) -> (ScriptedUpstream, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let config = format!("[audit]\ncapture = \"{capture}\"\n\n{ROUTES}");
    // The test gateway writes its own [audit] output: this one's capture keys join it.
    let gateway = TestGateway::start(&upstream, &config.replace("[audit]\n", "")).await;
    (upstream, gateway)
}

async fn capture_of(gateway: &TestGateway, request_id: &str) -> (u16, Value) {
    let response = gateway.admin_get(&format!("/captures/{request_id}")).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_blocked_exchange_is_captured_without_its_secrets_and_replayed_by_explain() {
    let (upstream, gateway) = start("blocked").await;
    // Allowed: not captured under `blocked`.
    upstream.push(Reply::chat_calls(&[("c1", "get_weather", "{}")]));
    let allowed = gateway.post("/v1/chat/completions", &request()).await;
    assert_eq!(allowed.status(), 200);
    let allowed_id = request_id(&allowed);
    assert_eq!(capture_of(&gateway, &allowed_id).await.0, 404);

    // Blocked: captured, the key in its header and in its query left out.
    upstream.push(Reply::chat_calls(&[(
        "c2",
        "delete_files",
        "{\"path\":\"/\"}",
    )]));
    let blocked = gateway
        .post_json_with(
            "/v1/chat/completions?key=AIzaQUERYSECRET&x=1",
            &[("authorization", "Bearer sk-client-secret")],
            &request(),
        )
        .await;
    assert_eq!(blocked.status(), 403);
    let id = request_id(&blocked);
    let (status, record) = capture_of(&gateway, &id).await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(record["verdict"], "blocked");
    assert_eq!(record["status"], 403);
    assert_eq!(record["path"], "/v1/chat/completions");
    assert!(
        record["request"]
            .as_str()
            .unwrap_or_default()
            .contains("Log me in")
    );
    assert!(
        record["response"]
            .as_str()
            .unwrap_or_default()
            .contains("delete_files")
    );
    assert_eq!(record["violations"][0]["check"], "membership");
    let text = record.to_string();
    assert!(
        !text.contains("sk-client-secret") && !text.contains("AIzaQUERYSECRET"),
        "{text}"
    );
    let listed = gateway.admin_json("/captures").await;
    assert_eq!(
        listed["captures"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    // The audit line does not show the query's key either.
    let audit = gateway.audit_line(&id).await;
    assert!(!audit.to_string().contains("AIzaQUERYSECRET"), "{audit}");

    // Replayed with the configuration, from a file and by its request id.
    let config = temp_audit_path().with_extension("toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\n\
             [upstreams.llm]\nurl = \"http://127.0.0.1:9\"\n{ROUTES}"
        ),
    )
    .expect("writes the config");
    let file = temp_audit_path().with_extension("capture.json");
    std::fs::write(&file, record.to_string()).expect("writes the capture");
    let admin = format!("http://{}", gateway.admin_addr.expect("an admin listener"));
    let explain = move |extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolgate"));
        command.args(["explain", "--config", config.to_str().expect("utf-8")]);
        command.args(extra);
        command.output().expect("toolgate runs")
    };
    let file_arg = file.to_str().expect("utf-8").to_owned();
    let id_arg = id.clone();
    let outputs = tokio::task::spawn_blocking(move || {
        [
            explain(&["--capture", &file_arg]),
            explain(&["--request-id", &id_arg, "--admin", &admin]),
        ]
    })
    .await
    .expect("explain ran");
    for output in outputs {
        let printed = String::from_utf8_lossy(&output.stdout);
        assert_eq!(
            output.status.code(),
            Some(1),
            "{printed}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(printed.contains("route: /v1/chat/completions"), "{printed}");
        assert!(printed.contains("verdict: BLOCKED"), "{printed}");
        assert!(printed.contains("delete_files"), "{printed}");
    }
}

#[tokio::test]
async fn a_captured_answer_holds_the_routes_redactions_whole_and_streamed() {
    let (upstream, gateway) = start("all").await;
    upstream.push(Reply::chat_calls(&[(
        "c1",
        "login",
        "{\"user\":\"ann\",\"password\":\"hunter2\"}",
    )]));
    let whole = gateway.post("/v1/chat/completions", &request()).await;
    assert_eq!(whole.status(), 200);
    let whole_id = request_id(&whole);
    upstream.push(Reply::sse_events(&chat_stream(
        &[(
            "c2",
            "login",
            "{\"user\":\"bob\",\"password\":\"swordfish\"}",
        )],
        None,
    )));
    let mut streamed_request = request();
    streamed_request["stream"] = json!(true);
    let streamed = gateway
        .post("/v1/chat/completions", &streamed_request)
        .await;
    assert_eq!(streamed.status(), 200);
    let streamed_id = request_id(&streamed);
    let streamed_text = streamed.text().await.expect("the stream");
    assert!(
        !streamed_text.contains("swordfish"),
        "the client's stream is redacted"
    );

    for (id, secret, user) in [
        (whole_id, "hunter2", "ann"),
        (streamed_id, "swordfish", "bob"),
    ] {
        let (status, record) = capture_of(&gateway, &id).await;
        assert_eq!(status, 200, "{record}");
        assert_eq!(record["verdict"], "allowed");
        let response = record["response"].as_str().unwrap_or_default();
        assert!(response.contains(user), "the call is captured: {response}");
        assert!(
            !response.contains(secret),
            "redacted as the client got it: {response}"
        );
        assert!(response.contains("REDACTED"), "{response}");
    }
}

#[tokio::test]
async fn a_blocked_answer_is_captured_with_its_other_calls_redacted() {
    let (upstream, gateway) = start("blocked").await;
    upstream.push(Reply::chat_calls(&[
        ("c1", "login", "{\"user\":\"ann\",\"password\":\"hunter2\"}"),
        ("c2", "delete_files", "{\"path\":\"/\"}"),
    ]));
    let blocked = gateway.post("/v1/chat/completions", &request()).await;
    assert_eq!(blocked.status(), 403);
    let id = request_id(&blocked);
    let (status, record) = capture_of(&gateway, &id).await;
    assert_eq!(status, 200, "{record}");
    let response = record["response"].as_str().unwrap_or_default();
    assert!(
        response.contains("delete_files") && response.contains("ann"),
        "{response}"
    );
    assert!(
        !response.contains("hunter2"),
        "redacted though blocked: {response}"
    );
}

/// With the audit output off, `capture = "blocked"` builds nothing for an allowed exchange (no
/// capture, no line for the console) and keeps the blocked one, which the console lists.
#[tokio::test]
async fn without_audit_output_only_what_is_captured_is_recorded() {
    let upstream = ScriptedUpstream::start().await;
    let audit_path = temp_audit_path();
    let text = crate::common::config_text(&upstream.url(), &audit_path, ROUTES).replace(
        &format!("output = \"{}\"", audit_path.display()),
        "output = \"off\"\ncapture = \"blocked\"",
    );
    assert!(text.contains("output = \"off\""), "{text}");
    let gateway =
        TestGateway::start_text(&text, audit_path.clone(), toolgate::Runtime::new()).await;
    upstream.push(Reply::chat_calls(&[("c1", "get_weather", "{}")]));
    let allowed = gateway.post("/v1/chat/completions", &request()).await;
    assert_eq!(allowed.status(), 200);
    let allowed_id = request_id(&allowed);
    upstream.push(Reply::chat_calls(&[("c2", "delete_files", "{}")]));
    let blocked = gateway.post("/v1/chat/completions", &request()).await;
    assert_eq!(blocked.status(), 403);
    let blocked_id = request_id(&blocked);

    assert_eq!(capture_of(&gateway, &allowed_id).await.0, 404);
    assert_eq!(capture_of(&gateway, &blocked_id).await.0, 200);
    let listed: Value = gateway
        .admin_get("/console/api/exchanges")
        .await
        .json()
        .await
        .expect("json");
    let ids: Vec<&str> = (listed["exchanges"].as_array().into_iter().flatten())
        .filter_map(|line| line["request_id"].as_str())
        .collect();
    assert_eq!(ids, [blocked_id.as_str()], "{listed}");
    assert!(!audit_path.exists(), "no audit output written");
}

#[test]
fn capture_settings_out_of_range_are_located_errors() {
    let plugins = toolgate::PluginRegistry::builtin(&mut Default::default());
    let text = "[upstreams.llm]\nurl = \"http://127.0.0.1:9\"\n\
        [audit]\ncapture = \"sometimes\"\ncapture_ring_mib = 0\n\
        [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n";
    let errors = crate::common::answers::config_errors(text, "g.toml", &plugins);
    crate::common::answers::assert_contains_all(
        &errors,
        [
            "g.toml:4:1: audit.capture:",
            "unknown capture 'sometimes' (one of: off, blocked, all)",
            "g.toml:5:1: audit.capture_ring_mib:",
            "must be 1–65536 (MiB)",
        ],
    );
}
