//! Golden exchanges: every recorded pair in `fixtures/{chat,responses,anthropic}/` goes through a
//! real gateway on its format's endpoint, and the client must see the verdict the folder's
//! `verdicts.json` records (status, code, the fields of each violation) in its format's error
//! shape. The same pairs drive `toolgate explain` and `toolgate demo`.

use crate::common::{Reply, ScriptedUpstream, TestGateway, fixture, fixture_json};
use serde_json::Value;

/// tool_selection on every route, the format found per request (path, then body).
fn guarded_everywhere(settings: &str) -> String {
    format!(
        "[[plugins]]\nname = \"tool_selection\"\n[plugins.settings]\n{settings}\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n"
    )
}

/// One folder of recorded exchanges and the endpoint its format is served on.
#[derive(Clone, Copy)]
struct Folder {
    name: &'static str,
    path: &'static str,
    anthropic: bool,
}

const FOLDERS: [Folder; 3] = [
    Folder {
        name: "chat",
        path: "/v1/chat/completions",
        anthropic: false,
    },
    Folder {
        name: "responses",
        path: "/v1/responses",
        anthropic: false,
    },
    Folder {
        name: "anthropic",
        path: "/v1/messages",
        anthropic: true,
    },
];

/// Checks one exchange against its expected verdict; returns a description of any mismatch.
async fn check(
    gateway: &TestGateway,
    upstream: &ScriptedUpstream,
    folder: Folder,
    name: &str,
    expected: &Value,
) -> Option<String> {
    let dir = folder.name;
    upstream.push(Reply::raw(
        200,
        "application/json",
        fixture(&format!("{dir}/{name}.response.json")).into_bytes(),
    ));
    let response = gateway
        .post(
            folder.path,
            &fixture_json(&format!("{dir}/{name}.request.json")),
        )
        .await;
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    if expected["verdict"] == "allowed" {
        let recorded = fixture(&format!("{dir}/{name}.response.json"));
        return (status != 200 || body != recorded)
            .then(|| format!("{dir}/{name}: expected the recorded answer, got {status}: {body}"));
    }
    if Some(u64::from(status)) != expected["status"].as_u64() {
        return Some(format!(
            "{dir}/{name}: expected status {}, got {status}: {body}",
            expected["status"]
        ));
    }
    let body: Value = serde_json::from_str(&body).unwrap_or_default();
    if folder.anthropic && (body["type"] != "error" || body["error"]["type"] != "permission_error")
    {
        return Some(format!(
            "{dir}/{name}: expected Anthropic's error shape, got {body}"
        ));
    }
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
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &guarded_everywhere("")).await;
    let strict_upstream = ScriptedUpstream::start().await;
    let strict_gateway =
        TestGateway::start(&strict_upstream, &guarded_everywhere("strict = true")).await;

    let mut failures = Vec::new();
    let mut checked = 0;
    for folder in FOLDERS {
        let verdicts = fixture_json(&format!("{}/verdicts.json", folder.name));
        let verdicts = verdicts.as_object().cloned().unwrap_or_default();
        assert!(
            verdicts.len() >= 6,
            "the golden set of {} is complete",
            folder.name
        );
        for (name, expected) in &verdicts {
            checked += 1;
            failures.extend(check(&gateway, &upstream, folder, name, expected).await);
            // Under strict, an entry's `strict` verdict applies; otherwise the same verdict does.
            let strict_expected = expected.get("strict").unwrap_or(expected);
            failures.extend(
                check(
                    &strict_gateway,
                    &strict_upstream,
                    folder,
                    name,
                    strict_expected,
                )
                .await,
            );
        }
    }
    assert!(checked >= 28, "{checked} exchanges checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
