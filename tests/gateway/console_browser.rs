//! The console in a real browser: headless Chromium driven over WebDriver (the Debian packages
//! `chromium` and `chromium-driver`). A user signs in with the admin token, sees a blocked
//! exchange appear live, opens it (its violation, its captured bodies with the route's
//! redaction), replays it and reads the verdict; a wrong token sees nothing.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Reply, ScriptedUpstream, TestGateway, free_loopback_port};

/// The WebDriver key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// chromedriver with one headless Chromium session, ended when dropped.
struct Browser {
    _driver: tokio::process::Child,
    session: String,
    client: reqwest::Client,
}

impl Browser {
    /// `None` when Chromium or its driver is missing (the test fails, or is skipped when opted out).
    async fn start() -> Option<Browser> {
        let installed = ["chromium", "chromedriver"].iter().all(|binary| {
            std::process::Command::new(binary)
                .arg("--version")
                .output()
                .is_ok_and(|output| output.status.success())
        });
        if !installed {
            crate::common::skip_for_missing(
                "chromium and chromedriver",
                "apt-get install -y chromium chromium-driver (.ci/test does)",
            );
            return None;
        }
        let port = free_loopback_port();
        let driver = tokio::process::Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let client = crate::common::http();
        let base = format!("http://127.0.0.1:{port}");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]}}}});
        let mut session = None;
        for _ in 0..100 {
            if let Ok(response) = client
                .post(format!("{base}/session"))
                .json(&capabilities)
                .send()
                .await
                && let Ok(body) = response.json::<Value>().await
                && let Some(id) = body["value"]["sessionId"].as_str()
            {
                session = Some(format!("{base}/session/{id}"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Some(Browser {
            _driver: driver,
            session: session.expect("a browser session"),
            client,
        })
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let get = method == reqwest::Method::GET;
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.session));
        if !get {
            // A command without parameters still sends an object; a GET sends none.
            let body = if body.is_null() { json!({}) } else { body };
            request = request.json(&body);
        }
        let response = request.send().await.expect("the driver answers");
        response.json::<Value>().await.expect("JSON")["value"].clone()
    }

    async fn open(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", json!({"url": url}))
            .await;
    }

    /// The element `css` selects once it is there (and, with `text`, once its text holds it).
    async fn wait_for(&self, css: &str, text: Option<&str>) -> String {
        for _ in 0..100 {
            let found = self
                .call(
                    reqwest::Method::POST,
                    "/element",
                    json!({"using": "css selector", "value": css}),
                )
                .await;
            if let Some(id) = found[ELEMENT].as_str() {
                let shown = self.text(id).await;
                if text.is_none_or(|text| shown.contains(text)) {
                    return id.to_owned();
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let last = self
            .call(
                reqwest::Method::POST,
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        let url = self.call(reqwest::Method::GET, "/url", Value::Null).await;
        panic!("never saw {css} with {text:?}: {last} at {url}");
    }

    async fn text(&self, element: &str) -> String {
        let value = self
            .call(
                reqwest::Method::GET,
                &format!("/element/{element}/text"),
                Value::Null,
            )
            .await;
        value.as_str().unwrap_or_default().to_owned()
    }

    async fn click(&self, element: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/click"),
            json!({}),
        )
        .await;
    }

    async fn type_into(&self, element: &str, text: &str) {
        self.call(
            reqwest::Method::POST,
            &format!("/element/{element}/value"),
            json!({"text": text}),
        )
        .await;
    }

    /// How many elements `css` selects now.
    async fn count(&self, css: &str) -> usize {
        let found = self
            .call(
                reqwest::Method::POST,
                "/elements",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        found.as_array().map_or(0, Vec::len)
    }

    async fn forget_cookies(&self) {
        self.call(reqwest::Method::DELETE, "/cookie", Value::Null)
            .await;
    }
}

impl Drop for Browser {
    /// Ends the session, so the driver closes its Chromium (killing the driver alone would
    /// leave the browser's processes behind); the driver itself is stopped after, on drop.
    fn drop(&mut self) {
        use std::io::{Read, Write};
        let Some((address, path)) = self
            .session
            .strip_prefix("http://")
            .and_then(|rest| rest.split_once('/'))
        else {
            return;
        };
        let Ok(mut stream) = std::net::TcpStream::connect(address) else {
            return;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let request = format!(
            "DELETE /{path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        // The driver answers once the browser is closed; its connection may stay open after.
        if stream.write_all(request.as_bytes()).is_ok() {
            let mut answer = [0u8; 1024];
            let _ = stream.read(&mut answer);
        }
    }
}

#[tokio::test]
async fn a_user_signs_in_sees_a_block_live_opens_it_and_replays_it() {
    let Some(browser) = Browser::start().await else {
        return;
    };
    let upstream = ScriptedUpstream::start().await;
    let body = "capture = \"blocked\"\n\n[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
        [[routes.plugins]]\nname = \"tool_selection\"\n\
        [[routes.plugins]]\nname = \"tool_arguments\"\n\
        [[routes.plugins.settings.rules]]\ntools = \"login\"\npointer = \"/password\"\n\
        matches = \"\"\naction = \"redact\"\n";
    let gateway = TestGateway::start_tuned(&upstream, "admin_token = \"s3cret\"\n", body).await;
    let console = format!(
        "http://{}/console",
        gateway.admin_addr.expect("an admin listener")
    );

    // A wrong token sees nothing: the sign-in is refused, and the page stays empty.
    browser.open(&console).await;
    let token = browser.wait_for("#token", None).await;
    browser.type_into(&token, "guess").await;
    let sign_in = browser.wait_for("#sign-in", None).await;
    browser.click(&sign_in).await;
    browser
        .wait_for("body", Some("the admin token is wrong"))
        .await;
    browser.open(&console).await;
    browser.wait_for("#token", None).await;
    assert_eq!(
        browser.count("#rows tr").await,
        0,
        "no exchange is shown without the token"
    );

    // Signed in, the console is live.
    let token = browser.wait_for("#token", None).await;
    browser.type_into(&token, "s3cret").await;
    let sign_in = browser.wait_for("#sign-in", None).await;
    browser.click(&sign_in).await;
    browser.wait_for("#live", Some("live")).await;

    // A blocked exchange: the model calls a tool the request did not declare, with a password.
    upstream.push(Reply::chat_calls(&[(
        "c1",
        "login",
        "{\"user\":\"ann\",\"password\":\"hunter2\"}",
    )]));
    let request = json!({"model": "m", "messages": [{"role": "user", "content": "What is the weather?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]});
    let blocked = gateway.post("/v1/chat/completions", &request).await;
    assert_eq!(blocked.status(), 403);
    let id = blocked.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();

    let row = browser
        .wait_for(&format!("tr[data-request-id=\"{id}\"]"), Some("blocked"))
        .await;
    browser.click(&row).await;
    browser
        .wait_for("#detail-violations", Some("membership"))
        .await;
    let request_text = browser
        .wait_for("#detail-request", Some("What is the weather?"))
        .await;
    assert!(browser.text(&request_text).await.contains("get_weather"));
    let answer = browser.wait_for("#detail-response", Some("login")).await;
    let answer = browser.text(&answer).await;
    assert!(
        !answer.contains("hunter2"),
        "the route's redaction holds in the capture: {answer}"
    );
    assert!(answer.contains("REDACTED"), "{answer}");

    let replay = browser.wait_for("#replay", None).await;
    browser.click(&replay).await;
    browser
        .wait_for("#replay-result", Some("verdict: BLOCKED"))
        .await;

    // Signed out (the cookie gone), the same page shows nothing again.
    browser.forget_cookies().await;
    browser.open(&console).await;
    browser.wait_for("#token", None).await;
    assert_eq!(browser.count("#rows tr").await, 0);
}
