//! Tenant JWT keys from a JWKS URL (`[auth.jwt] jwks_url`), served by a scripted server on
//! loopback: a key added after start is fetched on its first token, a removed key stops
//! verifying after a refresh while a failed refresh keeps the last good keys, and a JWKS server
//! down at start means 401 `jwks_unavailable` and a `/ready` that waits for it.

use std::time::Duration;

use serde_json::{Value, json};
use toolgate::Runtime;

use crate::common::answers::config_errors;
use crate::common::{Reply, ScriptedUpstream, TestGateway, free_loopback_port};
use crate::tenants_jwt::{TestKey, claims, offered_with, refused_with, tenants_config_with};

/// A JWKS document listing the public halves of `keys`.
fn jwks(keys: &[(&TestKey, &str)]) -> Value {
    json!({"keys": keys.iter().map(|(key, kid)| key.jwk(kid)).collect::<Vec<_>>()})
}

/// A gateway fetching its keys from `jwks_server`, every `refresh_secs`.
async fn gateway_fetching(
    upstream: &ScriptedUpstream,
    jwks_url: &str,
    refresh_secs: u64,
) -> TestGateway {
    let keys = format!("jwks_url = \"{jwks_url}/jwks.json\"\njwks_refresh_secs = {refresh_secs}");
    TestGateway::start(upstream, &tenants_config_with(&keys)).await
}

/// Waits until `server` has answered `more` fetches beyond `seen`. Refreshes run one at a
/// time, so once a further fetch has begun, the one before it has been applied.
async fn await_fetches(server: &ScriptedUpstream, seen: usize, more: usize) {
    for _ in 0..600 {
        if server.request_count() >= seen + more {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the gateway did not fetch the JWKS {more} more times");
}

/// Waits until `/ready` says 200: the first fetch has succeeded.
async fn await_ready(gateway: &TestGateway) {
    for _ in 0..600 {
        if gateway.admin_get("/ready").await.status() == 200 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the gateway never became ready: its JWKS was not fetched");
}

#[tokio::test]
async fn a_key_added_after_start_is_fetched_on_its_first_token_and_misses_are_rate_limited() {
    let (first, added) = (TestKey::ec(), TestKey::ed());
    let server = ScriptedUpstream::start().await;
    server.set_default(Reply::json(200, jwks(&[(&first, "k1")])));
    let upstream = ScriptedUpstream::start().await;
    let gateway = gateway_fetching(&upstream, &server.url(), 300).await;
    await_ready(&gateway).await;

    let token = first.sign("k1", &claims("reader", json!({})));
    assert_eq!(offered_with(&gateway, &upstream, &token).await, ["lookup"]);

    server.set_default(Reply::json(200, jwks(&[(&first, "k1"), (&added, "k2")])));
    let fetched = server.request_count();
    let token = added.sign("k2", &claims("operator", json!({})));
    assert_eq!(
        offered_with(&gateway, &upstream, &token).await,
        ["lookup", "drop_table"],
        "the unknown kid made the gateway fetch the JWKS again"
    );
    assert_eq!(server.request_count(), fetched + 1);

    // Another unknown kid right after: refused without a fetch, so made-up kids cannot make
    // toolgate hammer the identity provider.
    let stranger = TestKey::rsa().sign("k3", &claims("reader", json!({})));
    refused_with(&gateway, &stranger, "unknown_signing_key").await;
    assert_eq!(server.request_count(), fetched + 1, "rate-limited");
    assert!(
        server
            .requests()
            .iter()
            .all(|request| request.header("authorization").is_none()),
        "no client credential goes to the JWKS server"
    );
}

#[tokio::test]
async fn a_removed_key_stops_verifying_after_a_refresh_and_a_failed_refresh_keeps_the_keys() {
    let (retired, kept) = (TestKey::ec(), TestKey::ed());
    let server = ScriptedUpstream::start().await;
    server.set_default(Reply::json(200, jwks(&[(&retired, "old"), (&kept, "new")])));
    let upstream = ScriptedUpstream::start().await;
    let gateway = gateway_fetching(&upstream, &server.url(), 1).await;
    let retired_token = retired.sign("old", &claims("reader", json!({})));
    let kept_token = kept.sign("new", &claims("reader", json!({})));
    offered_with(&gateway, &upstream, &retired_token).await;
    offered_with(&gateway, &upstream, &kept_token).await;

    server.set_default(Reply::json(200, jwks(&[(&kept, "new")])));
    await_fetches(&server, server.request_count(), 2).await;
    refused_with(&gateway, &retired_token, "unknown_signing_key").await;
    offered_with(&gateway, &upstream, &kept_token).await;

    // The JWKS server fails: the last good keys stay.
    server.set_default(Reply::json(503, json!({"error": "down"})));
    await_fetches(&server, server.request_count(), 2).await;
    offered_with(&gateway, &upstream, &kept_token).await;
    let ready = gateway.admin_get("/ready").await;
    assert_eq!(ready.status(), 200, "keys are held: still ready");
}

#[tokio::test]
async fn a_jwks_server_down_at_start_refuses_tokens_and_holds_ready_until_it_answers() {
    let key = TestKey::ed();
    let port = free_loopback_port();
    let jwks_url = format!("http://127.0.0.1:{port}");
    let upstream = ScriptedUpstream::start().await;
    let gateway = gateway_fetching(&upstream, &jwks_url, 300).await;

    let token = key.sign("k", &claims("reader", json!({})));
    refused_with(&gateway, &token, "jwks_unavailable").await;
    let ready = gateway.admin_get("/ready").await;
    assert_eq!(ready.status(), 503);
    let body: Value = ready.json().await.expect("json");
    assert!(
        body["jwks"]
            .as_str()
            .is_some_and(|reason| reason.contains("no signing keys")),
        "{body}"
    );
    // API keys do not depend on the JWKS.
    assert_eq!(
        offered_with(&gateway, &upstream, "sk-operator").await,
        ["lookup", "drop_table"]
    );
    assert_eq!(
        upstream.request_count(),
        1,
        "the refused token went nowhere"
    );

    // The JWKS server comes up where the gateway looks; its retries find it.
    let server = ScriptedUpstream::start_on(([127, 0, 0, 1], port).into()).await;
    server.set_default(Reply::json(200, jwks(&[(&key, "k")])));
    await_ready(&gateway).await;
    assert_eq!(offered_with(&gateway, &upstream, &token).await, ["lookup"]);
}

#[test]
fn the_keys_come_from_exactly_one_place_and_a_jwks_url_is_https() {
    let plugins = Runtime::new().plugins;
    let config = |keys: &str| {
        format!("[auth.jwt]\n{keys}\naudience = \"a\"\n[tenants.reader]\ngroups = [\"default\"]\n")
    };
    let both = config("jwks_file = \"k.json\"\njwks_url = \"https://idp.test/jwks\"");
    let errors = config_errors(&both, "gw.toml", &plugins);
    assert!(
        errors.contains("exactly one of jwks_file and jwks_url"),
        "{errors}"
    );
    let neither = config("");
    let errors = config_errors(&neither, "gw.toml", &plugins);
    assert!(
        errors.contains("exactly one of jwks_file and jwks_url"),
        "{errors}"
    );
    let plain = config("jwks_url = \"http://idp.example.com/jwks\"");
    let errors = config_errors(&plain, "gw.toml", &plugins);
    assert!(
        errors.contains("auth.jwt.jwks_url") && errors.contains("https"),
        "{errors}"
    );
    let never = config("jwks_url = \"https://idp.test/jwks\"\njwks_refresh_secs = 0");
    let errors = config_errors(&never, "gw.toml", &plugins);
    assert!(errors.contains("jwks_refresh_secs"), "{errors}");
}
