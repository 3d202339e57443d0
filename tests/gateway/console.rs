//! The operator's console on the admin listener: the page under a strict policy, the recent
//! exchanges live, one exchange with its capture and a replay, and who may see them.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{Reply, ScriptedUpstream, TestGateway};

const ROUTE: &str = "[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
    [[routes.plugins]]\nname = \"tool_selection\"\n";

fn request() -> Value {
    json!({"model": "m", "messages": [{"role": "user", "content": "Weather?"}],
           "tools": [{"type": "function", "function": {"name": "get_weather",
                      "parameters": {"type": "object"}}}]})
}

async fn start(server: &str) -> (ScriptedUpstream, TestGateway) {
    let upstream = ScriptedUpstream::start().await;
    let body = format!("capture = \"blocked\"\n\n{ROUTE}");
    let gateway = TestGateway::start_tuned(&upstream, server, &body).await;
    (upstream, gateway)
}

fn admin(gateway: &TestGateway) -> String {
    format!("http://{}", gateway.admin_addr.expect("an admin listener"))
}

/// Reads the console's event stream until a `data:` line holds `needle`.
async fn event_with(admin_address: std::net::SocketAddr, needle: String) -> String {
    let mut stream = tokio::net::TcpStream::connect(admin_address)
        .await
        .expect("connects");
    stream
        .write_all(b"GET /console/api/events HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("asks");
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = stream.read(&mut buffer).await.expect("reads");
        assert!(
            read > 0,
            "the stream ended: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&seen);
        if let Some(line) = text
            .lines()
            .find(|line| line.starts_with("data: ") && line.contains(&needle))
        {
            return line.to_owned();
        }
    }
}

#[tokio::test]
async fn the_console_lists_exchanges_live_opens_one_and_replays_it() {
    let (upstream, gateway) = start("").await;
    let client = crate::common::http();
    let page = client
        .get(format!("{}/console", admin(&gateway)))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), 200);
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        policy.contains("default-src 'none'") && policy.contains("script-src 'self'"),
        "{policy}"
    );
    let html = page.text().await.expect("html");
    assert!(
        html.contains("/console/app.js") && !html.contains("http"),
        "nothing from elsewhere"
    );
    for asset in ["/console/app.js", "/console/app.css"] {
        let response = client
            .get(format!("{}{asset}", admin(&gateway)))
            .send()
            .await
            .expect(asset);
        assert_eq!(response.status(), 200, "{asset}");
    }

    // A blocked exchange appears on the live stream, then in the list.
    let address = gateway.admin_addr.expect("an admin listener");
    upstream.push(Reply::chat_calls(&[(
        "c1",
        "delete_files",
        "{\"path\":\"/\"}",
    )]));
    let listening = tokio::spawn(event_with(address, "delete_files".to_owned()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let blocked = gateway.post("/v1/chat/completions", &request()).await;
    assert_eq!(blocked.status(), 403);
    let id = blocked.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let event = tokio::time::timeout(Duration::from_secs(5), listening)
        .await
        .expect("the event came")
        .expect("the reader ran");
    assert!(event.contains(&id), "{event}");
    let listed: Value = client
        .get(format!("{}/console/api/exchanges", admin(&gateway)))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json");
    assert_eq!(listed["exchanges"][0]["request_id"], id.as_str());

    // One exchange: its violations and its captured bodies.
    let one: Value = client
        .get(format!("{}/console/api/exchanges/{id}", admin(&gateway)))
        .send()
        .await
        .expect("one")
        .json()
        .await
        .expect("json");
    assert_eq!(
        one["audit"]["violations"][0]["check"], "membership",
        "{one}"
    );
    assert!(
        one["capture"]["response"]
            .as_str()
            .unwrap_or_default()
            .contains("delete_files")
    );

    // A replay from the console's own page runs explain with the running configuration; from
    // another origin it is refused.
    let replay = format!("{}/console/api/exchanges/{id}/replay", admin(&gateway));
    let origin = admin(&gateway);
    let replayed: Value = client
        .post(&replay)
        .header("origin", origin)
        .send()
        .await
        .expect("replay")
        .json()
        .await
        .expect("json");
    assert_eq!(replayed["blocked"], true, "{replayed}");
    assert!(
        replayed["text"]
            .as_str()
            .unwrap_or_default()
            .contains("verdict: BLOCKED")
    );
    let foreign = client
        .post(&replay)
        .header("origin", "http://evil.example")
        .send()
        .await
        .expect("replay");
    assert_eq!(foreign.status(), 403);
}

#[tokio::test]
async fn with_an_admin_token_the_console_apis_and_captures_ask_for_it() {
    let (_upstream, gateway) = start("admin_token = \"s3cret\"\nprotect_metrics = true\n").await;
    let client = crate::common::http_builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("a client");
    let base = admin(&gateway);
    for path in ["/console/api/exchanges", "/captures", "/metrics"] {
        let bare = client
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect(path);
        assert_eq!(bare.status(), 401, "{path} without the token");
        let wrong = client
            .get(format!("{base}{path}"))
            .bearer_auth("guess")
            .send()
            .await
            .expect(path);
        assert_eq!(wrong.status(), 401, "{path} with a wrong token");
        let right = client
            .get(format!("{base}{path}"))
            .bearer_auth("s3cret")
            .send()
            .await
            .expect(path);
        assert_eq!(right.status(), 200, "{path} with the token");
    }
    // The page itself holds no data: it is served, and asks for the token.
    assert_eq!(
        client
            .get(format!("{base}/console"))
            .send()
            .await
            .expect("page")
            .status(),
        200
    );

    // The sign-in form: a wrong token is refused; the right one sets an HttpOnly cookie that
    // opens the APIs (never the token itself).
    let login = |token: &'static str| {
        client
            .post(format!("{base}/console/login"))
            .header("origin", base.clone())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={token}"))
            .send()
    };
    assert_eq!(login("guess").await.expect("login").status(), 401);
    let signed_in = login("s3cret").await.expect("login");
    assert_eq!(signed_in.status(), 303);
    let cookie = signed_in.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(!cookie.contains("s3cret"), "{cookie}");
    let pair = cookie.split(';').next().unwrap_or_default().to_owned();
    let with_cookie = client
        .get(format!("{base}/console/api/exchanges"))
        .header("cookie", pair)
        .send()
        .await
        .expect("list");
    assert_eq!(with_cookie.status(), 200);
    // A sign-in posted from elsewhere is refused.
    let foreign = client
        .post(format!("{base}/console/login"))
        .header("origin", "http://evil.example")
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=s3cret")
        .send()
        .await
        .expect("login");
    assert_eq!(foreign.status(), 403);
}
