//! A model that misuses discovery and a client whose tools would shadow it: clear results, a
//! bound on the rounds that ends as the route's `on_block` says, one answer for "not there"
//! and "not permitted", and a 400 for a declared tool named like a discovery tool.

use serde_json::{Value, json};

use super::{chat_request, disclosed_route, last_items, sent_tool_names};
use crate::common::{Reply, ScriptedUpstream, TestGateway};

const LOOP: (&str, &str, &str) = ("call_loop", "list_tools", "{}");

#[tokio::test]
async fn a_model_that_keeps_discovering_is_stopped_at_the_round_limit() {
    let upstream = ScriptedUpstream::start().await;
    let gateway =
        TestGateway::start(&upstream, &disclosed_route("settings = { max_rounds = 2 }")).await;
    upstream.set_default(Reply::chat_calls(&[LOOP]));
    let response = gateway.post_chat(&chat_request()).await;
    assert_eq!(response.status(), 403);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(
        body["error"]["code"], "discovery_rounds_exhausted",
        "{body}"
    );
    assert_eq!(
        upstream.request_count(),
        3,
        "the first request and two rounds"
    );
}

#[tokio::test]
async fn with_on_block_message_the_round_limit_is_a_plain_answer() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        &disclosed_route("on_block = \"message\"\nsettings = { max_rounds = 1 }"),
    )
    .await;
    upstream.set_default(Reply::chat_calls(&[LOOP]));
    let answer = gateway
        .sdk_chat(chat_request())
        .await
        .expect("a 200 the SDK reads");
    assert!(answer.choices[0].message.tool_calls.is_none());
    let text = answer.choices[0]
        .message
        .content
        .clone()
        .unwrap_or_default();
    assert!(text.contains("discovering"), "{text}");
}

#[tokio::test]
async fn a_tool_that_is_not_there_and_one_not_permitted_get_the_same_answer() {
    let upstream = ScriptedUpstream::start().await;
    let config = format!(
        "[tools.tool_001]\ngroups = [\"admin\"]\n\n\
         [[plugins]]\nname = \"tool_groups\"\n\n{}",
        disclosed_route("")
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    upstream.push(Reply::chat_calls(&[
        ("call_hidden", "load_tool", r#"{"tool_name":"tool_001"}"#),
        ("call_missing", "load_tool", r#"{"tool_name":"tool_999"}"#),
        (
            "call_resource",
            "load_tool_resource",
            r#"{"tool_name":"get_weather","resource_id":"nope"}"#,
        ),
        ("call_bad", "load_tool", r#"{"name":"get_weather"}"#),
    ]));
    upstream.push(Reply::chat_text("Sorry."));
    let mut request = chat_request();
    request["toolgate"] = json!({"group": "default"});
    assert_eq!(gateway.post_chat(&request).await.status(), 200);
    let first = upstream.requests()[0].json();
    let index = first["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        !index.contains("tool_001"),
        "a tool outside the request's groups is not listed"
    );
    assert!(!sent_tool_names(&first).contains(&"tool_001".to_owned()));
    let results = last_items(&upstream.requests()[1].json(), "messages", 4);
    let text = |n: usize| {
        results[n]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(
        text(0).replace("tool_001", "X"),
        text(1).replace("tool_999", "X"),
        "not permitted and not there read alike"
    );
    assert!(text(0).starts_with("Error: no tool named"), "{}", text(0));
    assert_eq!(text(2), "Error: 'get_weather' has no resources.");
    assert!(text(3).contains("load_tool takes"), "{}", text(3));
}

#[tokio::test]
async fn a_client_tool_named_like_a_discovery_tool_is_a_clear_400() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &disclosed_route("")).await;
    let mut request = chat_request();
    request["tools"].as_array_mut().expect("tools").push(
        json!({"type": "function", "function": {"name": "load_tool", "parameters": {"type": "object"}}}),
    );
    let response = gateway.post_chat(&request).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "discovery_name_taken", "{body}");
    assert_eq!(upstream.request_count(), 0);
}

#[tokio::test]
async fn a_tools_resources_come_from_the_catalogs_files() {
    let upstream = ScriptedUpstream::start().await;
    let folder = std::env::temp_dir().join(format!("toolgate-resources-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("temp folder");
    let guide = folder.join("weather-guide.md");
    std::fs::write(&guide, "# Weather\nAsk for one city at a time.\n").expect("guide written");
    let config = format!(
        "[tools.get_weather]\nshort_description = \"Weather now, by city\"\ncost_tier = \"cheap\"\n\
         category = \"web\"\nfailure_modes = [\"An unknown city answers 404.\"]\n\
         [[tools.get_weather.resources]]\nid = \"guide\"\nfile = \"{}\"\n\n{}",
        guide.display(),
        disclosed_route("")
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    upstream.push(Reply::chat_calls(&[
        ("call_load", "load_tool", r#"{"tool_name":"get_weather"}"#),
        (
            "call_guide",
            "load_tool_resource",
            r#"{"tool_name":"get_weather","resource_id":"guide"}"#,
        ),
    ]));
    upstream.push(Reply::chat_text("Done."));
    assert_eq!(gateway.post_chat(&chat_request()).await.status(), 200);
    let first = upstream.requests()[0].json();
    let index = first["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        index.contains("- get_weather [web, cheap]: Weather now, by city"),
        "{index}"
    );
    let results = last_items(&upstream.requests()[1].json(), "messages", 2);
    let body: Value =
        serde_json::from_str(results[0]["content"].as_str().unwrap_or_default()).expect("JSON");
    assert_eq!(body["failure_modes"][0], "An unknown city answers 404.");
    assert_eq!(
        body["resources"][0],
        json!({"resource_id": "guide", "content_type": "text/markdown"})
    );
    let resource: Value =
        serde_json::from_str(results[1]["content"].as_str().unwrap_or_default()).expect("JSON");
    assert_eq!(
        resource["content"],
        "# Weather\nAsk for one city at a time.\n"
    );
    let _ = std::fs::remove_dir_all(&folder);
}

#[test]
fn a_route_with_two_disclosures_or_meaningless_settings_does_not_load() {
    let load = |body: &str| {
        let text = format!("[upstreams.llm]\nurl = \"http://127.0.0.1:9\"\n\n{body}");
        toolgate::Config::from_toml(&text, "test.toml", &toolgate::Runtime::new().plugins)
            .err()
            .map(|errors| errors.to_string())
            .unwrap_or_default()
    };
    let twice = load(
        "[[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_disclosure\"\nid = \"a\"\n\
         [[routes.plugins]]\nname = \"tool_disclosure\"\nid = \"b\"\n",
    );
    assert!(twice.contains("discloses tools once"), "{twice}");
    let meaningless = load(&disclosed_route(
        "settings = { unload_threshold_percent = 0, max_rounds = 0 }",
    ));
    assert!(
        meaningless.contains("unload_threshold_percent"),
        "{meaningless}"
    );
    assert!(meaningless.contains("max_rounds"), "{meaningless}");
    assert!(load(&disclosed_route("settings = { l1_budget = 3 }")).contains("l1_budget"));
}

#[tokio::test]
async fn a_tool_the_tenants_access_level_closes_is_never_shown_or_loaded() {
    let upstream = ScriptedUpstream::start().await;
    // Every declared tool in `memory`, which `sandboxed` opens, but `db_query` in `database`.
    let mut catalog = String::from("[tools.get_weather]\ncategory = \"memory\"\n");
    for n in 1..super::DECLARED {
        catalog.push_str(&format!(
            "[tools.{}]\ncategory = \"memory\"\n",
            super::filler(n)
        ));
    }
    catalog.push_str("[tools.db_query]\ncategory = \"database\"\n");
    let config = format!(
        "{catalog}\n[tenants.agent]\napi_keys = [\"sk-agent\"]\naccess_level = \"sandboxed\"\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\nauth = \"tenant\"\n\
         [[routes.plugins]]\nname = \"tool_permission\"\n\
         [[routes.plugins]]\nname = \"tool_disclosure\"\n"
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    upstream.push(Reply::chat_calls(&[
        ("call_db", "load_tool", r#"{"tool_name":"db_query"}"#),
        ("call_list", "list_tools", r#"{"query":"db"}"#),
    ]));
    upstream.push(Reply::chat_text("Done."));
    let mut request = chat_request();
    request["tools"].as_array_mut().expect("tools").push(json!({"type": "function",
        "function": {"name": "db_query", "description": "Runs SQL.", "parameters": {"type": "object"}}}));
    let response = crate::common::http()
        .post(format!("{}/v1/chat/completions", gateway.url()))
        .bearer_auth("sk-agent")
        .json(&request)
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 200);
    let first = upstream.requests()[0].json();
    let index = first["messages"][1]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        index.contains("get_weather") && !index.contains("db_query"),
        "{index}"
    );
    let results = last_items(&upstream.requests()[1].json(), "messages", 2);
    let loaded = results[0]["content"].as_str().unwrap_or_default();
    assert!(
        loaded.starts_with("Error: no tool named 'db_query'"),
        "{loaded}"
    );
    let listed = results[1]["content"].as_str().unwrap_or_default();
    assert!(listed.starts_with("No tool matches"), "{listed}");
}
