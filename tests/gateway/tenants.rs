//! Tenants end to end: a route that requires a tenant's key answers 401 without one, the key
//! never reaches the upstream (its own key is injected), and the audit line names the tenant.

use crate::common::answers::config_errors;
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use async_openai::error::OpenAIError;
use async_openai::types::chat::CreateChatCompletionRequestArgs;
use serde_json::json;

const ACME_KEY: &str = "sk-acme-tenant-key";

fn config(upstream_url: &str) -> String {
    format!(
        "[upstreams.keyed]\nurl = \"{upstream_url}\"\napi_key = \"sk-upstream-own\"\n\n\
         [tenants.acme]\napi_keys = [\"{ACME_KEY}\"]\ngroups = [\"default\"]\n\n\
         [tenants.globex]\napi_key_sha256 = [\"{}\"]\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"keyed\"\n\n\
         [[routes]]\npath = \"/open\"\nupstream = \"llm\"\nauth = \"none\"\n",
        GLOBEX_KEY_SHA256
    )
}

/// `printf %s sk-globex-tenant-key | sha256sum`, as docs/access-control.md tells an operator to
/// write a key's digest: fixed here, so a change in how toolgate digests keys fails the test.
const GLOBEX_KEY_SHA256: &str = "e498bb0f856f03f803691f02804343083f13520247d78896e9d62bf12eeb2d37";

fn request() -> async_openai::types::chat::CreateChatCompletionRequest {
    CreateChatCompletionRequestArgs::default()
        .model("gpt-test")
        .messages(vec![
            async_openai::types::chat::ChatCompletionRequestUserMessageArgs::default()
                .content("hello")
                .build()
                .expect("message")
                .into(),
        ])
        .build()
        .expect("request")
}

#[tokio::test]
async fn a_tenant_route_refuses_missing_and_unknown_keys_with_401() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &config(&upstream.url())).await;

    let unknown = gateway
        .openai_with_key("sk-nobody")
        .chat()
        .create(request())
        .await
        .expect_err("an unknown key is refused");
    match unknown {
        OpenAIError::ApiError(error) => {
            assert_eq!(error.api_error.code.as_deref(), Some("invalid_api_key"));
            assert_eq!(error.status_code, 401);
        }
        other => panic!("expected an API error, got {other:?}"),
    }

    let missing = gateway
        .post_json_with(
            "/v1/chat/completions",
            &[],
            &json!({"model": "m", "messages": []}),
        )
        .await;
    assert_eq!(missing.status(), 401);
    assert!(missing.headers().contains_key("x-request-id"));
    let body: serde_json::Value = missing.json().await.expect("json");
    assert_eq!(body["error"]["code"], "missing_api_key");
    assert_eq!(upstream.request_count(), 0, "nothing reached the upstream");
}

#[tokio::test]
async fn a_tenant_key_is_replaced_by_the_upstream_key_and_audited() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &config(&upstream.url())).await;
    upstream.push(Reply::chat_text("hi"));
    gateway
        .openai_with_key(ACME_KEY)
        .chat()
        .create(request())
        .await
        .expect("a tenant's key is accepted");
    let seen = upstream.last_request().expect("forwarded");
    assert_eq!(seen.header("authorization"), Some("Bearer sk-upstream-own"));
    assert!(!seen.text().contains(ACME_KEY));

    let mut audit = gateway.audit_lines();
    for _ in 0..100 {
        if !audit.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        audit = gateway.audit_lines();
    }
    let line = audit.last().expect("an audit line");
    assert_eq!(line["tenant"], "acme");
    let text = std::fs::read_to_string(&gateway.audit_path).expect("audit file");
    assert!(!text.contains(ACME_KEY), "the key is never logged");
}

#[tokio::test]
async fn a_key_given_as_a_digest_authenticates_and_is_stripped_even_without_an_upstream_key() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &config(&upstream.url())).await;
    upstream.push(Reply::chat_text("hi"));
    let response = gateway
        .post_json_with(
            "/open/chat/completions",
            &[("x-api-key", "sk-globex-tenant-key")],
            &json!({"model": "m", "messages": []}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let seen = upstream.last_request().expect("forwarded");
    assert_eq!(seen.header("x-api-key"), None, "the tenant key stays here");
    assert_eq!(seen.header("authorization"), None);

    // On an open route an unknown key is the client's own upstream key: it passes.
    upstream.push(Reply::chat_text("hi"));
    let response = gateway
        .post_json_with(
            "/open/chat/completions",
            &[("authorization", "Bearer sk-their-own-openai-key")],
            &json!({"model": "m", "messages": []}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        upstream
            .last_request()
            .expect("forwarded")
            .header("authorization"),
        Some("Bearer sk-their-own-openai-key")
    );
}

#[test]
fn tenant_config_errors_are_located() {
    let plugins = toolgate::PluginRegistry::empty();
    let text = "[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
                [tenants.a]\napi_keys = [\"same\"]\n\n\
                [tenants.b]\napi_keys = [\"same\"]\n\n\
                [tenants.c]\ngroups = [\"x\"]\n\n\
                [tenants.d]\napi_key_sha256 = [\"not-hex\"]\n\n\
                [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\nauth = \"tenants\"\n";
    let errors = config_errors(text, "t.toml", &plugins);
    assert!(
        errors.contains("t.toml:8:13: tenants.b.api_keys[0]"),
        "{errors}"
    );
    assert!(errors.contains("also tenant 'a'"), "{errors}");
    assert!(
        errors.contains("tenants.c: a tenant needs a key"),
        "{errors}"
    );
    assert!(
        errors.contains("tenants.d.api_key_sha256[0]: not a SHA-256 digest"),
        "{errors}"
    );
    assert!(
        errors.contains("routes[0].auth: unknown auth 'tenants'"),
        "{errors}"
    );
}
