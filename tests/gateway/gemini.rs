//! Gemini as the fourth format, end to end: Google's own SDKs (`google-genai` from PyPI,
//! `@google/genai` from npm) talk to a guarded `/v1beta` route in front of the scripted
//! upstream, whole and streamed, allowed and blocked; the blocked answer recovers as the route's
//! `on_block` says; the format, the model and the stream come from the path.

use serde_json::{Value, json};

use crate::common::{Reply, ScriptedUpstream, TestGateway, fixture, fixture_json};

const MODEL: &str = "gemini-2.5-flash";

fn route(on_block: &str) -> String {
    format!(
        "[[routes]]\npath = \"/v1beta\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_selection\"\non_block = \"{on_block}\"\n"
    )
}

/// One SDK case from a recorded exchange's request (its contents and tools).
fn case(name: &str, exchange: &str, stream: bool) -> Value {
    let request = fixture_json(&format!("gemini/{exchange}.request.json"));
    json!({"case": name, "stream": stream, "model": MODEL,
           "contents": request["contents"], "tools": request["tools"]})
}

fn queue(upstream: &ScriptedUpstream, exchange: &str, stream: bool) {
    if stream {
        upstream.push(Reply::sse_chunked(
            &fixture(&format!("gemini/{exchange}.sse")),
            41,
        ));
    } else {
        upstream.push(Reply::json(
            200,
            fixture_json(&format!("gemini/{exchange}.response.json")),
        ));
    }
}

/// The four cases both SDKs run: an allowed call whole and two streamed, an undeclared call
/// whole, a schema violation streamed.
async fn four_cases() -> (ScriptedUpstream, TestGateway, Vec<Value>) {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &route("error")).await;
    let plan = [
        ("allowed", "text_then_function_call", false),
        ("allowed_streamed", "calls_across_chunks", true),
        ("undeclared", "undeclared_call", false),
        ("schema_streamed", "schema_violation", true),
    ];
    let mut cases = Vec::new();
    for (name, exchange, stream) in plan {
        queue(&upstream, exchange, stream);
        cases.push(case(name, exchange, stream));
    }
    (upstream, gateway, cases)
}

fn by_case(printed: &str) -> Vec<Value> {
    printed
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("a JSON line: {line}")))
        .collect()
}

fn names(seen: &Value) -> Vec<&str> {
    (seen["calls"].as_array().into_iter().flatten())
        .filter_map(|call| call["name"].as_str())
        .collect()
}

/// What both SDKs must have seen, and what the upstream must have been asked.
fn assert_the_four_cases(seen: &[Value], upstream: &ScriptedUpstream) {
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(seen[0]["error"], Value::Null, "{}", seen[0]);
    assert_eq!(names(&seen[0]), ["get_weather"]);
    assert_eq!(
        seen[0]["calls"][0]["args"],
        json!({"city": "Paris", "unit": "celsius"})
    );
    assert_eq!(seen[0]["text"], "Let me check.");
    assert_eq!(seen[1]["error"], Value::Null, "{}", seen[1]);
    assert_eq!(names(&seen[1]), ["get_weather", "send_email"]);
    assert_eq!(seen[1]["calls"][0]["args"]["city"], "Par\u{ed}s \"x\"");
    for (blocked, tool) in [(&seen[2], "delete_user"), (&seen[3], "send_email")] {
        assert_eq!(
            names(blocked),
            Vec::<&str>::new(),
            "no call reached the user: {blocked}"
        );
        let error = &blocked["error"];
        assert!(
            error["code"] == 403 || error["status"] == 403,
            "a 403 the SDK raised: {blocked}"
        );
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(tool),
            "the message names the call: {blocked}"
        );
    }
    let requests = upstream.requests();
    let targets: Vec<&str> = requests
        .iter()
        .map(|request| request.path_and_query.as_str())
        .collect();
    assert_eq!(
        targets,
        [
            "/v1beta/models/gemini-2.5-flash:generateContent",
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            "/v1beta/models/gemini-2.5-flash:generateContent",
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        ]
    );
    assert!(
        requests
            .iter()
            .all(|request| request.header("x-goog-api-key") == Some("client-gemini-key")),
        "the client's key goes on as the SDK sent it"
    );
}

#[tokio::test]
async fn the_gen_ai_python_sdk_reads_allowed_calls_and_raises_on_blocked_ones() {
    if !crate::common::python_imports("google.genai") {
        return;
    }
    let (upstream, gateway, cases) = four_cases().await;
    let script =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/gemini.py"))
            .expect("tests/sdk/gemini.py");
    let mut command = tokio::process::Command::new("python3");
    command.args([
        "-c",
        &script,
        &gateway.url(),
        &Value::Array(cases).to_string(),
    ]);
    let output = command.output().await.expect("python3 runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen = by_case(&printed);
    assert_the_four_cases(&seen, &upstream);
    // The Python SDK keeps the body: Google's status name, and toolgate's violations.
    let error = &seen[2]["error"];
    assert_eq!(error["class"], "ClientError");
    assert_eq!(error["status"], "PERMISSION_DENIED");
    assert_eq!(
        error["details"]["error"]["violations"][0]["check"],
        "membership"
    );
    assert_eq!(
        seen[3]["error"]["details"]["error"]["violations"][0]["check"],
        "schema"
    );
}

#[tokio::test]
async fn googles_node_sdk_reads_allowed_calls_and_throws_on_blocked_ones() {
    let packages = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/frameworks");
    if !packages
        .join("node_modules/@google/genai/package.json")
        .exists()
    {
        crate::common::skip_for_missing(
            &format!("the Node package @google/genai in {}", packages.display()),
            "run .ci/frameworks.sh",
        );
        return;
    }
    let (upstream, gateway, cases) = four_cases().await;
    let script =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sdk/gemini.mjs"))
            .expect("tests/sdk/gemini.mjs");
    let output = tokio::process::Command::new("node")
        .args(["--input-type=module", "-e", &script])
        .arg(gateway.url())
        .arg(Value::Array(cases).to_string())
        .current_dir(&packages)
        .output()
        .await
        .expect("node runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen = by_case(&printed);
    assert_the_four_cases(&seen, &upstream);
    // The Node SDK's message is the whole error body: the violations are in it.
    let message = seen[2]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("\"violations\"") && message.contains("membership"),
        "{message}"
    );
}

#[tokio::test]
async fn a_blocked_call_is_retried_with_an_error_response_the_model_reads() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &route("retry")).await;
    queue(&upstream, "undeclared_call", false);
    queue(&upstream, "text_then_function_call", false);
    let request = fixture_json("gemini/undeclared_call.request.json");
    let response = gateway
        .post("/v1beta/models/gemini-2.5-flash:generateContent", &request)
        .await;
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.expect("json");
    let parts = &answer["candidates"][0]["content"]["parts"];
    assert_eq!(parts[1]["functionCall"]["name"], "get_weather", "{answer}");
    let requests = upstream.requests();
    assert_eq!(requests.len(), 2);
    let retried = requests[1].json();
    let contents = retried["contents"].as_array().expect("contents");
    assert_eq!(
        contents.len(),
        3,
        "the user turn, the blocked model turn, the responses"
    );
    assert_eq!(contents[1]["role"], "model");
    assert_eq!(
        contents[1]["parts"][0]["functionCall"]["name"],
        "delete_user"
    );
    let result = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(result["name"], "delete_user");
    assert_eq!(result["id"], "c9");
    let why = result["response"]["error"].as_str().unwrap_or_default();
    assert!(why.contains("delete_user"), "{retried}");
    // The blocked attempt's usage is billed into the answer the client gets.
    assert_eq!(answer["usageMetadata"]["totalTokenCount"], 104, "{answer}");
}

#[tokio::test]
async fn a_blocked_stream_on_a_message_route_ends_as_a_text_answer() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &route("message")).await;
    queue(&upstream, "schema_violation", true);
    let request = fixture_json("gemini/schema_violation.request.json");
    let response = gateway
        .post(
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            &request,
        )
        .await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("a body");
    let read = toolgate_formats::stream::reassemble(
        toolgate_formats::WireFormat::Gemini,
        [text.as_bytes()],
    );
    assert_eq!(read.refused, None, "{text}");
    assert!(read.response.calls.is_empty(), "{text}");
    assert!(
        text.contains("send_email") && !text.contains("functionCall"),
        "{text}"
    );
}

#[tokio::test]
async fn a_gemini_path_on_a_catch_all_route_is_read_as_gemini_and_guarded() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        "[[plugins]]\nname = \"tool_selection\"\n\n[[routes]]\npath = \"/\"\nupstream = \"llm\"\n",
    )
    .await;
    queue(&upstream, "undeclared_call", false);
    let request = fixture_json("gemini/undeclared_call.request.json");
    // Vertex AI's path: the verb at the end names the format, whatever comes before.
    let response = gateway
        .post(
            "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent",
            &request,
        )
        .await;
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.expect("json");
    assert_eq!(
        body["error"]["status"], "PERMISSION_DENIED",
        "a Google-shaped error: {body}"
    );
    assert_eq!(body["error"]["violations"][0]["tool"], "delete_user");
    let audit = gateway.audit_lines_until(|lines| !lines.is_empty()).await;
    assert_eq!(
        audit[0]["declared_tools"],
        json!(["get_weather", "send_email"]),
        "the request was read as Gemini's: {}",
        audit[0]
    );
}

#[tokio::test]
async fn permissions_and_budgets_act_on_gemini_declarations_and_calls() {
    let upstream = ScriptedUpstream::start().await;
    let config = "[[routes]]\npath = \"/v1beta\"\nupstream = \"llm\"\n\
        [[routes.plugins]]\nname = \"tool_permission\"\n[routes.plugins.settings]\n\
        allow = [\"get_weather\", \"send_email\"]\ndeny = [\"send_email\"]\n\
        [[routes.plugins]]\nname = \"tool_budget\"\n[routes.plugins.settings]\ncount = \"proposed\"\n\
        [[routes.plugins.settings.budgets]]\ntools = \"get_weather\"\nlimits = [\"1/30d\"]\n\
        [[routes.plugins]]\nname = \"tool_selection\"\n";
    let gateway = TestGateway::start(&upstream, config).await;
    let path = "/v1beta/models/gemini-2.5-flash:generateContent";
    let request = fixture_json("gemini/text_then_function_call.request.json");

    // The denied tool is taken out of the declarations the model sees; the call passes.
    queue(&upstream, "text_then_function_call", false);
    let response = gateway.post(path, &request).await;
    let status = response.status();
    assert_eq!(status, 200, "{}", response.text().await.unwrap_or_default());
    let offered = upstream.last_request().expect("forwarded").json();
    let declared: Vec<&str> = (offered["tools"].as_array().into_iter().flatten())
        .flat_map(|tool| {
            tool["functionDeclarations"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .filter_map(|declaration| declaration["name"].as_str())
        .collect();
    assert_eq!(declared, ["get_weather"], "{offered}");

    // A call of the denied tool is blocked, in Google's shape.
    upstream.push(Reply::json(
        200,
        json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "send_email", "args": {"to": "a@b.c", "body": "x"}}}]},
            "finishReason": "STOP", "index": 0}]}),
    ));
    let response = gateway.post(path, &request).await;
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["status"], "PERMISSION_DENIED", "{body}");
    let checks: Vec<&str> = (body["error"]["violations"].as_array().into_iter().flatten())
        .filter_map(|violation| violation["check"].as_str())
        .collect();
    assert!(checks.contains(&"permission"), "{body}");

    // get_weather's one proposed call this month is spent: the model's next one is refused, in
    // Google's shape.
    queue(&upstream, "text_then_function_call", false);
    let response = gateway.post(path, &request).await;
    let status = response.status();
    let body: Value = response.json().await.expect("json");
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["status"], "RESOURCE_EXHAUSTED", "{body}");
    assert_eq!(body["error"]["violations"][0]["check"], "budget", "{body}");
}

#[tokio::test]
async fn the_judge_reads_the_users_words_the_thoughts_and_the_call_of_a_gemini_exchange() {
    let upstream = ScriptedUpstream::start().await;
    let judge = ScriptedUpstream::start().await;
    let config = format!(
        "[[routes]]\npath = \"/v1beta\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_selection\"\n[routes.plugins.settings]\n\
         openai_api_key = \"sk-judge\"\nbase_url = \"{}/v1\"\nmodel = \"judge-model\"\n",
        judge.url()
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    let path = "/v1beta/models/gemini-2.5-flash:generateContent";
    let request = fixture_json("gemini/thought_then_function_call.request.json");
    judge.push(Reply::judge("deny", "the user did not ask for this"));
    queue(&upstream, "thought_then_function_call", false);
    let response = gateway.post(path, &request).await;
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.expect("json");
    assert_eq!(
        body["error"]["violations"][0]["check"], "semantic",
        "{body}"
    );
    let prompt = judge.last_request().expect("the judge was asked").json()["messages"].to_string();
    for seen in [
        "Think, then look up the weather.",
        "The user wants weather.",
        "get_weather",
        "Paris",
    ] {
        assert!(
            prompt.contains(seen),
            "{seen} in the judge's prompt: {prompt}"
        );
    }
}
