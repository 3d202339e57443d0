//! Workflow state kept by toolgate (`state_source = "store"`): seed 000's whole workflow across
//! two replicas sharing one Redis, with reused tool_call_ids and a replayed request moving
//! nothing twice; only results of calls toolgate delivered (whole or streamed) move the state;
//! a forged state, a fabricated call, an invalid transition and a missing conversation refused.

use super::{SEED_TOOLS, client, executed, forwarded_tools, groups_route, request, sdk_chat_as};
use crate::common::answers::{assert_sdk_error, sdk_chat_request};
use crate::common::redis::RedisServer;
use crate::common::upstream::chat_stream;
use crate::common::{
    Reply, ScriptedUpstream, TestGateway, audit_lines_of_all, transitions_recorded,
};
use futures_util::StreamExt;
use serde_json::{Value, json};

fn store_route(store: &str, settings: &str) -> String {
    format!(
        "{store}\n{}",
        groups_route(&format!("state_source = \"store\"\n{settings}"))
    )
}

const GROUPS: (&str, &str) = ("x-toolgate-group", "knowledge,compute,admin");

/// One step as an SDK client in conversation `conversation`: the model answers by calling
/// `tool` with id `call_id`; returns the tools the upstream was offered.
async fn step(
    upstream: &ScriptedUpstream,
    gateway: &TestGateway,
    conversation: &str,
    history: &[Value],
    (call_id, tool): (&str, &str),
) -> Option<Vec<String>> {
    upstream.push(Reply::chat_calls(&[(call_id, tool, "{}")]));
    let answer = sdk_chat_as(
        gateway,
        "sk",
        &[GROUPS, ("x-toolgate-conversation", conversation)],
        request(&SEED_TOOLS, history.to_vec()),
    )
    .await
    .unwrap_or_else(|error| panic!("calling {tool}: {error}"));
    assert!(
        answer.choices[0].message.tool_calls.is_some(),
        "{tool} let through"
    );
    forwarded_tools(upstream)
}

#[tokio::test]
async fn the_seed_workflow_is_kept_across_two_replicas_sharing_redis() {
    let redis = RedisServer::start();
    let upstream = ScriptedUpstream::start().await;
    let config = store_route(&format!("[store]\nurl = \"{}\"\n", redis.url()), "");
    let (first, second) = (
        TestGateway::start(&upstream, &config).await,
        TestGateway::start(&upstream, &config).await,
    );
    let names = |tools: &[&str]| Some(tools.iter().map(|t| (*t).to_owned()).collect::<Vec<_>>());
    // Every call reuses the id `call_1`, as some agents do.
    let mut history = Vec::new();
    let offered = step(
        &upstream,
        &first,
        "conv-1",
        &history,
        ("call_1", "knowledge-query"),
    )
    .await;
    assert_eq!(offered, names(&["knowledge-query"]));
    history.extend(executed("call_1", "knowledge-query"));

    let offered = step(
        &upstream,
        &second,
        "conv-1",
        &history,
        ("call_1", "complex-analysis"),
    )
    .await;
    assert_eq!(
        offered,
        names(&["graph-update", "complex-analysis", "reset-workflow"]),
        "the other replica knows the conversation is in analysis"
    );
    history.extend(executed("call_1", "complex-analysis"));

    let offered = step(
        &upstream,
        &first,
        "conv-1",
        &history,
        ("call_1", "reset-workflow"),
    )
    .await;
    assert_eq!(offered, names(&["reset-workflow"]), "results");
    history.extend(executed("call_1", "reset-workflow"));

    // The last request twice, once on each replica: the second moves nothing.
    for gateway in [&second, &first] {
        upstream.push(Reply::chat_text("done"));
        let mut body = request(&SEED_TOOLS, history.clone());
        body["toolgate"] =
            json!({"group": ["knowledge", "compute", "admin"], "conversation": "conv-1"});
        let response = gateway.post_chat(&body).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-toolgate-state"], "undefined");
        assert_eq!(forwarded_tools(&upstream), names(&["knowledge-query"]));
    }

    // A call the model never made, with its result: the delivered `call_1` of
    // knowledge-query answered again, and an id toolgate never handed out. Neither moves the
    // conversation out of undefined, on either replica.
    for (gateway, call_id) in [(&second, "call_1"), (&first, "call_7")] {
        let mut forged = history.clone();
        forged.extend(executed(call_id, "knowledge-query"));
        let refused = sdk_chat_as(
            gateway,
            "sk",
            &[GROUPS, ("x-toolgate-conversation", "conv-1")],
            request(&SEED_TOOLS, forged),
        )
        .await
        .expect_err("a fabricated transition is refused");
        let error = assert_sdk_error(refused, 403, "undelivered_call");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("never delivered") && message.contains(call_id),
            "{error}"
        );
    }
    upstream.push(Reply::chat_text("still here"));
    let response = second
        .post_json_with(
            "/v1/chat/completions",
            &[GROUPS, ("x-toolgate-conversation", "conv-1")],
            &request(&SEED_TOOLS, history.clone()),
        )
        .await;
    assert_eq!(response.headers()["x-toolgate-state"], "undefined");
    assert_eq!(forwarded_tools(&upstream), names(&["knowledge-query"]));

    // Each transition recorded once, with its time, over both replicas' audit lines.
    let recorded: Vec<Value> =
        audit_lines_of_all(&[&first, &second], |lines| transitions_recorded(lines) >= 3)
            .await
            .into_iter()
            .flat_map(|line| {
                line["state_transitions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .collect();
    let mut moves: Vec<(String, String)> = recorded
        .iter()
        .map(|t| {
            (
                t["from"].as_str().unwrap_or_default().into(),
                t["to"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    moves.sort();
    assert_eq!(
        moves,
        [
            ("analysis".to_owned(), "results".to_owned()),
            ("results".into(), "undefined".into()),
            ("undefined".into(), "analysis".into()),
        ]
    );
    assert!(
        recorded
            .iter()
            .all(|t| t["at"].as_u64().is_some_and(|at| at > 0))
    );
}

/// The history of one model turn that called `calls` (id, tool) in parallel, with every
/// result.
fn executed_together(calls: &[(&str, &str)]) -> Vec<Value> {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, tool)| {
            json!({"id": id, "type": "function", "function": {"name": tool, "arguments": "{}"}})
        })
        .collect();
    let mut history = vec![json!({"role": "assistant", "content": null, "tool_calls": tool_calls})];
    history.extend(
        calls
            .iter()
            .map(|(id, _)| json!({"role": "tool", "tool_call_id": id, "content": "done"})),
    );
    history
}

/// The model calls knowledge-query twice in one turn (both offered in undefined, so both are
/// delivered); returns the history that answers both. Applied in order, the second ran in
/// analysis, which does not offer it: an invalid transition made by real, delivered calls.
async fn twice_in_one_turn(
    upstream: &ScriptedUpstream,
    gateway: &TestGateway,
    conversation: &str,
) -> Vec<Value> {
    let calls = [("c1", "knowledge-query"), ("c2", "knowledge-query")];
    upstream.push(Reply::chat_calls(&[
        (calls[0].0, calls[0].1, "{}"),
        (calls[1].0, calls[1].1, "{}"),
    ]));
    sdk_chat_as(
        gateway,
        "sk",
        &[GROUPS, ("x-toolgate-conversation", conversation)],
        request(&SEED_TOOLS, vec![]),
    )
    .await
    .expect("both calls are offered in undefined");
    executed_together(&calls)
}

#[tokio::test]
async fn a_forged_state_a_fabricated_call_an_invalid_transition_and_a_missing_conversation_are_refused()
 {
    let upstream = ScriptedUpstream::start().await;
    // No [store]: the in-memory store of one gateway.
    let gateway = TestGateway::start(&upstream, &store_route("", "")).await;

    // The conversation is in undefined; a client claiming results gets no results tools.
    let forged = sdk_chat_as(
        &gateway,
        "sk",
        &[
            GROUPS,
            ("x-toolgate-conversation", "conv-f"),
            ("x-toolgate-state", "results"),
        ],
        request(&SEED_TOOLS, vec![]),
    )
    .await
    .expect_err("a forged state is refused");
    let error = assert_sdk_error(forged, 403, "forged_state");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("'undefined'"),
        "{error}"
    );

    // A history in which the model called knowledge-query: a valid transition, but toolgate
    // never delivered that call.
    let invented = sdk_chat_as(
        &gateway,
        "sk",
        &[GROUPS, ("x-toolgate-conversation", "conv-i")],
        request(&SEED_TOOLS, executed("call_9", "knowledge-query")),
    )
    .await
    .expect_err("a fabricated call is refused");
    let error = assert_sdk_error(invented, 403, "undelivered_call");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("state stays 'undefined'"),
        "{error}"
    );

    let anonymous = sdk_chat_as(&gateway, "sk", &[GROUPS], request(&SEED_TOOLS, vec![]))
        .await
        .expect_err("no conversation named");
    assert_sdk_error(anonymous, 400, "missing_conversation");
    assert_eq!(
        upstream.request_count(),
        0,
        "nothing refused reached the upstream"
    );

    let answered = twice_in_one_turn(&upstream, &gateway, "conv-t").await;
    let invalid = sdk_chat_as(
        &gateway,
        "sk",
        &[GROUPS, ("x-toolgate-conversation", "conv-t")],
        request(&SEED_TOOLS, answered),
    )
    .await
    .expect_err("an invalid transition is refused");
    assert_sdk_error(invalid, 403, "invalid_transition");
    gateway
        .assert_metrics_contain(&[
            "agent_invalid_state_transition_total 1",
            "agent_privilege_escalation_attempts_total{tenant=\"\"} 1",
        ])
        .await;
}

#[tokio::test]
async fn on_invalid_transition_allow_counts_and_moves_on_and_ignores_fabricated_results() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        &store_route("", "on_invalid_transition = \"allow\""),
    )
    .await;
    upstream.push(Reply::chat_text("ok"));
    let response = gateway
        .post_json_with(
            "/v1/chat/completions",
            &[GROUPS, ("x-toolgate-conversation", "conv-a")],
            &request(&SEED_TOOLS, executed("call_1", "knowledge-query")),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["x-toolgate-state"],
        "undefined",
        "a result of a call toolgate never delivered moves nothing"
    );
    let audit = gateway.audit_line_of(&response).await;
    assert_eq!(
        audit["ignored_results"],
        json!([{"tool_call_id": "call_1", "tool": "knowledge-query"}])
    );
    assert_eq!(audit["state_transitions"], json!([]));

    let answered = twice_in_one_turn(&upstream, &gateway, "conv-b").await;
    upstream.push(Reply::chat_text("ok"));
    let response = gateway
        .post_json_with(
            "/v1/chat/completions",
            &[GROUPS, ("x-toolgate-conversation", "conv-b")],
            &request(&SEED_TOOLS, answered),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-toolgate-state"], "analysis");
    gateway
        .assert_metrics_contain(&["agent_invalid_state_transition_total 1"])
        .await;
}

#[tokio::test]
async fn a_call_delivered_in_a_stream_moves_the_state_with_its_result() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &store_route("", "")).await;
    let headers = [GROUPS, ("x-toolgate-conversation", "conv-s")];
    upstream.push(Reply::sse_events(&chat_stream(
        &[("call_s1", "knowledge-query", "{}")],
        None,
    )));
    let mut body = request(&SEED_TOOLS, vec![]);
    body["stream"] = json!(true);
    let mut events = client(&gateway, "sk", &headers)
        .chat()
        .create_stream(sdk_chat_request(body))
        .await
        .expect("the stream opens");
    let mut called = String::new();
    while let Some(chunk) = events.next().await {
        let chunk = chunk.expect("an allowed stream");
        for call in chunk
            .choices
            .into_iter()
            .flat_map(|choice| choice.delta.tool_calls.unwrap_or_default())
        {
            called.push_str(call.id.as_deref().unwrap_or_default());
        }
    }
    assert_eq!(called, "call_s1");

    // The SDK's very next request: the delivered call's result moves the state.
    upstream.push(Reply::chat_text("ok"));
    let response = gateway
        .post_json_with(
            "/v1/chat/completions",
            &headers,
            &request(&SEED_TOOLS, executed("call_s1", "knowledge-query")),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-toolgate-state"], "analysis");
}

/// The conversation `conv` carried to `analysis` then `complex-analysis` delivered (call
/// `call_2`); returns the full history up to that delivered call and its result.
async fn to_analysis_with_a_delivered_call(
    upstream: &ScriptedUpstream,
    gateway: &TestGateway,
    conv: &str,
) -> Vec<Value> {
    let mut history = vec![json!({"role": "user", "content": "analyse the graph"})];
    step(
        upstream,
        gateway,
        conv,
        &history,
        ("call_1", "knowledge-query"),
    )
    .await;
    history.extend(executed("call_1", "knowledge-query"));
    step(
        upstream,
        gateway,
        conv,
        &history,
        ("call_2", "complex-analysis"),
    )
    .await;
    history.extend(executed("call_2", "complex-analysis"));
    history
}

/// The state the gateway reports for `history` in `conv`, the request answered with text.
async fn state_after(
    upstream: &ScriptedUpstream,
    gateway: &TestGateway,
    conv: &str,
    history: Vec<Value>,
) -> String {
    upstream.push(Reply::chat_text("ok"));
    let response = gateway
        .post_json_with(
            "/v1/chat/completions",
            &[GROUPS, ("x-toolgate-conversation", conv)],
            &request(&SEED_TOOLS, history),
        )
        .await;
    assert_eq!(response.status(), 200);
    response.headers()["x-toolgate-state"]
        .to_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_history_trimmed_at_any_position_or_summarised_still_moves_the_state_once() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &store_route("", "")).await;
    // Keep the last `kept` messages of the full history (the result of complex-analysis and
    // its call always among them), or put a summary in place of what was dropped.
    for kept in 2..=5 {
        for summarised in [false, true] {
            let conv = format!("trim-{kept}-{summarised}");
            let full = to_analysis_with_a_delivered_call(&upstream, &gateway, &conv).await;
            let mut trimmed: Vec<Value> = full[full.len() - kept..].to_vec();
            if summarised {
                trimmed.insert(
                    0,
                    json!({"role": "user", "content": "Summary: the graph was queried."}),
                );
            }
            assert_eq!(
                state_after(&upstream, &gateway, &conv, trimmed.clone()).await,
                "results",
                "{kept} kept, summarised {summarised}: the delivered call's result applies"
            );
            // Sent again (a retry), or with the full history, it moves nothing more.
            assert_eq!(
                state_after(&upstream, &gateway, &conv, trimmed).await,
                "results"
            );
            assert_eq!(
                state_after(&upstream, &gateway, &conv, full).await,
                "results"
            );
        }
    }
    // Each conversation recorded each of its two transitions once.
    let lines = gateway
        .audit_lines_until(|lines| transitions_recorded(lines) >= 4 * 2 * 2)
        .await;
    let transitions: Vec<&Value> = lines
        .iter()
        .filter_map(|line| line["state_transitions"].as_array())
        .flatten()
        .collect();
    assert_eq!(transitions.len(), 4 * 2 * 2, "{transitions:?}");
    for transition in transitions {
        let timestamp = transition["timestamp"].as_str().unwrap_or_default();
        assert!(
            timestamp.ends_with('Z') && humantime::parse_rfc3339(timestamp).is_ok(),
            "seed 000 §8.2: tool, from, to, timestamp: {transition}"
        );
        assert!(transition["tool"].is_string() && transition["from"].is_string());
    }
}

#[tokio::test]
async fn concurrent_results_of_one_delivered_call_move_the_state_once() {
    let redis = RedisServer::start();
    let upstream = ScriptedUpstream::start().await;
    let config = store_route(&format!("[store]\nurl = \"{}\"\n", redis.url()), "");
    let (first, second) = (
        TestGateway::start(&upstream, &config).await,
        TestGateway::start(&upstream, &config).await,
    );
    let full = to_analysis_with_a_delivered_call(&upstream, &first, "conc").await;
    let trimmed = full[full.len() - 2..].to_vec();
    let (a, b) = tokio::join!(
        state_after(&upstream, &first, "conc", trimmed.clone()),
        state_after(&upstream, &second, "conc", trimmed),
    );
    assert_eq!((a.as_str(), b.as_str()), ("results", "results"));
    let moved: usize = audit_lines_of_all(&[&first, &second], |lines| {
        lines
            .iter()
            .filter_map(|line| line["state_transitions"].as_array())
            .flatten()
            .any(|transition| transition["to"] == "results")
    })
    .await
    .into_iter()
    .filter_map(|line| line["state_transitions"].as_array().cloned())
    .flatten()
    .filter(|transition| transition["to"] == "results")
    .count();
    assert_eq!(moved, 1, "the result applied once over both replicas");
}

#[tokio::test]
async fn discovery_answers_for_a_conversations_stored_state() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &store_route("", "")).await;
    to_analysis_with_a_delivered_call(&upstream, &gateway, "asked").await;
    let available = |answer: &Value| -> Vec<String> {
        let mut names: Vec<String> = answer["available"]
            .as_array()
            .expect("a list")
            .iter()
            .map(|tool| tool["name"].as_str().unwrap_or_default().to_owned())
            .collect();
        names.sort();
        names
    };
    // The state named in the query does not count: the conversation's kept state does.
    let answer = gateway
        .admin_json(
            "/tools?route=/v1/chat/completions&group=knowledge,compute,admin\
             &state=undefined&conversation=asked",
        )
        .await;
    assert_eq!(answer["state"], "analysis", "{answer}");
    assert_eq!(
        available(&answer),
        ["complex-analysis", "graph-update", "reset-workflow"],
        "{answer}"
    );
    // A conversation toolgate has not seen is in the initial state.
    let answer = gateway
        .admin_json(
            "/tools?route=/v1/chat/completions&group=knowledge,compute,admin\
             &state=analysis&conversation=new-one",
        )
        .await;
    assert_eq!(answer["state"], "undefined", "{answer}");
    assert_eq!(available(&answer), ["knowledge-query"], "{answer}");
}

/// The official OpenAI Python SDK continuing a Responses conversation by `previous_response_id`
/// (only the `function_call_output` sent), printing the `x-toolgate-state` of each answer.
const RESPONSES_CONTINUATION: &str = r#"
import json, os, openai
client = openai.OpenAI(base_url=os.environ["BASE"], api_key="sk-test")
tools = [{"type": "function", "name": name, "parameters": {"type": "object"}}
         for name in json.loads(os.environ["TOOLS"])]
groups = {"x-toolgate-group": "knowledge,compute,admin"}
first = client.responses.with_raw_response.create(
    model="m", input="analyse the graph", tools=tools,
    extra_headers={**groups, "x-toolgate-conversation": "server-side"})
response = first.parse()
call = next(item for item in response.output if item.type == "function_call")
print("first", first.headers.get("x-toolgate-state"), call.name)
second = client.responses.with_raw_response.create(
    model="m", previous_response_id=response.id, tools=tools, extra_headers=groups,
    input=[{"type": "function_call_output", "call_id": call.call_id, "output": "found"}])
print("continued", second.headers.get("x-toolgate-state"))
"#;

#[tokio::test]
async fn a_responses_continuation_by_previous_response_id_moves_the_kept_state() {
    if !crate::common::python_imports("openai") {
        return;
    }
    let upstream = ScriptedUpstream::start().await;
    let config = format!(
        "{}\n[[routes]]\npath = \"/v1/responses\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_groups\"\n[routes.plugins.settings]\n\
         state_source = \"store\"\n",
        super::CATALOG
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    upstream.push(Reply::json(
        200,
        json!({"id": "resp_1", "object": "response", "created_at": 1, "status": "completed",
               "model": "m", "output": [{"type": "function_call", "id": "fc_1",
               "call_id": "call_kq", "name": "knowledge-query", "arguments": "{}",
               "status": "completed"}]}),
    ));
    upstream.push(Reply::json(
        200,
        json!({"id": "resp_2", "object": "response", "created_at": 2, "status": "completed",
               "model": "m", "output": [{"type": "message", "id": "msg_1", "role": "assistant",
               "status": "completed", "content": [{"type": "output_text", "text": "done",
               "annotations": []}]}]}),
    ));
    let printed = crate::common::run_python(
        RESPONSES_CONTINUATION,
        &[
            ("BASE", format!("{}/v1", gateway.url())),
            ("TOOLS", json!(SEED_TOOLS).to_string()),
        ],
    )
    .await;
    assert!(
        printed.contains("first undefined knowledge-query"),
        "{printed}"
    );
    assert!(
        printed.contains("continued analysis"),
        "the continuation found its conversation by the delivered call: {printed}"
    );
    // The continuation went upstream with previous_response_id and only the output.
    let forwarded = upstream.forwarded_json();
    assert_eq!(forwarded["previous_response_id"], "resp_1");
}

/// The official OpenAI and Anthropic Python SDKs, each carrying a conversation to `analysis`,
/// delivering `complex-analysis`, then sending its result with the earlier turns dropped and a
/// summary in their place; prints the `x-toolgate-state` after each request.
const TRIMMED_BY_THE_SDKS: &str = r#"
import json, os, openai, anthropic
names = json.loads(os.environ["TOOLS"])
groups = {"x-toolgate-group": "knowledge,compute,admin"}

chat = openai.OpenAI(base_url=os.environ["BASE"] + "/v1", api_key="sk-test")
tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names]
def ask(messages):
    raw = chat.chat.completions.with_raw_response.create(
        model="m", messages=messages, tools=tools,
        extra_headers={**groups, "x-toolgate-conversation": "sdk-chat"})
    return raw.headers.get("x-toolgate-state"), raw.parse().choices[0].message
history = [{"role": "user", "content": "analyse"}]
for _ in range(2):
    state, message = ask(history)
    call = message.tool_calls[0]
    history += [message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": "done"}]
trimmed = [{"role": "user", "content": "Summary: the graph was queried."}] + history[-2:]
print("chat", ask(trimmed)[0])

claude = anthropic.Anthropic(base_url=os.environ["BASE"], api_key="sk-test")
atools = [{"name": n, "input_schema": {"type": "object"}} for n in names]
def ask_claude(messages):
    raw = claude.messages.with_raw_response.create(
        model="claude", max_tokens=100, messages=messages, tools=atools,
        extra_headers={**groups, "x-toolgate-conversation": "sdk-claude"})
    return raw.headers.get("x-toolgate-state"), raw.parse()
history = [{"role": "user", "content": "analyse"}]
for _ in range(2):
    state, message = ask_claude(history)
    block = next(b for b in message.content if b.type == "tool_use")
    history += [{"role": "assistant", "content": [block.model_dump()]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "done"}]}]
trimmed = [{"role": "user", "content": "Summary: the graph was queried."}] + history[-2:]
print("anthropic", ask_claude(trimmed)[0])
"#;

#[tokio::test]
async fn the_official_sdks_trimmed_histories_still_move_the_kept_state() {
    if !crate::common::python_imports("openai, anthropic") {
        return;
    }
    let upstream = ScriptedUpstream::start().await;
    let config = format!(
        "{}\n[[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_groups\"\n[routes.plugins.settings]\n\
         state_source = \"store\"\n",
        super::CATALOG
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    for (id, tool) in [
        ("call_1", "knowledge-query"),
        ("call_2", "complex-analysis"),
    ] {
        upstream.push(Reply::chat_calls(&[(id, tool, "{}")]));
    }
    upstream.push(Reply::chat_text("analysed"));
    for (id, tool) in [
        ("toolu_1", "knowledge-query"),
        ("toolu_2", "complex-analysis"),
    ] {
        upstream.push(Reply::json(
            200,
            json!({"id": format!("msg_{id}"), "type": "message", "role": "assistant",
                   "model": "claude", "content": [{"type": "tool_use", "id": id,
                   "name": tool, "input": {}}], "stop_reason": "tool_use",
                   "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}),
        ));
    }
    upstream.push(Reply::json(
        200,
        json!({"id": "msg_3", "type": "message", "role": "assistant", "model": "claude",
               "content": [{"type": "text", "text": "analysed"}], "stop_reason": "end_turn",
               "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}),
    ));
    let printed = crate::common::run_python(
        TRIMMED_BY_THE_SDKS,
        &[
            ("BASE", gateway.url()),
            ("TOOLS", json!(SEED_TOOLS).to_string()),
        ],
    )
    .await;
    assert!(printed.contains("chat results"), "{printed}");
    assert!(printed.contains("anthropic results"), "{printed}");
}
