//! Golden exchanges: every recorded pair in `fixtures/chat/` goes through a real gateway, and the
//! client must see the verdict `fixtures/chat/verdicts.json` records for it (status, code, and
//! the fields of each violation). The same pairs drive `toolgate explain` and `toolgate demo`.

mod common;

use common::{Reply, ScriptedUpstream, TestGateway, fixture, fixture_json, guarded_chat};
use serde_json::Value;

/// Checks one exchange against its expected verdict; returns a description of any mismatch.
async fn check(
    gateway: &TestGateway,
    upstream: &ScriptedUpstream,
    name: &str,
    expected: &Value,
) -> Option<String> {
    upstream.push(Reply::raw(
        200,
        "application/json",
        fixture(&format!("chat/{name}.response.json")).into_bytes(),
    ));
    let response = gateway
        .post(
            "/v1/chat/completions",
            &fixture_json(&format!("chat/{name}.request.json")),
        )
        .await;
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    if expected["verdict"] == "allowed" {
        let recorded = fixture(&format!("chat/{name}.response.json"));
        return (status != 200 || body != recorded)
            .then(|| format!("{name}: expected the recorded answer, got {status}: {body}"));
    }
    if Some(u64::from(status)) != expected["status"].as_u64() {
        return Some(format!(
            "{name}: expected status {}, got {status}: {body}",
            expected["status"]
        ));
    }
    let body: Value = serde_json::from_str(&body).unwrap_or_default();
    if body["error"]["code"] != expected["code"] {
        return Some(format!(
            "{name}: expected code {}, got {}",
            expected["code"], body["error"]["code"]
        ));
    }
    let actual = body["error"]["violations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let wanted = expected["violations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if actual.len() != wanted.len() {
        return Some(format!(
            "{name}: expected {} violations, got {actual:#?}",
            wanted.len()
        ));
    }
    for (want, got) in wanted.iter().zip(&actual) {
        for (key, value) in want.as_object().into_iter().flatten() {
            if &got[key] != value {
                return Some(format!(
                    "{name}: violation field {key}: expected {value}, got {}",
                    got[key]
                ));
            }
        }
    }
    None
}

#[tokio::test]
async fn every_recorded_exchange_gets_its_recorded_verdict() {
    let verdicts = fixture_json("chat/verdicts.json");
    let verdicts = verdicts.as_object().expect("an object of verdicts");
    assert!(verdicts.len() >= 10, "the golden set is complete");
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_chat("")).await;
    let strict_upstream = ScriptedUpstream::start().await;
    let strict_gateway = TestGateway::start(&strict_upstream, &guarded_chat("strict = true")).await;

    let mut failures = Vec::new();
    for (name, expected) in verdicts {
        failures.extend(check(&gateway, &upstream, name, expected).await);
        // Under strict, an entry's `strict` verdict applies; otherwise the same verdict does.
        let strict_expected = expected.get("strict").unwrap_or(expected);
        failures.extend(check(&strict_gateway, &strict_upstream, name, strict_expected).await);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
