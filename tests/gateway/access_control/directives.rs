//! toolgate's own request input held strictly: a `toolgate` body value that is not an object is
//! a 400 in the client's own error shape, the `x-toolgate-*` headers never reach the upstream,
//! and the catalog refuses group and state names no request could give.

use super::{SEED_TOOLS, groups_route, request, sdk_chat_as};
use crate::common::answers::{config_errors, status_and_json};
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::json;

#[tokio::test]
async fn a_toolgate_value_that_is_not_an_object_is_a_400_never_forwarded() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    for (value, kind) in [
        (json!(["admin"]), "an array"),
        (json!("admin"), "a string"),
        (json!(7), "a number"),
        (json!(null), "null"),
    ] {
        let mut body = request(&SEED_TOOLS, vec![]);
        body["toolgate"] = value;
        let (status, envelope) = status_and_json(
            gateway
                .post_json_with("/v1/chat/completions", &[], &body)
                .await,
        )
        .await;
        assert_eq!(status, 400, "{kind}: {envelope}");
        assert_eq!(envelope["error"]["code"], "invalid_directive");
        let message = envelope["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("must be an object, not {kind}")),
            "{message}"
        );
    }
    assert_eq!(upstream.request_count(), 0, "nothing reached the upstream");
}

#[tokio::test]
async fn an_anthropic_client_gets_the_refusal_in_its_own_shape() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(
        &upstream,
        &format!(
            "{}\n[[routes]]\npath = \"/v1/messages\"\nupstream = \"llm\"\n\
             [[routes.plugins]]\nname = \"tool_groups\"\n",
            super::CATALOG
        ),
    )
    .await;
    let body = json!({
        "model": "claude-sonnet-4-5", "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "weather", "input_schema": {"type": "object"}}],
        "toolgate": ["admin"],
    });
    let (status, envelope) =
        status_and_json(gateway.post_json_with("/v1/messages", &[], &body).await).await;
    assert_eq!(status, 400);
    assert_eq!(envelope["type"], "error", "{envelope}");
    assert!(
        envelope["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("must be an object")),
        "{envelope}"
    );
    assert_eq!(upstream.request_count(), 0);
}

#[tokio::test]
async fn toolgate_headers_are_not_forwarded_upstream() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &groups_route("")).await;
    upstream.push(Reply::chat_text("ok"));
    sdk_chat_as(
        &gateway,
        "sk-client",
        &[
            ("x-toolgate-group", "knowledge"),
            ("x-toolgate-state", "undefined"),
            ("x-toolgate-agent", "planner"),
            ("x-toolgate-conversation", "conv-1"),
            ("x-trace", "kept"),
        ],
        request(&SEED_TOOLS, vec![]),
    )
    .await
    .expect("allowed");
    let forwarded = upstream.last_request().expect("forwarded");
    for name in [
        "x-toolgate-group",
        "x-toolgate-state",
        "x-toolgate-agent",
        "x-toolgate-conversation",
    ] {
        assert_eq!(forwarded.header(name), None, "{name} reached the upstream");
    }
    assert_eq!(forwarded.header("x-trace"), Some("kept"));
}

#[test]
fn catalog_names_no_request_could_give_are_load_errors_and_group_is_an_alias() {
    let plugins = toolgate::PluginRegistry::builtin(&mut Default::default());
    let config = |tool: &str| {
        format!(
            "[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n[tools.a]\n{tool}\n\n\
             [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
             [[routes.plugins]]\nname = \"tool_groups\"\n"
        )
    };
    for (tool, key) in [
        ("groups = [\"read only\"]", "tools.a.groups: 'read only'"),
        ("groups = [\"a,b\"]", "tools.a.groups: 'a,b'"),
        ("groups = [\"*\"]", "tools.a.groups: '*'"),
        ("groups = [\"\"]", "tools.a.groups: ''"),
        (
            "available_in_states = [\"état\"]",
            "tools.a.available_in_states: 'état'",
        ),
        ("state = \"*\"", "tools.a.state: '*'"),
    ] {
        let errors = config_errors(&config(tool), "g.toml", &plugins);
        assert!(
            errors.contains(key) && errors.contains("not a name a request can give"),
            "{tool}: {errors}"
        );
    }
    let seed_spelling = toolgate::Config::from_toml(
        &config("group = [\"read-only\", \"knowledge\"]\navailable_in_states = [\"*\"]"),
        "g.toml",
        &plugins,
    );
    assert!(seed_spelling.is_ok(), "{:?}", seed_spelling.err());
}
