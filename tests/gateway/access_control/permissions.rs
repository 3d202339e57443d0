//! tool_permission: every access level opens exactly its categories, deny beats allow with names
//! case folded, and `on_empty` is honoured while an untouched request keeps its bytes.

use super::{forwarded_tools, offered, request};
use crate::common::answers::{assert_sdk_error, sdk_chat_request};
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::json;

/// One tool per category, each named after its category.
fn category_catalog() -> String {
    toolgate_plugin::taxonomy::CATEGORIES
        .iter()
        .map(|category| format!("[tools.{category}_tool]\ncategory = \"{category}\"\n"))
        .collect()
}

fn permission_config(settings: &str, tenants: &str) -> String {
    format!(
        "{}\n{tenants}\n[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_permission\"\n[routes.plugins.settings]\n{settings}\n",
        category_catalog()
    )
}

#[tokio::test]
async fn every_access_level_opens_exactly_its_categories() {
    let upstream = ScriptedUpstream::start().await;
    let levels = ["sandboxed", "restricted", "standard", "elevated", "custom"];
    let tenants: String = levels
        .iter()
        .map(|level| {
            format!("[tenants.{level}]\napi_keys = [\"sk-{level}\"]\naccess_level = \"{level}\"\n")
        })
        .collect::<String>()
        + "[access_levels.custom]\ncategories = [\"memory\", \"design\"]\n";
    let gateway = TestGateway::start(&upstream, &permission_config("", &tenants)).await;
    let all: Vec<String> = toolgate_plugin::taxonomy::CATEGORIES
        .iter()
        .map(|category| format!("{category}_tool"))
        .collect();
    let names: Vec<&str> = all.iter().map(String::as_str).collect();
    for level in levels {
        upstream.push(Reply::chat_text("ok"));
        gateway
            .openai_with_key(&format!("sk-{level}"))
            .chat()
            .create(sdk_chat_request(request(&names, vec![])))
            .await
            .expect("allowed");
        let seen = forwarded_tools(&upstream).unwrap_or_default();
        let expected: Vec<String> = if level == "custom" {
            vec!["design_tool".into(), "memory_tool".into()]
        } else {
            toolgate_plugin::taxonomy::builtin_level(level)
                .expect("built in")
                .iter()
                .map(|category| format!("{category}_tool"))
                .collect()
        };
        let mut seen_sorted = seen.clone();
        seen_sorted.sort();
        let mut expected_sorted = expected.clone();
        expected_sorted.sort();
        assert_eq!(seen_sorted, expected_sorted, "level {level}");
    }
}

#[tokio::test]
async fn deny_beats_allow_and_names_are_case_folded() {
    let upstream = ScriptedUpstream::start().await;
    let settings = "access_level = \"elevated\"\nallow = [\"WEB_*\"]\ndeny = [\" Web_Tool \", \"terminal_*\"]\n";
    let gateway = TestGateway::start(&upstream, &permission_config(settings, "")).await;
    let seen = offered(
        &upstream,
        &gateway,
        &[],
        request(&["web_tool", "Terminal_Tool", "memory_tool"], vec![]),
    )
    .await;
    assert_eq!(seen, Some(vec!["memory_tool".into()]));

    // A call to a denied tool is blocked with the reason in words.
    upstream.push(Reply::chat_calls(&[("c1", "WEB_TOOL", "{}")]));
    let error = gateway
        .sdk_chat(request(&["memory_tool"], vec![]))
        .await
        .expect_err("denied");
    let body = assert_sdk_error(error, 403, "tool_not_permitted");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("deny list") && message.contains("Web_Tool"),
        "{message}"
    );
}

#[tokio::test]
async fn an_untouched_request_keeps_its_bytes_and_on_empty_is_honoured() {
    let upstream = ScriptedUpstream::start().await;
    for (on_empty, expect_status, expect_tools) in [
        ("strip_tools_field", 200, None),
        ("pass_through_empty", 200, Some(json!([]))),
        ("reject", 403, None),
    ] {
        let settings = format!("access_level = \"sandboxed\"\non_empty = \"{on_empty}\"\n");
        let gateway = TestGateway::start(&upstream, &permission_config(&settings, "")).await;
        let before = upstream.request_count();
        upstream.push(Reply::chat_text("ok"));
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"web_tool"}}],"tool_choice":"required"}"#;
        let response = gateway.post_json_text("/v1/chat/completions", body).await;
        assert_eq!(response.status().as_u16(), expect_status, "{on_empty}");
        if expect_status == 200 {
            let seen = upstream.forwarded_json();
            assert_eq!(seen.get("tools").cloned(), expect_tools, "{on_empty}");
            assert!(
                seen.get("tool_choice").is_none(),
                "{on_empty}: no choice without tools"
            );
        } else {
            assert_eq!(
                upstream.request_count(),
                before,
                "rejected before the upstream"
            );
            assert!(
                upstream.queued_replies() >= 1,
                "{on_empty}: the reply pushed for it is still waiting"
            );
            upstream.set_default(Reply::chat_text("ok"));
        }
        gateway.stop().await;
    }

    // Nothing removed: the upstream gets the client's exact bytes.
    let gateway = TestGateway::start(
        &upstream,
        &permission_config("access_level = \"restricted\"", ""),
    )
    .await;
    let body = r#"{ "model":"m","messages":[],"tools":[{"type":"function","function":{"name":"web_tool"}}] }"#;
    upstream.push(Reply::chat_text("ok"));
    let response = gateway.post_bytes("/v1/chat/completions", &[], body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        upstream.last_request().expect("forwarded").body.as_ref(),
        body.as_bytes()
    );
}
