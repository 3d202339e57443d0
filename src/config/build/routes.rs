//! `[[routes]]`: each route's path, upstream or MCP kind, format, auth, reading of answers, and
//! its chain.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use toolgate_plugin::{BuildContext, WireFormat};

use super::super::source::{ConfigError, KeyPath, Source};
use super::super::{RawConfig, RawRoute};
use super::PluginRegistry;
use super::chain::build_chain;
use super::server::keyword;
use crate::router::{Route, RouteFormat, UnguardedCalls, UnreadableAnswers};
use crate::tenants::{RouteAuth, TenantDirectory};
use crate::upstream::Upstream;

/// Every route that can be built, in the order written.
pub(super) fn build_routes(
    raw: &RawConfig,
    source: &Source,
    plugins: &PluginRegistry,
    upstreams: &BTreeMap<String, Arc<Upstream>>,
    tenants: &TenantDirectory,
    context: &BuildContext,
    errors: &mut Vec<ConfigError>,
) -> Vec<Route> {
    let mut routes = Vec::new();
    let mut seen_paths = HashSet::new();
    for (index, route) in raw.routes.iter().enumerate() {
        let route_path = KeyPath::default().key("routes").index(index);
        if !route.path.starts_with('/') {
            errors.push(source.error_at_key(
                &route_path.clone().key("path"),
                "a route path must start with '/'",
            ));
        } else if let Some(problem) = non_canonical_route_path(&route.path) {
            errors.push(source.error_at_key(&route_path.clone().key("path"), problem));
        } else if !seen_paths.insert(route.path.to_ascii_lowercase()) {
            errors.push(source.error_at_key(
                &route_path.clone().key("path"),
                format!("route '{}' is defined twice", route.path),
            ));
        }
        let tables = Tables {
            raw,
            plugins,
            upstreams,
            tenants,
            context,
        };
        if let Some(built) = build_route(route, &route_path, &tables, source, errors) {
            routes.push(built);
        }
    }
    routes
}

/// What a route refers to, built before the routes.
struct Tables<'a> {
    raw: &'a RawConfig,
    plugins: &'a PluginRegistry,
    upstreams: &'a BTreeMap<String, Arc<Upstream>>,
    tenants: &'a TenantDirectory,
    context: &'a BuildContext,
}

/// One route: its kind, upstream, format, auth, reading of answers and chain.
fn build_route(
    route: &RawRoute,
    route_path: &KeyPath,
    tables: &Tables<'_>,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> Option<Route> {
    let Tables {
        raw,
        plugins,
        upstreams,
        tenants,
        context,
    } = *tables;
    let is_mcp = keyword(
        route.kind.as_deref(),
        (route_path, "kind"),
        &[("llm", false), ("mcp", true)],
        false,
        source,
        errors,
    );
    let upstream = route_upstream(route, is_mcp, route_path, raw, upstreams, source, errors);
    let format = route_format(route, is_mcp, route_path, source, errors);
    let auth = match route.auth.as_deref() {
        None if tenants.is_empty() => RouteAuth::None,
        word => keyword(
            word,
            (route_path, "auth"),
            &[("tenant", RouteAuth::Tenant), ("none", RouteAuth::None)],
            RouteAuth::Tenant,
            source,
            errors,
        ),
    };
    let unreadable = keyword(
        route.unreadable_answers.as_deref(),
        (route_path, "unreadable_answers"),
        &[
            ("block", UnreadableAnswers::Block),
            ("pass", UnreadableAnswers::Pass),
        ],
        UnreadableAnswers::Block,
        source,
        errors,
    );
    let unguarded_calls = keyword(
        route.unguarded_calls.as_deref(),
        (route_path, "unguarded_calls"),
        &[
            ("refuse", UnguardedCalls::Refuse),
            ("log", UnguardedCalls::Log),
            ("pass", UnguardedCalls::Pass),
        ],
        UnguardedCalls::Refuse,
        source,
        errors,
    );
    if auth == RouteAuth::Tenant && tenants.is_empty() {
        errors.push(source.error_at_key(
            &route_path.clone().key("auth"),
            "auth = \"tenant\" needs at least one [tenants.NAME] with a key",
        ));
    }
    let mut route_context = context.clone();
    route_context.route = route.path.clone();
    route_context.mcp_route = is_mcp;
    let chain = build_chain(
        &raw.plugins,
        &route.plugins,
        route_path,
        source,
        plugins,
        &route_context,
        errors,
    );
    let built = match upstream {
        Some(upstream) => Some(Route::new(route.path.clone(), upstream, chain, format)),
        None if is_mcp => Some(Route::mcp(route.path.clone(), chain)),
        None => None,
    };
    let mut built = built?;
    built.auth = auth;
    built.unreadable = unreadable;
    built.unguarded_calls = unguarded_calls;
    Some(built)
}

/// The upstream an LLM route forwards to (an MCP route has none).
fn route_upstream(
    route: &RawRoute,
    is_mcp: bool,
    route_path: &KeyPath,
    raw: &RawConfig,
    upstreams: &BTreeMap<String, Arc<Upstream>>,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> Option<Arc<Upstream>> {
    if is_mcp {
        check_mcp_route(route, raw, route_path, source, errors);
        None
    } else {
        match &route.upstream {
            None => {
                errors.push(source.error_at_key(
                    route_path,
                    "an LLM route needs an upstream (or kind = \"mcp\")",
                ));
                None
            }
            Some(name) => {
                let upstream = upstreams.get(name).cloned();
                if upstream.is_none() && !raw.upstreams.contains_key(name) {
                    let known = raw.upstreams.keys().cloned().collect::<Vec<_>>().join(", ");
                    errors.push(source.error_at_key(
                        &route_path.clone().key("upstream"),
                        format!(
                            "unknown upstream '{name}' (defined: {})",
                            if known.is_empty() {
                                "none".into()
                            } else {
                                known
                            }
                        ),
                    ));
                }
                upstream
            }
        }
    }
}

/// The wire format a route's clients speak: fixed, or found per request.
fn route_format(
    route: &RawRoute,
    is_mcp: bool,
    route_path: &KeyPath,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> RouteFormat {
    match route.format.as_deref() {
        _ if is_mcp => RouteFormat::Auto,
        None | Some("auto") => RouteFormat::Auto,
        Some(name) => match WireFormat::from_name(name) {
            Some(format) => RouteFormat::Fixed(format),
            None => {
                let known: Vec<&str> = WireFormat::ALL.iter().map(|format| format.name()).collect();
                errors.push(source.error_at_key(
                    &route_path.clone().key("format"),
                    format!(
                        "unknown format '{name}' (one of: auto, {})",
                        known.join(", ")
                    ),
                ));
                RouteFormat::Auto
            }
        },
    }
}

/// Why a route path could never match a request: requests are routed on their canonical path
/// (decoded, no dot segments or repeated slashes), so a route must be written in that form.
fn non_canonical_route_path(path: &str) -> Option<String> {
    match crate::request_path::canonical(path) {
        Ok(canonical) if canonical == path => None,
        Ok(canonical) => Some(format!(
            "route path '{path}' is not in the form requests are routed on; write it as '{canonical}'"
        )),
        Err(refusal) => Some(format!("route path '{path}' can never match: {refusal}")),
    }
}

/// An MCP route is served by toolgate itself: it has no upstream and no LLM format, and it
/// needs backends to stand in front of.
fn check_mcp_route(
    route: &RawRoute,
    raw: &RawConfig,
    route_path: &KeyPath,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) {
    for (key, present) in [
        ("upstream", route.upstream.is_some()),
        ("format", route.format.is_some()),
    ] {
        if present {
            errors.push(source.error_at_key(
                &route_path.clone().key(key),
                format!("an MCP route has no {key}: its backends are [mcp_servers.NAME]"),
            ));
        }
    }
    // Its answers are MCP results toolgate reads itself: there is no model answer to pass.
    for (key, set) in [
        ("unreadable_answers", route.unreadable_answers.is_some()),
        ("unguarded_calls", route.unguarded_calls.is_some()),
    ] {
        if set {
            errors.push(source.error_at_key(
                &route_path.clone().key(key),
                format!("an MCP route has no {key}: toolgate reads every MCP result itself"),
            ));
        }
    }
    if raw.mcp_servers.is_empty() {
        errors.push(source.error_at_key(
            &route_path.clone().key("kind"),
            "an MCP route needs at least one [mcp_servers.NAME]",
        ));
    }
}
