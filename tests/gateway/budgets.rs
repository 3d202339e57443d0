//! tool_budget end to end: a budget of N allows exactly N calls and answers the next with 429
//! and rate-limit headers; a resent history never counts twice; spent tools are stripped; two
//! gateways on one Redis share one budget; windows roll over; a Redis outage is answered per
//! `fail_mode` and the gateway recovers when Redis returns; bad limits are located errors.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common;
use crate::common::answers::{assert_refusal, config_errors, function_names, json_with_status};
use crate::common::redis::RedisServer;
use crate::common::upstream::chat_stream;
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::{Value, json};
use toolgate::Runtime;

/// A chat route guarded by tool_budget with `settings` (TOML lines, budgets last), and a
/// `[store]` section when `store` is not empty.
fn budget_config(store: &str, settings: &str) -> String {
    format!(
        "{store}\n[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_budget\"\n[routes.plugins.settings]\n{settings}\n"
    )
}

/// A fresh upstream behind a gateway whose budgets (`settings`) are kept in memory.
async fn start_in_memory(settings: &str) -> (ScriptedUpstream, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &budget_config("", settings)).await;
    (upstream, gateway)
}

fn redis_store(redis: &RedisServer, fail_mode: &str) -> String {
    format!(
        "[store]\nurl = \"{}\"\nfail_mode = \"{fail_mode}\"\ntimeout_ms = 300\n",
        redis.url()
    )
}

/// A chat request declaring `pay` and `search`, whose history holds `executed` calls of `pay`
/// (`call_0` …) with their results.
fn request_with_history(executed: usize, stream: bool) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "pay my bills"})];
    for index in 0..executed {
        let id = format!("call_{index}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "pay", "arguments": "{\"amount\":5}"}}
        ]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "paid"}));
    }
    json!({
        "model": "gpt-test",
        "stream": stream,
        "messages": messages,
        "tools": [
            {"type": "function", "function": {"name": "pay", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}},
        ],
    })
}

/// Posts the chat request whose history holds `executed` calls of `pay` (not streamed).
async fn post_history(gateway: &TestGateway, executed: usize) -> reqwest::Response {
    gateway
        .post_chat(&request_with_history(executed, false))
        .await
}

fn proposes_pay(index: usize) -> Reply {
    Reply::chat_calls(&[(&format!("call_{index}"), "pay", "{\"amount\":5}")])
}

#[tokio::test]
async fn a_budget_of_n_allows_n_executed_calls_and_refuses_the_next_with_429() {
    // No [store]: the in-memory default. Windows are aligned to the clock, so the tests that do
    // not test rolling over use windows long enough that none rolls over while they run.
    let (upstream, gateway) = start_in_memory(
        "[[routes.plugins.settings.budgets]]\ntools = \"pay\"\nlimits = [\"3/30d\", \"100/365d\"]\n",
    )
    .await;

    for executed in 0..3 {
        upstream.push(proposes_pay(executed));
        let response = post_history(&gateway, executed).await;
        assert_eq!(
            response.status(),
            200,
            "call {executed} is within the budget"
        );
    }
    // The same history sent again (a retry) counts nothing: call_0 and call_1 were counted once.
    for _ in 0..2 {
        upstream.push(proposes_pay(2));
        let resent = post_history(&gateway, 2).await;
        assert_eq!(
            resent.status(),
            200,
            "a resent history is not counted again"
        );
    }

    // Three calls executed: the model's fourth call is refused.
    upstream.push(proposes_pay(3));
    let refused = post_history(&gateway, 3).await;
    assert_eq!(refused.status(), 429);
    let headers = refused.headers().clone();
    assert_eq!(headers["x-ratelimit-limit"], "3");
    assert_eq!(headers["x-ratelimit-remaining"], "0");
    assert_eq!(headers["x-ratelimit-tool"], "pay");
    let retry_after: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=30 * 86_400).contains(&retry_after), "{retry_after}");
    assert_eq!(headers["x-ratelimit-reset"], headers["retry-after"]);
    // A window days long is not worth waiting for: the SDKs are told not to retry.
    assert_eq!(headers["x-should-retry"], "false");
    assert!(headers.contains_key("x-request-id"));
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "tool_budget_exceeded");
    assert_eq!(body["error"]["type"], "rate_limit_exceeded");
    assert_eq!(body["error"]["violations"][0]["check"], "budget");
    assert_eq!(body["error"]["violations"][0]["tool"], "pay");
    assert_eq!(body["error"]["violations"][0]["tool_call_id"], "call_3");

    // Streamed, the refusal is a real 429 too (nothing was sent before the call).
    upstream.push(Reply::sse_events(&chat_stream(
        &[("call_3", "pay", "{\"amount\":5}")],
        None,
    )));
    let streamed = gateway.post_chat(&request_with_history(3, true)).await;
    assert_eq!(streamed.status(), 429);
    assert_eq!(streamed.headers()["x-ratelimit-tool"], "pay");

    // Other tools and plain answers are not limited by pay's budget.
    upstream.push(Reply::chat_calls(&[("call_s", "search", "{}")]));
    let other = post_history(&gateway, 3).await;
    assert_eq!(other.status(), 200);
}

#[tokio::test]
async fn a_spent_tool_is_stripped_from_the_request() {
    let (upstream, gateway) = start_in_memory(
        "behaviour = \"strip\"\n[[routes.plugins.settings.budgets]]\ntools = \"pa*\"\nlimits = [\"1/30d\"]\n",
    )
    .await;
    upstream.set_default(Reply::chat_text("done"));

    let fresh = post_history(&gateway, 0).await;
    assert_eq!(fresh.status(), 200);
    let sent = upstream.forwarded_json();
    assert_eq!(function_names(&sent["tools"]), ["pay", "search"]);

    let spent = post_history(&gateway, 1).await;
    assert_eq!(spent.status(), 200);
    let sent = upstream.forwarded_json();
    assert_eq!(
        function_names(&sent["tools"]),
        ["search"],
        "the spent tool is gone"
    );
}

/// Issue 22 point 8: a strip that leaves no declared tool follows the shared `on_empty` rule of
/// every tool-removing plugin: by default the tool fields go (never `"tools": []`, which OpenAI
/// refuses), `pass_through_empty` sends the empty list, `reject` refuses with a 403. A second
/// plugin (tool_permission) removing the last tool the budget left follows the same rule.
#[tokio::test]
async fn a_strip_that_empties_the_tools_never_sends_an_empty_list_unless_asked() {
    let every_tool = "behaviour = \"strip\"\n{on_empty}[[routes.plugins.settings.budgets]]\ntools = \"*\"\nlimits = [\"1/30d\"]\n";
    for (on_empty, expected) in [
        ("", "stripped"),
        ("on_empty = \"strip_tools_field\"\n", "stripped"),
        ("on_empty = \"pass_through_empty\"\n", "empty"),
        ("on_empty = \"reject\"\n", "refused"),
    ] {
        let (upstream, gateway) =
            start_in_memory(&every_tool.replace("{on_empty}", on_empty)).await;
        upstream.set_default(Reply::chat_text("done"));
        assert_eq!(post_history(&gateway, 0).await.status(), 200);
        let mut body = request_with_history(1, false);
        body["tool_choice"] = json!("auto");
        let spent = gateway.post_chat(&body).await;
        match expected {
            "refused" => {
                let error = json_with_status(spent, 403).await;
                assert_refusal(&error, "no_tools_permitted", "budget");
                assert_eq!(upstream.request_count(), 1, "never sent upstream");
            }
            _ => {
                assert_eq!(spent.status(), 200, "{on_empty}");
                let sent = upstream.forwarded_json();
                if expected == "empty" {
                    assert_eq!(sent["tools"], json!([]), "{sent}");
                } else {
                    assert!(sent.get("tools").is_none(), "{on_empty}: {sent}");
                    assert!(sent.get("tool_choice").is_none(), "{sent}");
                    assert_eq!(sent["messages"].as_array().map(Vec::len), Some(3));
                }
            }
        }
    }

    // The budget strips `pay`, then tool_permission removes `search`, the last one left.
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::chat_text("done"));
    let config = "[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
        [[routes.plugins]]\nname = \"tool_budget\"\npriority = 10\n[routes.plugins.settings]\nbehaviour = \"strip\"\n\
        [[routes.plugins.settings.budgets]]\ntools = \"pay\"\nlimits = [\"1/30d\"]\n\
        [[routes.plugins]]\nname = \"tool_permission\"\npriority = 20\n[routes.plugins.settings]\n\
        allow = [\"*\"]\ndeny = [\"search\"]\n";
    let gateway = TestGateway::start(&upstream, config).await;
    assert_eq!(post_history(&gateway, 1).await.status(), 200);
    assert_eq!(post_history(&gateway, 2).await.status(), 200);
    let sent = upstream.forwarded_json();
    assert!(sent.get("tools").is_none(), "{sent}");
}

#[tokio::test]
async fn two_gateways_on_one_redis_admit_exactly_n_proposed_calls_between_them() {
    let redis = RedisServer::start();
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(proposes_pay(0));
    let config = budget_config(
        &redis_store(&redis, "block"),
        "count = \"proposed\"\n[[routes.plugins.settings.budgets]]\ntools = \"pay\"\nlimits = [\"5/30d\"]\n",
    );
    let first = TestGateway::start(&upstream, &config).await;
    let second = TestGateway::start(&upstream, &config).await;

    let body = request_with_history(0, false);
    let requests = (0..12).map(|index| {
        let gateway = if index % 2 == 0 { &first } else { &second };
        gateway.post_chat(&body)
    });
    let statuses: Vec<u16> = futures_util::future::join_all(requests)
        .await
        .iter()
        .map(|response| response.status().as_u16())
        .collect();
    let allowed = statuses.iter().filter(|status| **status == 200).count();
    let refused = statuses.iter().filter(|status| **status == 429).count();
    assert_eq!((allowed, refused), (5, 7), "{statuses:?}");
}

#[tokio::test]
async fn two_gateways_on_one_redis_count_one_conversation_once() {
    let redis = RedisServer::start();
    let upstream = ScriptedUpstream::start().await;
    let config = budget_config(
        &redis_store(&redis, "block"),
        "[[routes.plugins.settings.budgets]]\ntools = \"pay\"\nlimits = [\"2/30d\"]\n",
    );
    let first = TestGateway::start(&upstream, &config).await;
    let second = TestGateway::start(&upstream, &config).await;

    upstream.push(proposes_pay(0));
    let status = post_history(&first, 0).await.status();
    assert_eq!(status, 200);
    // The conversation moves to the other replica, and its history is sent to both.
    for gateway in [&second, &first, &second] {
        upstream.push(proposes_pay(1));
        let status = post_history(gateway, 1).await.status();
        assert_eq!(
            status, 200,
            "call_0 is counted once, whichever replica sees it"
        );
    }
    upstream.push(proposes_pay(2));
    let refused = post_history(&first, 2).await;
    assert_eq!(
        refused.status(),
        429,
        "two executed calls spend a budget of two"
    );
}

/// Sleeps until `offset` past the start of the next period of a `period`-long window.
async fn align_to_window(period: Duration, offset: Duration) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let period_ms = period.as_millis() as u64;
    let wait = period_ms - now % period_ms + offset.as_millis() as u64;
    tokio::time::sleep(Duration::from_millis(wait)).await;
}

#[tokio::test]
async fn a_window_rolls_over_and_frees_the_budget() {
    let redis = RedisServer::start();
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(proposes_pay(0));
    let gateway = TestGateway::start(
        &upstream,
        &budget_config(
            &redis_store(&redis, "block"),
            "count = \"proposed\"\n[[routes.plugins.settings.budgets]]\ntools = \"pay\"\nlimits = [\"2/2s\"]\n",
        ),
    )
    .await;
    let body = request_with_history(0, false);
    // Start just after a window opens, so the three calls below fall in one window.
    align_to_window(Duration::from_secs(2), Duration::from_millis(30)).await;
    for _ in 0..2 {
        assert_eq!(
            gateway.post_status("/v1/chat/completions", &body).await,
            200
        );
    }
    let refused = gateway.post_chat(&body).await;
    assert_eq!(refused.status(), 429);
    let reset: u64 = refused.headers()["x-ratelimit-reset"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&reset), "{reset}");

    align_to_window(Duration::from_secs(2), Duration::from_millis(30)).await;
    assert_eq!(
        gateway.post_status("/v1/chat/completions", &body).await,
        200,
        "a new window starts from zero"
    );
}

#[tokio::test]
async fn a_redis_outage_is_answered_per_fail_mode_and_the_gateway_recovers() {
    let mut redis = RedisServer::start();
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(proposes_pay(0));
    let settings = "count = \"proposed\"\n[[routes.plugins.settings.budgets]]\ntools = \"pay\"\nlimits = [\"100/30d\"]\n";
    let blocking = TestGateway::start(
        &upstream,
        &budget_config(&redis_store(&redis, "block"), settings),
    )
    .await;
    let allowing = TestGateway::start(
        &upstream,
        &budget_config(&redis_store(&redis, "allow"), settings),
    )
    .await;
    let body = request_with_history(0, false);
    assert_eq!(
        blocking.post_status("/v1/chat/completions", &body).await,
        200
    );

    redis.stop();
    let down = blocking.post_chat(&body).await;
    let error = json_with_status(down, 503).await;
    assert_refusal(&error, "state_store_unavailable", "budget");
    assert_eq!(
        allowing.post_status("/v1/chat/completions", &body).await,
        200,
        "fail_mode = allow lets calls through while the store is down"
    );

    redis.restart();
    // The connection is remade on the next calls; no restart of the gateway.
    let mut recovered = false;
    for _ in 0..40 {
        if blocking.post_status("/v1/chat/completions", &body).await == 200 {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(recovered, "the gateway answers again once Redis is back");
}

#[test]
fn bad_limits_and_store_settings_are_located_errors() {
    let runtime = Runtime::new();
    let text = common::config_text(
        "http://127.0.0.1:9",
        std::path::Path::new("/dev/null"),
        &budget_config(
            "[store]\nfail_mode = \"sometimes\"\n",
            "[[routes.plugins.settings.budgets]]\ntools = \"pay\"\nlimits = [\"10/minute\", \"ten/day\"]\n",
        ),
    );
    let errors = config_errors(&text, "test.toml", &runtime.plugins);
    let line_of = |needle: &str| text.lines().position(|line| line.contains(needle)).unwrap() + 1;
    assert!(
        errors.contains(&format!(
            "test.toml:{}:",
            line_of("ten/day")
        )) && errors.contains("routes[0].plugins[0].settings.budgets[0].limits[1]: 'ten' is not a whole number of calls"),
        "{errors}"
    );
    assert!(
        errors.contains(&format!("test.toml:{}:", line_of("sometimes")))
            && errors.contains("store.fail_mode: unknown fail_mode 'sometimes'"),
        "{errors}"
    );
}

/// Issue 21 point 8: a budget counts a tool, not a spelling. Two routes budget graph-update,
/// written `Graph-Update` on one and ` graph-update` on the other; calls cased and padded three
/// ways all spend the one counter, so changing the case or the route buys no extra calls.
#[tokio::test]
async fn case_and_space_variants_of_a_tool_spend_one_budget() {
    let upstream = ScriptedUpstream::start().await;
    let route = |path: &str, tools: &str| {
        format!(
            "[[routes]]\npath = \"{path}\"\nupstream = \"llm\"\n\
             [[routes.plugins]]\nname = \"tool_budget\"\n[routes.plugins.settings]\n\
             count = \"proposed\"\n[[routes.plugins.settings.budgets]]\ntools = \"{tools}\"\n\
             limits = [\"2/30d\"]\n"
        )
    };
    let config = route("/v1/chat/completions", "Graph-Update")
        + &route("/agents/v1/chat/completions", " graph-update");
    let gateway = TestGateway::start(&upstream, &config).await;
    let request = json!({
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "update the graph"}],
        "tools": [{"type": "function", "function": {"name": "graph-update",
            "parameters": {"type": "object"}}}],
    });
    let proposes = |id: &str, name: &str| Reply::chat_calls(&[(id, name, "{}")]);

    upstream.push(proposes("call_1", "graph-update"));
    let first = gateway.post_chat(&request).await;
    assert_eq!(first.status(), 200);
    upstream.push(proposes("call_2", "GRAPH-UPDATE "));
    let second = gateway.post("/agents/v1/chat/completions", &request).await;
    assert_eq!(second.status(), 200, "the second of two calls");

    upstream.push(proposes("call_3", "Graph-Update"));
    let third = gateway.post_chat(&request).await;
    assert_eq!(
        third.status(),
        429,
        "two calls were spent, under any spelling"
    );
    assert_eq!(third.headers()["x-ratelimit-remaining"], "0");
    let body: Value = third.json().await.unwrap();
    assert_eq!(body["error"]["code"], "tool_budget_exceeded");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("budget 'graph-update'"), "{message}");
}
