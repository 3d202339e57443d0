//! Service descriptors and instances as an operator writes them: malformed ones are located
//! load errors, `toolgate check` reports each and exits 2, and the commented example in the
//! shipped gateway.toml loads once uncommented.

use crate::common;
use crate::common::answers::{assert_contains_all, config_errors};
use crate::common::services::{ARGCHECK_PARAMS, instance, route, service};
use toolgate::{Config, Runtime};

/// Loads `body` after the usual head; the errors as text.
fn load_errors(body: &str) -> String {
    let text = common::config_text("http://127.0.0.1:1", &common::temp_audit_path(), body);
    config_errors(&text, "s.toml", &Runtime::new().plugins)
}

#[test]
fn malformed_descriptors_and_instances_are_located_errors() {
    let service_block = service("argcheck", "http://127.0.0.1:8181/v", ARGCHECK_PARAMS);
    let head_lines = common::config_text("http://127.0.0.1:1", &common::temp_audit_path(), "")
        .lines()
        .count();
    let at = |line: usize| format!("s.toml:{}:", head_lines + line);

    let cases = [
        (
            instance("", "config = { deny_substrings = [] }"),
            "routes[0].plugins[0].settings: missing field `service`",
        ),
        (
            instance("", "service = \"nope\""),
            "routes[0].plugins[0].settings.service: unknown service 'nope' (defined in [services.NAME]: argcheck)",
        ),
        (
            instance("", "service = \"argcheck\"\nconfig = { remove_tools = [] }"),
            "routes[0].plugins[0].settings.config: service 'argcheck' requires config param 'deny_substrings'",
        ),
        (
            instance(
                "",
                "service = \"argcheck\"\nconfig = { deny_substrings = [], colour = 1 }",
            ),
            "routes[0].plugins[0].settings.config.colour: service 'argcheck' has no config param 'colour'",
        ),
        (
            format!(
                "{}{}",
                instance(
                    "",
                    "service = \"argcheck\"\nconfig = { deny_substrings = [] }"
                ),
                instance(
                    "",
                    "service = \"argcheck\"\nconfig = { deny_substrings = [] }"
                )
            ),
            "routes[0].plugins[1].name: plugin 'service' appears twice in this list: give each entry a distinct `id`",
        ),
    ];
    for (plugins, expected) in cases {
        let errors = load_errors(&format!("{service_block}{}", route("/v1", &plugins)));
        assert!(errors.contains(expected), "{expected}\nin\n{errors}");
        assert!(errors.starts_with("s.toml:"), "located: {errors}");
    }

    let errors = load_errors(
        "[services.bad]\nurl = \"localhost:8181/validate\"\ntimeout_ms = 0\n\
         config-params = [{ name = \"a\" }, { name = \"a\" }]\n\
         headers = { \"bad header\" = \"x\" }\n",
    );
    assert_contains_all(
        &errors,
        [
            format!(
                "{}1: services.bad.url: 'localhost:8181/validate' is not an absolute http(s) URL",
                at(2)
            ),
            format!(
                "{}1: services.bad.timeout_ms: must be greater than 0",
                at(3)
            ),
            "services.bad.config-params[1]: config param 'a' is declared twice".to_owned(),
            "services.bad.headers.bad header: 'bad header' is not a valid header name".to_owned(),
        ],
    );
    let errors = load_errors("[services.x]\nurl = \"http://h\"\ncolour = 1\n");
    assert!(errors.contains("unknown field `colour`"), "{errors}");
}

#[test]
fn toolgate_check_reports_each_malformed_descriptor_and_exits_2() {
    let path = common::temp_audit_path().with_extension("toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\n\n[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
             {}{}",
            service("argcheck", "ftp://x", ARGCHECK_PARAMS),
            route(
                "/v1",
                &format!(
                    "{}{}",
                    instance("id = \"a\"", "service = \"nope\""),
                    instance("id = \"b\"", "service = \"argcheck\"")
                )
            ),
        ),
    )
    .expect("writes a temp config");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["check", "--config", path.to_str().expect("utf-8 path")])
        .output()
        .expect("the binary runs");
    let _ = std::fs::remove_file(&path);
    assert_eq!(output.status.code(), Some(2));
    let errors = String::from_utf8_lossy(&output.stderr);
    let file = path.display().to_string();
    assert_contains_all(
        &errors,
        [
            format!("{file}:8:1: services.argcheck.url: 'ftp://x' is not an absolute http(s) URL"),
            format!("{file}:17:1: routes[0].plugins[0].settings.service: unknown service 'nope'"),
            format!(
                "{file}:21:17: routes[0].plugins[1].settings.config: service 'argcheck' requires config param 'deny_substrings'"
            ),
        ],
    );
}

#[test]
fn the_commented_service_example_in_gateway_toml_loads_once_uncommented() {
    let shipped = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.toml"))
        .expect("gateway.toml");
    let mut uncommenting = false;
    let mut lines = Vec::new();
    for line in shipped.lines() {
        if line.starts_with("# [services.argcheck]")
            || line.starts_with("# [[routes.plugins]]") && line.contains("validator service")
        {
            uncommenting = true;
        }
        if uncommenting && !line.starts_with("# ") {
            uncommenting = false;
        }
        lines.push(if uncommenting { &line[2..] } else { line });
    }
    let text = lines.join("\n");
    assert!(
        text.contains("\n[services.argcheck]\n"),
        "the example is in gateway.toml"
    );
    assert!(text.contains("\nname = \"service\"\n"), "with its instance");
    if let Err(errors) = Config::from_toml(&text, "gateway.toml", &Runtime::new().plugins) {
        panic!("the uncommented example does not load:\n{errors}");
    }
}
