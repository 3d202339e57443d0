//! MCP configuration as an operator writes it: every mistake in `[mcp_servers]`, the agent
//! policies and MCP routes is located and reported together, and the commented example in the
//! shipped gateway.toml loads once uncommented.

use toolgate::{PluginRegistry, Runtime};

use crate::common::answers::{assert_contains_all, config_errors};

#[test]
fn mcp_config_mistakes_are_located_and_all_reported() {
    let plugins = PluginRegistry::empty();
    let text = "[tenants.dev]\napi_keys = [\"k\"]\n\n\
                [mcp_servers.both]\ncommand = \"node\"\nurl = \"http://127.0.0.1:1/mcp\"\n\n\
                [mcp_servers.neither]\nexposed_tools = [\"\"]\n\n\
                [mcp_servers.\"bad__name\"]\ncommand = \"x\"\nheaders = { a = \"b\" }\n\n\
                [mcp_servers.web]\nurl = \"ftp://example.com\"\n\n\
                [mcp_servers.ok]\ncommand = \"x\"\ncall_timeout_ms = 0\ncolour = \"red\"\n";
    // An unknown key stops the parse first, with its location.
    let errors = config_errors(text, "m.toml", &plugins);
    assert!(
        errors.contains("m.toml:21:1: mcp_servers.ok.colour"),
        "{errors}"
    );

    let text = "[tenants.dev]\napi_keys = [\"k\"]\nagents = [\"reader\"]\n\n\
                [mcp_servers.both]\ncommand = \"node\"\nurl = \"http://127.0.0.1:1/mcp\"\n\n\
                [mcp_servers.neither]\nexposed_tools = [\"\"]\n\n\
                [mcp_servers.\"bad__name\"]\ncommand = \"x\"\nheaders = { a = \"b\" }\n\n\
                [mcp_servers.web]\nurl = \"ftp://example.com\"\n\n\
                [mcp_servers.ok]\ncommand = \"x\"\ncall_timeout_ms = 0\n\n\
                [mcp.agent_policies.stranger]\nallowed_servers = [\"ok\", \"nowhere\"]\n\n\
                [mcp.agent_policies.reader]\nallowed_servers = [\"ok\"]\ntool_overrides = { web = [\"x\"] }\nrequire_confirmation = { nowhere = [\"x\"], ok = [\"\"] }\n\n\
                [[routes]]\npath = \"/mcp\"\nkind = \"mcp\"\nupstream = \"llm\"\nunreadable_answers = \"pass\"\n\n\
                [[routes]]\npath = \"/other\"\nkind = \"tools\"\n";
    assert_contains_all(
        &config_errors(text, "m.toml", &plugins),
        [
            "m.toml:7:1: mcp_servers.both.url: set either command",
            "mcp_servers.neither: an MCP server needs command",
            "mcp_servers.neither.exposed_tools[0]: a tool name must not be empty",
            "mcp_servers.bad__name: a server name must not contain '__'",
            "mcp_servers.bad__name.headers: headers are for url servers",
            "mcp_servers.web.url: 'ftp://example.com' is not an http(s) URL",
            "mcp_servers.ok.call_timeout_ms: must be greater than 0",
            "mcp.agent_policies.stranger: 'stranger' is neither a tenant nor an agent",
            "mcp.agent_policies.stranger.allowed_servers[1]: unknown MCP server 'nowhere'",
            "mcp.agent_policies.reader.tool_overrides.web: 'web' is not in this policy's allowed_servers",
            "mcp.agent_policies.reader.require_confirmation.nowhere: unknown MCP server 'nowhere'",
            "mcp.agent_policies.reader.require_confirmation.ok[0]: a tool name must not be empty",
            "routes[0].upstream: an MCP route has no upstream",
            "routes[0].unreadable_answers: an MCP route has no unreadable_answers",
            "routes[1].kind: unknown kind 'tools' (one of: llm, mcp)",
        ],
    );
}

#[test]
fn the_commented_mcp_example_in_gateway_toml_loads_once_uncommented() {
    let shipped = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.toml"))
        .expect("gateway.toml");
    let (head, example) = shipped
        .split_once("# MCP proxy (docs/mcp.md)")
        .expect("the MCP example is in gateway.toml");
    let uncommented: Vec<&str> = example
        .lines()
        .skip_while(|line| !line.starts_with("# [[routes]]"))
        .take_while(|line| line.starts_with('#'))
        .map(|line| line.strip_prefix("# ").unwrap_or(""))
        .collect();
    let text = format!("{head}\n{}\n", uncommented.join("\n"))
        // Secrets stay `${VAR}` without a default in the example, so a missing one is an error.
        .replace("${CLAUDE_DEV_KEY}", "sk-example")
        .replace("${GITHUB_TOKEN}", "ghp-example");
    assert!(text.contains("\nkind = \"mcp\""), "{text}");
    let config = match toolgate::Config::from_toml(&text, "gateway.toml", &Runtime::new().plugins) {
        Ok(config) => config,
        Err(errors) => panic!("the uncommented MCP example does not load:\n{errors}"),
    };
    assert_eq!(config.mcp.servers.len(), 2);
    assert_eq!(config.mcp.policy.agents.len(), 2);
}

#[test]
fn on_block_on_an_mcp_route_is_refused_where_the_route_sets_it() {
    let plugins = PluginRegistry::builtin(&mut Default::default());
    let base = "[mcp_servers.ok]\ncommand = \"x\"\n\n\
                [upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
                [[plugins]]\nname = \"tool_selection\"\non_block = \"retry\"\n\n\
                [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\n\
                [[routes]]\npath = \"/mcp\"\nkind = \"mcp\"\n";
    // Gateway-wide, it is for the LLM routes: the MCP route loads and answers errors.
    if let Err(errors) = toolgate::Config::from_toml(base, "m.toml", &plugins) {
        panic!("a gateway-wide on_block does not stop an MCP route: {errors}");
    }
    let on_the_route =
        format!("{base}[[routes.plugins]]\nname = \"tool_selection\"\non_block = \"message\"\n");
    let errors = config_errors(&on_the_route, "m.toml", &plugins);
    assert!(
        errors.contains(
            "m.toml:20:1: routes[1].plugins[0].on_block: on_block has no effect on an MCP route"
        ),
        "{errors}"
    );
}

#[test]
fn hold_text_on_an_mcp_route_is_refused_at_its_line() {
    let plugins = PluginRegistry::builtin(&mut Default::default());
    let base = "[mcp_servers.ok]\ncommand = \"x\"\n\n\
                [upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
                [[plugins]]\nname = \"tool_selection\"\non_block = \"retry\"\nhold_text = true\n\n\
                [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\n\
                [[routes]]\npath = \"/mcp\"\nkind = \"mcp\"\n";
    if let Err(errors) = toolgate::Config::from_toml(base, "m.toml", &plugins) {
        panic!("a gateway-wide hold_text does not stop an MCP route: {errors}");
    }
    let on_the_route =
        format!("{base}[[routes.plugins]]\nname = \"tool_selection\"\nhold_text = true\n");
    let errors = config_errors(&on_the_route, "m.toml", &plugins);
    assert!(
        errors.contains(
            "m.toml:21:1: routes[1].plugins[0].hold_text: hold_text has no effect on an MCP route"
        ),
        "{errors}"
    );
}
