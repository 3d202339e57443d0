//! What an operator reads: a 404 (no route) and a 401 (no valid tenant key) logged at WARN with
//! the path and never the key or the query; logs without colour codes when stderr is not a
//! terminal; `toolgate routes` printing the route table with each route's plugins.

use std::process::Stdio;

use crate::common::{free_loopback_port, temp_audit_path};

fn write_config(text: &str) -> std::path::PathBuf {
    let path = temp_audit_path().with_extension("toml");
    std::fs::write(&path, text).expect("writes a temp config");
    path
}

#[tokio::test]
async fn a_404_and_a_401_are_warnings_with_the_path_and_never_the_key() {
    let port = free_loopback_port();
    let config = write_config(&format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\nadmin_listen = \"off\"\n\n\
         [audit]\noutput = \"off\"\n\n\
         [upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
         [tenants.acme]\napi_keys = [\"tenant-key-SECRET-42\"]\n\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n"
    ));
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--config", config.to_str().expect("utf-8 path")])
        .env_remove("TOOLGATE_LOG")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starts");
    let client = crate::common::http();
    let base = format!("http://127.0.0.1:{port}");
    let mut not_found = None;
    for _ in 0..100 {
        if let Ok(answer) = client
            .get(format!("{base}/nowhere/models?token=query-SECRET-66"))
            .send()
            .await
        {
            not_found = Some(answer.status());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(not_found.map(|status| status.as_u16()), Some(404));
    let unauthorized = client
        .post(format!("{base}/v1/chat/completions?key=query-SECRET-55"))
        .header("authorization", "Bearer wrong-key-SECRET-77")
        .body("{}")
        .send()
        .await
        .expect("answers");
    assert_eq!(unauthorized.status(), 401);

    let pid = child.id().expect("running").to_string();
    let stopped = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(stopped.success());
    let output = child.wait_with_output().await.expect("exits");
    let log = String::from_utf8_lossy(&output.stderr);

    let line_with = |needle: &str| {
        log.lines()
            .find(|line| line.contains(needle))
            .unwrap_or_else(|| panic!("no log line with {needle:?}:\n{log}"))
            .to_owned()
    };
    let not_found_line = line_with("404: no route");
    assert!(not_found_line.contains(" WARN "), "{not_found_line}");
    assert!(
        not_found_line.contains("path=/nowhere/models"),
        "{not_found_line}"
    );
    let unauthorized_line = line_with("401: no valid tenant key");
    assert!(unauthorized_line.contains(" WARN "), "{unauthorized_line}");
    assert!(
        unauthorized_line.contains("path=/v1/chat/completions")
            && unauthorized_line.contains("invalid_api_key"),
        "{unauthorized_line}"
    );
    for secret in ["SECRET-42", "SECRET-55", "SECRET-66", "SECRET-77"] {
        assert!(!log.contains(secret), "{secret} reached the log:\n{log}");
    }
    assert!(
        !log.contains('\u{1b}'),
        "stderr is a pipe, so no colour codes:\n{log}"
    );
}

#[test]
fn routes_prints_the_route_table_with_each_routes_plugins() {
    let config = write_config(
        "[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
         [[plugins]]\nname = \"tool_selection\"\n\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"call_limit\"\nmode = \"observe\"\n\
         [routes.plugins.settings]\nmax_calls = 2\n\n\
         [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_selection\"\nenabled = false\n",
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["routes", "--config", config.to_str().expect("utf-8 path")])
        .output()
        .expect("the binary runs");
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{printed}");
    let line_of = |path: &str| {
        printed
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{path} ")))
            .unwrap_or_else(|| panic!("no line for {path}:\n{printed}"))
            .to_owned()
    };
    let chat = line_of("/v1/chat/completions");
    assert!(
        chat.contains("upstream=llm")
            && chat.contains("call_limit (observe), tool_selection (enforce)"),
        "{chat}"
    );
    assert!(line_of("/v1").contains("plugins=none"), "{printed}");
    assert!(
        printed.contains("warning: generation endpoint /v1/responses is unguarded"),
        "a catch-all without plugins is named:\n{printed}"
    );
}

#[test]
fn routes_on_a_bad_config_exits_2_with_the_error() {
    let config = write_config("[[routes]]\npath = \"/v1\"\nupstream = \"missing\"\n");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["routes", "--config", config.to_str().expect("utf-8 path")])
        .output()
        .expect("the binary runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("missing"));
}
