//! The `toolgate` binary as a user runs it: `check` with located errors and exit 2, `explain`
//! on recorded exchanges, `demo`, and `serve` on the shipped gateway.toml.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output};

use crate::common::{free_loopback_port, temp_audit_path};

fn toolgate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("TOOLGATE_CONFIG")
        .output()
        .expect("the binary runs")
}

/// `toolgate check` on the config file at `path`.
fn check(path: &Path) -> Output {
    toolgate(&["check", "--config", path.to_str().expect("utf-8 path")])
}

/// `toolgate explain` of a recorded exchange (`request`, `response`) on `route` of the shipped
/// gateway.toml.
fn explain(route: &str, request: &str, response: &str) -> Output {
    toolgate(&[
        "explain",
        "--config",
        "gateway.toml",
        "--route",
        route,
        "--request",
        request,
        "--response",
        response,
    ])
}

/// Asks the process `pid` to stop as a service manager would.
fn sigterm(pid: &str) -> ExitStatus {
    Command::new("kill")
        .args(["-TERM", pid])
        .status()
        .expect("kill runs")
}

fn write_config(text: &str) -> PathBuf {
    let path = temp_audit_path().with_extension("toml");
    std::fs::write(&path, text).expect("writes a temp config");
    path
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_shipped_gateway_toml_is_valid() {
    let output = toolgate(&["check", "--config", "gateway.toml"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(String::from_utf8_lossy(&output.stdout).contains("ok"));
}

#[test]
fn check_names_file_line_column_and_key_and_exits_2() {
    let path = write_config(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"missing\"\n\n\
         [[routes]]\npath = \"/v2\"\nupstream = \"llm\"\n[[routes.plugins]]\nname = \"tool_selection\"\n\
         [routes.plugins.settings]\njudge_timeout_ms = \"soon\"\n",
    );
    let output = check(&path);
    assert_eq!(output.status.code(), Some(2));
    let errors = stderr(&output);
    let file = path.display().to_string();
    assert!(
        errors.contains(&format!(
            "{file}:9:1: routes[0].upstream: unknown upstream 'missing'"
        )),
        "{errors}"
    );
    assert!(
        errors.contains(&format!(
            "{file}:17:1: routes[1].plugins[0].settings.judge_timeout_ms:"
        )),
        "{errors}"
    );
}

/// Issue 22 point 9: one run of `check` names every error of the file, shape errors (unknown
/// keys, wrong types) and references alike; a budget naming a tenant, a tenant naming a group
/// and a policy naming an agent that do not exist are each an error at their line and column.
#[test]
fn check_reports_every_error_of_a_file_in_one_run() {
    let text = "[server]\nlisten = \"127.0.0.1:0\"\ncolour = \"blue\"\n\n\
         [upstreams.llm]\nurl = \"http://127.0.0.1:1\"\nconnect_timeout_ms = \"soon\"\n\n\
         [tenants.acme]\napi_keys = [\"sk-acme\"]\ngroups = [\"default\", \"biling\"]\nagents = [\"acme-bot\"]\n\n\
         [mcp.agent_policies.ghost-bot]\nallowed_servers = []\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\nflavour = \"mild\"\n\
         [[routes.plugins]]\nname = \"tool_budget\"\n[routes.plugins.settings]\n\
         [[routes.plugins.settings.budgets]]\ntools = \"pay\"\nlimits = [\"1/day\"]\ntenants = [\"acme\", \"globex\",\n  \"initech\"]\n\n\
         [[routes]]\npath = \"/v2\"\nupstream = \"nowhere\"\n";
    let path = write_config(text);
    let output = check(&path);
    assert_eq!(output.status.code(), Some(2));
    let errors = stderr(&output);
    let file = path.display().to_string();
    let line_of = |needle: &str| {
        text.lines()
            .position(|line| line.contains(needle))
            .map(|index| index + 1)
            .unwrap_or_else(|| panic!("{needle} is in the text"))
    };
    for (needle, expected) in [
        ("colour", "server.colour: unknown field `colour`"),
        ("soon", "upstreams.llm.connect_timeout_ms: invalid type"),
        ("biling", "tenants.acme.groups[1]: unknown group 'biling'"),
        (
            "ghost-bot",
            "mcp.agent_policies.ghost-bot: 'ghost-bot' is neither a tenant nor an agent",
        ),
        ("flavour", "routes[0].flavour: unknown field `flavour`"),
        (
            "globex",
            "routes[0].plugins[0].settings.budgets[0].tenants[1]: unknown tenant 'globex'",
        ),
        (
            "initech",
            "routes[0].plugins[0].settings.budgets[0].tenants[2]: unknown tenant 'initech'",
        ),
        ("nowhere", "routes[1].upstream: unknown upstream 'nowhere'"),
    ] {
        let located = format!("{file}:{}:", line_of(needle));
        assert!(
            errors
                .lines()
                .any(|line| line.starts_with(&located) && line.contains(expected)),
            "expected {located} {expected} in:\n{errors}"
        );
    }
    assert_eq!(
        errors.lines().count(),
        8,
        "each once, and nothing else:\n{errors}"
    );
}

#[test]
fn check_reports_unknown_keys_wrong_types_and_unset_variables() {
    for (text, expected) in [
        (
            "[server]\nlisten = \"127.0.0.1:0\"\nlissten = 1\n",
            ":3:1: server.lissten: unknown field `lissten`",
        ),
        (
            "[server]\nlisten = 8080\n",
            ":2:10: server.listen: invalid type: integer `8080`, expected a string",
        ),
        (
            "[upstreams.a]\nurl = \"${TOOLGATE_TEST_SURELY_UNSET}\"\n",
            ":2:7: upstreams.a.url: environment variable TOOLGATE_TEST_SURELY_UNSET is not set",
        ),
        (
            "[[plugins]]\nname = \"no_such_plugin\"\n",
            ":2:1: plugins[0].name: unknown plugin 'no_such_plugin'",
        ),
        (
            "[upstreams.a]\nurl = \"ftp://x\"\n",
            ":2:1: upstreams.a.url: 'ftp://x' must be an http:// or https:// URL",
        ),
        ("[server\nlisten = 1\n", ":1:8: "),
    ] {
        let path = write_config(text);
        let output = check(&path);
        assert_eq!(output.status.code(), Some(2), "{text}");
        let errors = stderr(&output);
        assert!(
            errors.contains(expected),
            "for {text:?} expected {expected:?} in:\n{errors}"
        );
    }
}

#[test]
fn explain_prints_the_verdict_of_a_recorded_exchange() {
    let blocked = explain(
        "/v1/chat/completions",
        "fixtures/chat/schema_missing_required.request.json",
        "fixtures/chat/schema_missing_required.response.json",
    );
    let text = String::from_utf8_lossy(&blocked.stdout);
    assert_eq!(blocked.status.code(), Some(1), "{text}{}", stderr(&blocked));
    assert!(text.contains("verdict: BLOCKED"), "{text}");
    assert!(text.contains("\"keyword\": \"required\""), "{text}");
    assert!(text.contains("declared tools:"), "{text}");

    let allowed = explain(
        "/v1/chat/completions",
        "fixtures/chat/weather_allowed.request.json",
        "fixtures/streams/text_then_tool_call.sse",
    );
    let text = String::from_utf8_lossy(&allowed.stdout);
    assert!(allowed.status.success(), "{text}");
    assert!(
        text.contains("tool call: choice 0 get_weather"),
        "a recorded stream is reassembled: {text}"
    );
    assert!(text.contains("verdict: ALLOWED"), "{text}");

    // A Gemini stream on the shipped config's Gemini route: the path names the format.
    let gemini = explain(
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
        "fixtures/gemini/schema_violation.request.json",
        "fixtures/gemini/schema_violation.sse",
    );
    let text = String::from_utf8_lossy(&gemini.stdout);
    assert_eq!(gemini.status.code(), Some(1), "{text}{}", stderr(&gemini));
    assert!(text.contains("tool call: choice 0 send_email"), "{text}");
    assert!(
        text.contains("\"status\": \"PERMISSION_DENIED\""),
        "Google's error shape: {text}"
    );

    let unguarded = explain(
        "/v1/models",
        "fixtures/chat/undeclared_tool.request.json",
        "fixtures/chat/undeclared_tool.response.json",
    );
    assert!(
        unguarded.status.success(),
        "tool_selection is switched off on /v1/models in gateway.toml"
    );
}

#[test]
fn demo_shows_allowed_and_blocked_exchanges() {
    let output = toolgate(&["demo"]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", stderr(&output));
    assert!(
        text.contains("weather_allowed") && text.contains("→ 200 OK"),
        "{text}"
    );
    assert!(text.contains("→ 403 Forbidden"), "{text}");
    assert!(
        text.contains("'delete_user' is not a declared tool"),
        "{text}"
    );
    assert!(text.contains("the stream ends without [DONE]"), "{text}");
}

#[test]
fn serve_runs_the_shipped_config_and_stops_on_sigterm() {
    let port = free_loopback_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--config", "gateway.toml"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("TOOLGATE_LISTEN", format!("127.0.0.1:{port}"))
        .env("TOOLGATE_ADMIN", "off")
        .env("TOOLGATE_AUDIT", "off")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starts");
    // Serving: a request gets an HTTP answer (whatever the shipped upstream does with it).
    let mut served = false;
    for _ in 0..200 {
        if let Ok(mut socket) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            use std::io::{Read, Write};
            let _ =
                socket.write_all(b"GET /nowhere HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
            let mut answer = String::new();
            let _ = socket.read_to_string(&mut answer);
            if answer.starts_with("HTTP/1.1 404") {
                served = true;
                break;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(served, "the shipped config serves");
    assert!(child.try_wait().expect("status").is_none(), "still serving");
    let pid = child.id().to_string();
    assert!(sigterm(&pid).success());
    let status = child.wait().expect("exits");
    assert!(
        status.success(),
        "a SIGTERM is a clean shutdown: {status:?}"
    );
}

#[tokio::test]
async fn secrets_never_reach_the_logs_or_the_audit_lines_even_at_trace_level() {
    use crate::common::{Reply, ScriptedUpstream};

    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::chat_calls(&[("call_1", "undeclared", "{}")]));
    let port = free_loopback_port();
    let config = write_config(&format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\nadmin_listen = \"off\"\n\n\
         [upstreams.llm]\nurl = \"{}\"\napi_key = \"sk-upstream-SECRET-1234\"\n\n\
         [upstreams.down]\nurl = \"http://127.0.0.1:1\"\napi_key = \"sk-upstream-SECRET-1234\"\n\n\
         [[plugins]]\nname = \"tool_selection\"\n[plugins.settings]\nopenai_api_key = \"sk-judge-SECRET-5678\"\n\
         base_url = \"http://127.0.0.1:1/v1\"\n\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\n\
         [[routes]]\npath = \"/v1/down\"\nupstream = \"down\"\n",
        upstream.url()
    ));
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--config", config.to_str().expect("utf-8 path")])
        .env("TOOLGATE_LOG", "trace")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starts");
    let client = crate::common::http();
    let request = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "declared", "parameters": {"type": "object"}}}]});
    let mut answered = 0;
    for _ in 0..100 {
        let sent = client
            .post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
            .header("authorization", "Bearer sk-client-SECRET-9999")
            .json(&request)
            .send()
            .await;
        if sent.is_ok() {
            answered += 1;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(answered, 1, "the gateway came up");
    let down = client
        .post(format!("http://127.0.0.1:{port}/v1/down"))
        .header("authorization", "Bearer sk-client-SECRET-9999")
        .body("{}")
        .send()
        .await
        .expect("answers");
    assert_eq!(down.status(), 502);
    let forwarded = upstream.last_request().expect("forwarded");
    assert_eq!(
        forwarded.header("authorization"),
        Some("Bearer sk-upstream-SECRET-1234")
    );

    let pid = child.id().expect("running").to_string();
    sigterm(&pid);
    let output = child.wait_with_output().await.expect("exits");
    let everything = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        everything.contains("tool_call_blocked") || everything.contains("blocked"),
        "the audit line was written"
    );
    assert!(
        everything.contains("TRACE"),
        "the run logged at trace level, so it proves what it claims"
    );
    for secret in ["SECRET-1234", "SECRET-5678", "SECRET-9999"] {
        assert!(
            !everything.contains(secret),
            "{secret} leaked into the output:\n{everything}"
        );
    }
}

#[test]
fn check_refuses_two_catalog_entries_for_one_tool_and_an_unknown_unreadable_answers() {
    let path = write_config(
        "[server]\nlisten = \"127.0.0.1:0\"\n\n[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
         [tools.Graph-Update]\ndescription = \"one\"\n[tools.\"graph-update \"]\ndescription = \"two\"\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\nunreadable_answers = \"maybe\"\n",
    );
    let output = check(&path);
    assert_eq!(output.status.code(), Some(2));
    let errors = stderr(&output);
    assert!(
        errors.contains("are the same tool") && errors.contains("graph-update"),
        "no plugin runs, and the catalog still refuses a collision: {errors}"
    );
    assert!(
        errors.contains("routes[0].unreadable_answers: unknown unreadable_answers 'maybe'"),
        "{errors}"
    );
}

/// The gateway.toml that deploy/toolgate.yaml's ConfigMap mounts passes `toolgate check` with
/// the environment the pod gives it (the Secret's values).
#[test]
fn the_deploy_configmap_passes_toolgate_check() {
    let manifest = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/toolgate.yaml"),
    )
    .expect("deploy/toolgate.yaml is readable");
    let config = configmap_file(&manifest, "gateway.toml");
    assert!(
        config.contains("[[routes]]"),
        "the ConfigMap holds a gateway.toml:\n{config}"
    );
    let path = write_config(&config);
    let output = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["check", "--config", path.to_str().expect("utf-8 path")])
        .env("OPENAI_API_KEY", "sk-from-the-secret")
        .env("REDIS_PASSWORD", "from-the-secret")
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{}", stderr(&output));
}

/// The literal block `  NAME: |` of a manifest's ConfigMap `data`, without its indentation.
fn configmap_file(manifest: &str, name: &str) -> String {
    let header = format!("  {name}: |");
    let mut lines = manifest.lines().skip_while(|line| *line != header).skip(1);
    let mut file = String::new();
    for line in lines.by_ref() {
        if line.is_empty() {
            file.push('\n');
        } else if let Some(content) = line.strip_prefix("    ") {
            file.push_str(content);
            file.push('\n');
        } else {
            break;
        }
    }
    file
}

/// Every configuration the docs show loads, so the docs cannot drift from the code: each
/// ```toml block of README.md and docs/*.md. A Cargo manifest is only parsed as TOML. A block
/// with `[[routes]]` is a whole file and loads as it is; a fragment (a plugin entry, a section) loads after a minimal file with one
/// upstream and one route, so its `[[routes.plugins]]` attach to that route. `${VAR}` without a
/// default gets one, as the reader's environment would give it.
#[test]
fn every_config_example_in_docs_loads() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/ exists") {
        let path = entry.expect("a readable entry").path();
        if path.extension().is_some_and(|extension| extension == "md") {
            pages.push(path);
        }
    }
    let runtime = toolgate::Runtime::new();
    let (mut whole, mut fragments, mut manifests) = (0, 0, 0);
    let mut tls = None;
    for path in pages {
        let text = std::fs::read_to_string(&path).expect("readable");
        for block in text.split("```toml\n").skip(1) {
            let Some((example, _)) = block.split_once("```") else {
                continue;
            };
            let name = path.display().to_string();
            if example.contains("[package]") || example.contains("[dependencies]") {
                // A Cargo manifest (docs/writing-a-plugin.md): valid TOML is all it can be here.
                if let Err(error) = example.parse::<toml::Table>() {
                    panic!("{name}: a Cargo.toml example is not TOML: {error}\n{example}");
                }
                manifests += 1;
                continue;
            }
            let mut example = with_defaults_for_unset_variables(example);
            if let Some(ca_file) = quoted_value_of(&example, "ca_file") {
                // A CA the reader has: a real one, since the store reads it at load.
                let ca = tls.get_or_insert_with(crate::common::redis::TlsFiles::generate);
                example = example.replace(&ca_file, &format!("\"{}\"", ca.ca.display()));
            }
            if let Some(jwks_file) = quoted_value_of(&example, "jwks_file") {
                // A JWKS the reader has: the public example key, since it is read at load.
                let jwks = root.join("fixtures/jwt/example-jwks.json");
                example = example.replace(&jwks_file, &format!("\"{}\"", jwks.display()));
            }
            let config = if example.contains("[[routes]]") {
                whole += 1;
                example
            } else {
                fragments += 1;
                format!(
                    "[upstreams.docs_example]\nurl = \"http://127.0.0.1:1\"\n\n\
                     [[routes]]\npath = \"/docs-example\"\nupstream = \"docs_example\"\n\n{example}"
                )
            };
            if let Err(errors) = toolgate::Config::from_toml(&config, &name, &runtime.plugins) {
                panic!("{name}: an example does not load:\n{errors}\n{config}");
            }
        }
    }
    assert!(whole >= 4, "the docs show whole configurations ({whole})");
    assert!(fragments >= 6, "the docs show fragments ({fragments})");
    assert!(
        manifests >= 1,
        "writing-a-plugin.md shows a Cargo.toml ({manifests})"
    );
}

/// The string value of the first `key = "…"` line of a TOML text, quotes included.
fn quoted_value_of(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let value = line
            .trim_start()
            .strip_prefix(key)?
            .trim_start()
            .strip_prefix('=')?;
        let value = value.trim_start().strip_prefix('"')?;
        let (inner, _) = value.split_once('"')?;
        Some(format!("\"{inner}\""))
    })
}

/// `${VAR}` becomes `${VAR:-VAR-value}`; `${VAR:-default}` and `$$` stay.
fn with_defaults_for_unset_variables(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let Some(length) = rest[start..].find('}') else {
            break;
        };
        let inner = &rest[start + 2..start + length];
        if inner.contains(":-") {
            out.push_str(&rest[start..=start + length]);
        } else {
            out.push_str(&format!("${{{inner}:-{inner}-value}}"));
        }
        rest = &rest[start + length + 1..];
    }
    out.push_str(rest);
    out
}

#[test]
fn a_port_in_use_names_its_address_setting_and_variable() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
    let address = taken.local_addr().expect("an address").to_string();
    let output = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--config", "gateway.toml"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("TOOLGATE_CONFIG")
        .env("TOOLGATE_LISTEN", &address)
        .env("TOOLGATE_ADMIN", "127.0.0.1:0")
        .env("TOOLGATE_AUDIT", "off")
        .output()
        .expect("the binary runs");
    assert!(!output.status.success());
    let said = stderr(&output);
    for expected in [
        address.as_str(),
        "[server] listen",
        "TOOLGATE_LISTEN",
        "in use",
    ] {
        assert!(said.contains(expected), "missing {expected:?} in: {said}");
    }
}

#[test]
fn a_gateway_wide_mistake_is_said_once_whatever_the_routes() {
    let path = write_config(
        "[upstreams.u]\nurl = \"http://127.0.0.1:1\"\n\n\
         [[plugins]]\nname = \"tool_selection\"\nmax_retries = 3\n\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"u\"\n\n\
         [[routes]]\npath = \"/v1/responses\"\nupstream = \"u\"\n",
    );
    let output = check(&path);
    assert_eq!(output.status.code(), Some(2));
    let said = stderr(&output);
    assert_eq!(said.matches("plugins[0].max_retries").count(), 1, "{said}");
}

#[tokio::test]
async fn judge_eval_scores_the_configured_judge_on_the_shipped_set() {
    use crate::common::{Reply, ScriptedUpstream};
    let judge = ScriptedUpstream::start().await;
    let config = write_config(&format!(
        "[upstreams.u]\nurl = \"http://127.0.0.1:1\"\n\n\
         [[plugins]]\nname = \"tool_selection\"\n[plugins.settings]\n\
         openai_api_key = \"sk-judge\"\nmodel = \"judge-model\"\nbase_url = \"{}/v1\"\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"u\"\n",
        judge.url()
    ));
    let run = |config: PathBuf| async move {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["judge-eval", "--config", config.to_str().expect("utf-8")])
            .env_remove("TOOLGATE_CONFIG")
            .output()
            .await
            .expect("the binary runs")
    };
    // A judge that allows everything: right on the 20 calls to allow, wrong on the 26 to deny.
    judge.set_default(Reply::judge("allow", "fine"));
    let output = run(config.clone()).await;
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{printed}{}", stderr(&output));
    for expected in [
        "cases: 46",
        "accuracy: 43.5% (20 of 46)",
        "false allows: 26",
        "false denies: 0",
        "unparsable or missing verdicts: 0",
        "latency: p50",
    ] {
        assert!(
            printed.contains(expected),
            "missing {expected:?}:\n{printed}"
        );
    }
    assert_eq!(judge.request_count(), 46, "one question a case");
    let asked = judge.last_request().expect("asked").json();
    assert_eq!(asked["model"], "judge-model");
    assert_eq!(asked["response_format"]["type"], "json_schema");

    // A judge whose answers are no verdicts: every case says so.
    judge.set_default(Reply::json(
        200,
        crate::common::upstream::chat_completion(&[], Some("I think it is fine")),
    ));
    let output = run(config).await;
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        printed.contains("unparsable or missing verdicts: 46"),
        "{printed}"
    );
    assert!(printed.contains("no verdict: case 1:"), "{printed}");
}

#[test]
fn explain_says_when_an_answer_is_a_discovery_round() {
    let config = write_config(
        "[upstreams.llm]\nurl = \"http://127.0.0.1:9\"\n\n\
         [[plugins]]\nname = \"tool_selection\"\n\n\
         [[plugins]]\nname = \"tool_disclosure\"\nsettings = { min_tools = 2 }\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n",
    );
    let request = serde_json::json!({"model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "a", "parameters": {}}},
                  {"type": "function", "function": {"name": "b", "parameters": {}}}]});
    let answer = serde_json::json!({"id": "c", "object": "chat.completion", "created": 1,
        "model": "m", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
        "type": "function", "function": {"name": "load_tool", "arguments": "{\"tool_name\":\"a\"}"}}]}}]});
    let request_path = temp_audit_path().with_extension("request.json");
    let answer_path = temp_audit_path().with_extension("answer.json");
    std::fs::write(&request_path, request.to_string()).expect("request written");
    std::fs::write(&answer_path, answer.to_string()).expect("answer written");
    let path = |path: &Path| path.to_str().expect("utf-8 path").to_owned();
    let output = toolgate(&[
        "explain",
        "--config",
        &path(&config),
        "--route",
        "/v1/chat/completions",
        "--request",
        &path(&request_path),
        "--response",
        &path(&answer_path),
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}{}", stderr(&output));
    assert!(
        text.contains("disclosure: the model is shown an index and 3 definitions"),
        "{text}"
    );
    assert!(text.contains("verdict: DISCOVERY ROUND"), "{text}");
}

/// `explain` tells what `serve` does with a block: on a `message` route the client's 200 and its
/// answer, on a `retry` route the feedback the model is asked again with, not the 403.
#[test]
fn explain_follows_the_routes_on_block() {
    let config = write_config(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\n\
         [upstreams.llm]\nurl = \"http://127.0.0.1:9\"\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_selection\"\non_block = \"message\"\n\
         [[routes]]\npath = \"/retry/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_selection\"\non_block = \"retry\"\n",
    );
    let run = |route: &str| {
        let output = toolgate(&[
            "explain",
            "--config",
            &config.display().to_string(),
            "--route",
            route,
            "--request",
            "fixtures/chat/undeclared_tool.request.json",
            "--response",
            "fixtures/chat/undeclared_tool.response.json",
        ]);
        assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let message = run("/v1/chat/completions");
    assert!(message.contains("the client receives 200 OK"), "{message}");
    assert!(
        message.contains("\"finish_reason\":\"stop\""),
        "the message answer: {message}"
    );
    assert!(!message.contains("403"), "{message}");
    let retry = run("/retry/v1/chat/completions");
    assert!(
        retry.contains("the model is asked again (up to 2 more times)"),
        "{retry}"
    );
    assert!(
        retry.contains("- delete_user: Error: toolgate blocked this call"),
        "{retry}"
    );
    assert!(!retry.contains("403"), "{retry}");
}
