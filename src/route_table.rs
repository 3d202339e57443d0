//! The route table as the start-up log shows it, and the generation endpoints it leaves
//! unguarded. A generation endpoint is where a model's tool calls come back to the client; one
//! whose route runs no plugin that reads answers hands those calls over unchecked, and nothing
//! else would say so until an incident does. So `serve` logs every route and warns about each
//! such endpoint before the first request.

use crate::config::Config;
use crate::router::{Route, RouteFormat, RouteKind, Router, UnguardedCalls};
use toolgate_plugin::WireFormat;

/// The generation endpoints every configuration is checked for, even without a route of their
/// own: a catch-all route (`/v1`, `/`) that runs no plugin serves them too. Each format's
/// adapter documents its own; `{id}` stands for a stored response and matches like any other
/// segment.
pub fn documented_generation_endpoints() -> impl Iterator<Item = &'static str> {
    WireFormat::ALL.into_iter().flat_map(|format| {
        (format.generation_endpoints().iter())
            .flat_map(|endpoint| endpoint.documented.iter().copied())
    })
}

/// Whether a request path is a generation endpoint of an API toolgate speaks (each format's
/// adapter says where its API answers generations: OpenAI chat completions, stored ones
/// included, and legacy completions; Responses creation, retrieval and cancel; Anthropic
/// Messages; Gemini's `:generateContent` and `:streamGenerateContent` verbs). The path may carry
/// a prefix before `/v1` (`/openai/v1/…`), as providers' base URLs do. Token counts and batches
/// live under a generation prefix but answer no tool calls, so they are not generations.
pub fn is_generation_path(path: &str) -> bool {
    WireFormat::is_generation_path(path)
}

/// Whether an answer to this path may be a generation, and so must be read as one: a
/// generation path, or any path that is not a known endpoint of the APIs toolgate speaks (a
/// custom or unversioned path could be served by anything). `path` may carry its query.
pub fn answers_generations(path: &str) -> bool {
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    is_generation_path(path)
        || !(path.as_bytes().split(|byte| *byte == b'/'))
            .any(|segment| segment.eq_ignore_ascii_case(b"v1"))
}

/// The route table, one line per route in the order routes are tried (longest prefix first).
pub fn table(router: &Router) -> Vec<String> {
    let width = router
        .routes()
        .map(|route| route.path.len())
        .max()
        .unwrap_or(0);
    router
        .routes()
        .map(|route| {
            let (kind, upstream) = match &route.kind {
                RouteKind::Llm(upstream) => {
                    ("llm", format!("{} ({})", upstream.name, upstream.url()))
                }
                RouteKind::Mcp => ("mcp", "-".to_owned()),
            };
            let format = match route.format {
                RouteFormat::Auto => "auto",
                RouteFormat::Fixed(format) => format.name(),
            };
            format!(
                "{:width$}  kind={kind} upstream={upstream} format={format} plugins={}",
                route.path,
                plugins(route)
            )
        })
        .collect()
}

/// `name (mode)` for each plugin of the route's chain in run order (with its `on_block` when
/// it recovers from blocks), or `none`.
fn plugins(route: &Route) -> String {
    let entries: Vec<String> = route
        .chain
        .entries()
        .iter()
        .map(|entry| {
            let mode = entry.mode.as_str();
            // `on_block` is shown where it is not the default `error`.
            match entry.on_block {
                crate::on_block::OnBlock::Error => format!("{} ({mode})", entry.name),
                crate::on_block::OnBlock::Message => {
                    format!("{} ({mode}, on_block message)", entry.name)
                }
                crate::on_block::OnBlock::Retry(limits) => format!(
                    "{} ({mode}, on_block retry, max_retries {})",
                    entry.name, limits.max_retries
                ),
            }
        })
        .collect();
    if entries.is_empty() {
        "none".to_owned()
    } else {
        entries.join(", ")
    }
}

/// One warning per generation endpoint whose route runs no plugin that reads answers: the
/// endpoints of [`documented_generation_endpoints`] and every route path that is a generation path,
/// each judged by the route that would serve it. An endpoint no route serves gets a 404 and
/// no warning; MCP routes are toolgate's own endpoint, not a generation upstream.
pub fn unguarded(router: &Router) -> Vec<String> {
    let mut endpoints: Vec<&str> = documented_generation_endpoints().collect();
    for route in router.routes() {
        if is_generation_path(&route.path) && !endpoints.contains(&&*route.path) {
            endpoints.push(&route.path);
        }
    }
    let mut warnings = Vec::new();
    for endpoint in endpoints {
        let Some(route) = router.find(endpoint) else {
            continue;
        };
        if matches!(route.kind, RouteKind::Mcp) || route.chain.body_needs().response {
            continue;
        }
        let served_by = if *route.path == *endpoint {
            format!("its route {}", route.path)
        } else {
            format!("it falls through to route {}, which", route.path)
        };
        let consequence = match route.unguarded_calls {
            UnguardedCalls::Refuse if route.chain.is_empty() => {
                "answers carrying tool calls are refused there (unguarded_calls = \"refuse\"), \
                 never checked"
            }
            _ => "the model's tool calls reach clients unchecked",
        };
        warnings.push(format!(
            "generation endpoint {endpoint} is unguarded: {served_by} runs no plugin that reads \
             answers, so {consequence}"
        ));
    }
    warnings
}

/// Logs the route table (INFO) and the unguarded generation endpoints (WARN).
pub fn log(config: &Config) {
    tracing::info!(config = %config.origin, "route table (longest prefix first):");
    for line in table(&config.router) {
        tracing::info!("  {line}");
    }
    for warning in unguarded(&config.router) {
        tracing::warn!("{warning}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PluginRegistry;
    use toolgate_plugin::prometheus_client::registry::Registry;
    use toolgate_plugin::testing::assert_lines_contain;

    fn routes_of(routes: &str) -> Router {
        let text = format!("[upstreams.u]\nurl = \"http://127.0.0.1:1\"\n\n{routes}");
        let plugins = PluginRegistry::builtin(&mut Registry::default());
        match Config::from_toml(&text, "t.toml", &plugins) {
            Ok(config) => config.router,
            Err(errors) => panic!("the test config does not load:\n{errors}\n{text}"),
        }
    }

    #[test]
    fn generation_paths_are_the_four_endpoints_and_what_lies_under_them() {
        for path in [
            "/v1/chat/completions",
            "/v1/chat/completions/chatcmpl-1",
            "/v1/responses",
            "/v1/responses/resp_1",
            "/v1/responses/resp_1/cancel",
            "/v1/messages",
            "/v1/messages/",
            "/v1/completions",
            "/openai/v1/chat/completions",
        ] {
            assert!(is_generation_path(path), "{path}");
        }
        for path in [
            "/",
            "/v1",
            "/v1/models",
            "/v1/embeddings",
            "/v1/files",
            "/v1/messages/count_tokens",
            "/v1/messages/batches/msgbatch_1/results",
            "/v1/responses/input_tokens",
            "/v1/chat",
            "/v1/chatter/completions",
            "/chat/completions",
        ] {
            assert!(!is_generation_path(path), "{path}");
        }
    }

    #[test]
    fn letters_compare_in_either_case_and_unknown_paths_may_be_generations() {
        assert!(is_generation_path("/V1/Chat/COMPLETIONS"));
        assert!(!is_generation_path("/V1/Messages/Count_Tokens"));
        for path in [
            "/proxy",
            "/chat/completions",
            "/v1/chat/completions?x=1",
            "/",
        ] {
            assert!(answers_generations(path), "{path}");
        }
        for path in [
            "/v1/files/file-1/content",
            "/v1/models",
            "/V1/audio/speech?x",
        ] {
            assert!(!answers_generations(path), "{path}");
        }
    }

    #[test]
    fn the_table_shows_path_kind_upstream_format_and_plugins_with_mode() {
        let router = routes_of(
            "[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"u\"\n\
             format = \"chat_completions\"\n\
             [[routes.plugins]]\nname = \"tool_selection\"\non_block = \"retry\"\n\
             [[routes.plugins]]\nname = \"tool_arguments\"\nmode = \"observe\"\n\n\
             [[routes]]\npath = \"/v1\"\nupstream = \"u\"\n",
        );
        let table = table(&router);
        assert_eq!(table.len(), 2, "{table:?}");
        assert!(
            table[0].starts_with(
                "/v1/chat/completions  kind=llm upstream=u (http://127.0.0.1:1) format=chat_completions plugins="
            ),
            "{table:?}"
        );
        assert!(
            table[0].contains("tool_selection (enforce, on_block retry, max_retries 2)"),
            "{table:?}"
        );
        assert!(table[0].contains("tool_arguments (observe)"), "{table:?}");
        assert!(
            table[1].starts_with("/v1 ") && table[1].ends_with("format=auto plugins=none"),
            "{table:?}"
        );
    }

    #[test]
    fn a_catch_all_without_plugins_leaves_the_uncovered_generation_endpoints_unguarded() {
        let router = routes_of(
            "[[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"u\"\n\
             [[routes.plugins]]\nname = \"tool_selection\"\n\n\
             [[routes]]\npath = \"/v1/messages\"\nupstream = \"u\"\n\n\
             [[routes]]\npath = \"/v1\"\nupstream = \"u\"\n",
        );
        let warnings = unguarded(&router);
        let named: Vec<&str> = warnings
            .iter()
            .filter_map(|warning| warning.split(' ').nth(2))
            .collect();
        assert_eq!(
            named,
            [
                "/v1/completions",
                "/v1/responses",
                "/v1/responses/{id}",
                "/v1/messages"
            ],
            "{warnings:#?}"
        );
        assert_lines_contain(
            &warnings,
            &[
                (0, "falls through to route /v1,"),
                (3, "its route /v1/messages runs no plugin"),
            ],
        );
    }

    #[test]
    fn a_generation_route_of_its_own_without_a_reader_is_named() {
        let router = routes_of(
            "[[plugins]]\nname = \"tool_selection\"\n\n\
             [[routes]]\npath = \"/openai/v1/responses\"\nupstream = \"u\"\n\
             [[routes.plugins]]\nname = \"tool_selection\"\nenabled = false\n\n\
             [[routes]]\npath = \"/v1\"\nupstream = \"u\"\n",
        );
        let warnings = unguarded(&router);
        assert_eq!(warnings.len(), 1, "{warnings:#?}");
        let named = "generation endpoint /openai/v1/responses is unguarded";
        assert_lines_contain(&warnings, &[(0, named)]);
    }

    #[test]
    fn no_warning_when_nothing_serves_a_generation_endpoint_or_an_mcp_route_does() {
        let router = routes_of(
            "[[routes]]\npath = \"/v1/models\"\nupstream = \"u\"\n\n\
             [[routes]]\npath = \"/v1\"\nkind = \"mcp\"\n\n\
             [mcp_servers.files]\ncommand = \"true\"\n",
        );
        assert!(unguarded(&router).is_empty());
        let router = routes_of("[[routes]]\npath = \"/v1/embeddings\"\nupstream = \"u\"\n");
        assert!(unguarded(&router).is_empty());
    }

    #[test]
    fn the_shipped_gateway_toml_guards_every_generation_endpoint() {
        let plugins = PluginRegistry::builtin(&mut Registry::default());
        let shipped = include_str!("../gateway.toml");
        let config = match Config::from_toml(shipped, "gateway.toml", &plugins) {
            Ok(config) => config,
            Err(errors) => panic!("gateway.toml does not load:\n{errors}"),
        };
        assert_eq!(unguarded(&config.router), Vec::<String>::new());
        let table = table(&config.router);
        for (path, plugins) in [
            ("/v1/chat/completions", "tool_selection (enforce)"),
            ("/v1/responses", "tool_selection (enforce)"),
            ("/v1/messages", "tool_selection (enforce)"),
            ("/v1/completions", "tool_selection (enforce)"),
            ("/v1/messages/count_tokens", "none"),
            ("/v1/models", "none"),
            ("/v1/embeddings", "none"),
            ("/v1", "none"),
        ] {
            let line = table
                .iter()
                .find(|line| line.split(' ').next() == Some(path))
                .unwrap_or_else(|| panic!("no row for {path} in {table:#?}"));
            assert!(line.ends_with(&format!("plugins={plugins}")), "{line}");
        }
    }
}
