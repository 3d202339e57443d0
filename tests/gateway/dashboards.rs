//! The shipped dashboard and alert rules run: a real Prometheus (the Debian `prometheus`
//! package) scrapes a gateway under scripted traffic, and every panel's query in
//! `deploy/grafana/toolgate.json` and every alert's signal in `deploy/prometheus/alerts.yml`
//! (its expression before the threshold) returns data through Prometheus's HTTP API. The
//! gateway's series exist at zero from its start, so this holds before anything has failed.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::services::{ARGCHECK_PARAMS, Validator, service};
use crate::common::{Reply, ScriptedUpstream, TestGateway, free_loopback_port, temp_audit_path};

/// A running Prometheus, stopped when dropped.
struct Prometheus {
    child: tokio::process::Child,
    url: String,
    _dir: std::path::PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl Prometheus {
    /// `None` when the binary is missing (the test then fails, or is skipped when opted out).
    async fn scraping(target: std::net::SocketAddr) -> Option<Prometheus> {
        let installed = std::process::Command::new("prometheus")
            .arg("--version")
            .output()
            .is_ok_and(|output| output.status.success());
        if !installed {
            crate::common::skip_for_missing(
                "the prometheus binary",
                "apt-get install -y prometheus (.ci/test does)",
            );
            return None;
        }
        let dir = temp_audit_path().with_extension("prometheus");
        std::fs::create_dir_all(&dir).expect("a data directory");
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: toolgate\n    static_configs:\n      - targets: [\"{target}\"]\n"
            ),
        )
        .expect("writes prometheus.yml");
        let port = free_loopback_port();
        let child = tokio::process::Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("prometheus starts");
        Some(Prometheus {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        })
    }

    /// The result of an instant query; `Err` with Prometheus's words when the query is refused.
    async fn query(&self, expression: &str) -> Result<Vec<Value>, String> {
        let response = crate::common::http()
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", expression)])
            .send()
            .await
            .map_err(|error| error.to_string())?;
        let body: Value = response.json().await.map_err(|error| error.to_string())?;
        if body["status"] != "success" {
            return Err(body.to_string());
        }
        Ok(body["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// Waits until the gateway has been scraped `scrapes` times.
    async fn wait_for_scrapes(&self, scrapes: usize) {
        for _ in 0..300 {
            let samples = self
                .query("count_over_time(up{job=\"toolgate\"}[5m])")
                .await
                .ok()
                .and_then(|result| result.first().cloned())
                .and_then(|sample| sample["value"][1].as_str().map(str::to_owned))
                .and_then(|count| count.parse::<usize>().ok());
            if samples.is_some_and(|count| count >= scrapes) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("prometheus never scraped the gateway {scrapes} times");
    }
}

/// Every panel query of the dashboard.
fn panel_queries() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/grafana/toolgate.json"
    ))
    .expect("deploy/grafana/toolgate.json");
    let dashboard: Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or_default().to_owned();
            let expression = target["expr"].as_str().expect("an expr").to_owned();
            queries.push((title, expression));
        }
    }
    queries
}

/// Every alert's signal: its expression before the comparison with its threshold.
fn alert_signals() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/prometheus/alerts.yml"
    ))
    .expect("deploy/prometheus/alerts.yml");
    let mut signals = Vec::new();
    let mut alert = String::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(name) = line.strip_prefix("- alert: ") {
            alert = name.to_owned();
        } else if let Some(expression) = line.strip_prefix("expr: ") {
            let cut = [" > ", " == ", " < "]
                .iter()
                .filter_map(|operator| expression.rfind(operator))
                .max()
                .expect("an alert compares its signal with a threshold");
            signals.push((alert.clone(), expression[..cut].to_owned()));
        }
    }
    signals
}

#[tokio::test]
async fn every_panel_and_alert_of_the_shipped_dashboards_returns_data() {
    let upstream = ScriptedUpstream::start().await;
    let judge = ScriptedUpstream::start().await;
    let validator = Validator::start().await;
    let config = format!(
        "{}\n[mcp_servers.notes]\ncommand = \"true\"\n\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"service\"\n[routes.plugins.settings]\n\
         service = \"argcheck\"\nconfig = {{ deny_substrings = [\"drop table\"] }}\n\
         [[routes.plugins]]\nname = \"tool_selection\"\non_block = \"retry\"\n[routes.plugins.settings]\n\
         openai_api_key = \"sk-judge\"\nbase_url = \"{}/v1\"\nmodel = \"judge-model\"\n\n\
         [[routes]]\npath = \"/mcp\"\nkind = \"mcp\"\n",
        service("argcheck", &validator.url, ARGCHECK_PARAMS),
        judge.url()
    );
    let gateway = TestGateway::start(&upstream, &config).await;
    let Some(admin) = gateway.admin_addr else {
        panic!("the test gateway has an admin listener");
    };
    let Some(prometheus) = Prometheus::scraping(admin).await else {
        return;
    };

    // Scripted traffic: an allowed call (the judge allows it), and a blocked one the retry repairs.
    let request = json!({"model": "m", "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object"}}}]});
    judge.set_default(Reply::judge("allow", "asked for"));
    upstream.push(Reply::chat_calls(&[(
        "c1",
        "get_weather",
        "{\"city\":\"Paris\"}",
    )]));
    upstream.push(Reply::chat_calls(&[("c2", "delete_files", "{}")]));
    upstream.push(Reply::chat_calls(&[(
        "c3",
        "get_weather",
        "{\"city\":\"Paris\"}",
    )]));
    for _ in 0..2 {
        let status = gateway.post_status("/v1/chat/completions", &request).await;
        assert_eq!(status, 200);
    }
    prometheus.wait_for_scrapes(4).await;

    let mut empty = Vec::new();
    for (name, expression) in panel_queries().into_iter().chain(alert_signals()) {
        match prometheus.query(&expression).await {
            Ok(result) if !result.is_empty() => {}
            Ok(_) => empty.push(format!("{name}: no data from {expression}")),
            Err(error) => empty.push(format!("{name}: refused {expression}: {error}")),
        }
    }
    assert!(empty.is_empty(), "{}", empty.join("\n"));
    assert!(panel_queries().len() >= 15 && alert_signals().len() >= 8);
}
