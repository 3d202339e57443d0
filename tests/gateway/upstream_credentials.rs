//! Upstream credentials per provider and tenant: an Anthropic route presents the key as
//! `x-api-key` (what Anthropic's API requires), an upstream's `auth` names another header
//! (Azure's `api-key`), and a tenant's own key for an upstream replaces the upstream's.

use crate::common::answers::{config_errors, sdk_chat_request};
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::json;

const ACME_KEY: &str = "sk-acme-tenant-key";
const GLOBEX_KEY: &str = "sk-globex-tenant-key";

fn config(upstream_url: &str) -> String {
    format!(
        "[upstreams.anthropic]\nurl = \"{upstream_url}\"\napi_key = \"sk-ant-gateway\"\n\n\
         [upstreams.azure]\nurl = \"{upstream_url}\"\napi_key = \"azure-gateway\"\nauth = \"api-key\"\n\n\
         [tenants.acme]\napi_keys = [\"{ACME_KEY}\"]\n\
         upstream_keys = {{ anthropic = \"sk-ant-acme\", azure = \"azure-acme\" }}\n\n\
         [tenants.globex]\napi_keys = [\"{GLOBEX_KEY}\"]\n\n\
         [[routes]]\npath = \"/v1/messages\"\nupstream = \"anthropic\"\n\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"azure\"\n"
    )
}

fn anthropic_message() -> serde_json::Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
           "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
           "usage": {"input_tokens": 1, "output_tokens": 1}})
}

#[tokio::test]
async fn an_anthropic_upstream_that_requires_x_api_key_gets_it() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &config(&upstream.url())).await;
    let body = json!({"model": "claude", "max_tokens": 16,
                      "messages": [{"role": "user", "content": "hi"}]});

    // globex holds no key of its own: the upstream's, as x-api-key.
    upstream.require_header("x-api-key", "sk-ant-gateway");
    upstream.push(Reply::json(200, anthropic_message()));
    let response = gateway
        .post_json_with(
            "/v1/messages",
            &[
                ("x-api-key", GLOBEX_KEY),
                ("anthropic-version", "2023-06-01"),
            ],
            &body,
        )
        .await;
    assert_eq!(response.status(), 200, "the provider accepted the key");
    let sent = upstream.last_request().expect("forwarded");
    assert_eq!(
        sent.header("authorization"),
        None,
        "no Bearer copy of the key"
    );
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));

    // acme's own Anthropic key replaces the upstream's; with the provider expecting the
    // gateway's key, acme's request is the one it refuses, and the 401 reaches the client.
    let response = gateway
        .post_json_with("/v1/messages", &[("x-api-key", ACME_KEY)], &body)
        .await;
    assert_eq!(response.status(), 401);
    assert_eq!(
        upstream
            .last_request()
            .expect("forwarded")
            .header("x-api-key"),
        Some("sk-ant-acme")
    );
    upstream.require_header("x-api-key", "sk-ant-acme");
    upstream.push(Reply::json(200, anthropic_message()));
    let response = gateway
        .post_json_with("/v1/messages", &[("x-api-key", ACME_KEY)], &body)
        .await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn an_upstream_auth_header_carries_the_tenants_own_key_for_an_sdk_client() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &config(&upstream.url())).await;
    let body = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});

    upstream.require_header("api-key", "azure-acme");
    upstream.push(Reply::chat_text("from azure"));
    let answer = gateway
        .openai_with_key(ACME_KEY)
        .chat()
        .create(sdk_chat_request(body.clone()))
        .await
        .expect("the provider accepted acme's own key");
    assert_eq!(
        answer.choices[0].message.content.as_deref(),
        Some("from azure")
    );
    let sent = upstream.last_request().expect("forwarded");
    assert_eq!(
        sent.header("authorization"),
        None,
        "acme's gateway key stays here"
    );

    upstream.require_header("api-key", "azure-gateway");
    upstream.push(Reply::chat_text("shared key"));
    gateway
        .openai_with_key(GLOBEX_KEY)
        .chat()
        .create(sdk_chat_request(body))
        .await
        .expect("globex goes with the upstream's key");
}

#[test]
fn bad_upstream_auth_and_unknown_upstream_keys_are_load_errors() {
    let plugins = toolgate::PluginRegistry::builtin(&mut Default::default());
    let text = config("http://127.0.0.1:1")
        .replace("auth = \"api-key\"", "auth = \"not a header\"")
        .replace("azure = \"azure-acme\"", "azura = \"azure-acme\"");
    let errors = config_errors(&text, "g.toml", &plugins);
    assert!(errors.contains("upstreams.azure.auth"), "{errors}");
    assert!(
        errors.contains("tenants.acme.upstream_keys.azura: unknown upstream 'azura'"),
        "{errors}"
    );
}
