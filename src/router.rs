//! Routes: a path prefix, what serves it (an upstream, or the MCP endpoint), and its plugin
//! chain. The longest
//! matching prefix wins; prefixes match whole path segments, so `/v1/chat` does not catch
//! `/v1/chatter`. Paths come canonical ([`crate::request_path`]) and letters compare in either
//! case, as some upstreams route so.

use std::sync::Arc;

use toolgate_plugin::WireFormat;

use crate::pipeline::Chain;
use crate::telemetry::RouteMetrics;
use crate::tenants::RouteAuth;
use crate::upstream::Upstream;

pub struct Route {
    /// Shared, not copied, with the metrics each of its exchanges records.
    pub path: Arc<str>,
    pub kind: RouteKind,
    pub chain: Chain,
    /// How bodies on this route are read.
    pub format: RouteFormat,
    /// Whether a tenant's key is required.
    pub auth: RouteAuth,
    /// What a guarded answer that cannot be read unambiguously gets.
    pub unreadable: UnreadableAnswers,
    /// What an answer with tool calls gets when the route runs no plugin.
    pub unguarded_calls: UnguardedCalls,
    /// Its handles on the request metrics.
    pub metrics: RouteMetrics,
}

/// What becomes of a guarded 2xx answer that toolgate cannot read unambiguously
/// (`unreadable_answers` on a route).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnreadableAnswers {
    /// Refused when a client could read a tool call from it (the default: fail closed).
    #[default]
    Block,
    /// The lenient opt-out: read in the exchange's format only, and what cannot be read goes to
    /// the plugins as unparsable (passed unless `tool_selection` is `strict`).
    Pass,
}

/// What becomes of an answer that carries tool calls on a pass-through route, one that runs no
/// plugin (`unguarded_calls` on a route). No route the configuration calls unguarded should deliver
/// calls: an upstream that serves a generation where toolgate saw a pass-through endpoint (a
/// path it reads otherwise, an endpoint under another name) would hand them over unchecked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnguardedCalls {
    /// Refused with a 403 (the default: fail closed).
    #[default]
    Refuse,
    /// Delivered, with a warning and the calls in the audit line.
    Log,
    /// Delivered unread, the answer streamed through as it comes.
    Pass,
}

/// What serves a route.
pub enum RouteKind {
    /// A reverse proxy to an OpenAI-format upstream.
    Llm(Arc<Upstream>),
    /// toolgate's MCP endpoint, in front of `[mcp_servers]`.
    Mcp,
}

/// A route's wire format: fixed by configuration, or found per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteFormat {
    /// By the request path (`…/chat/completions`, `…/responses`, `…/messages`), then by the
    /// body's shape, else chat completions.
    Auto,
    Fixed(WireFormat),
}

impl RouteFormat {
    /// The format of one request; `body` is `None` when it was not read.
    pub fn resolve(self, path: &str, body: Option<&[u8]>) -> WireFormat {
        match self {
            // A path that names its format wins over the setting: a client of that API reads the
            // answer in it, so the guard must read it so too.
            RouteFormat::Fixed(format) => WireFormat::from_path(path).unwrap_or(format),
            RouteFormat::Auto => WireFormat::from_path(path)
                .or_else(|| body.and_then(WireFormat::from_body))
                .unwrap_or(WireFormat::ChatCompletions),
        }
    }
}

impl Route {
    pub fn new(path: String, upstream: Arc<Upstream>, chain: Chain, format: RouteFormat) -> Self {
        Route {
            path: path.into(),
            kind: RouteKind::Llm(upstream),
            chain,
            format,
            auth: RouteAuth::None,
            unreadable: UnreadableAnswers::Block,
            unguarded_calls: UnguardedCalls::Refuse,
            metrics: RouteMetrics::default(),
        }
    }

    /// An MCP route: its exchanges are MCP messages, read by the MCP endpoint.
    pub fn mcp(path: String, chain: Chain) -> Self {
        Route {
            path: path.into(),
            kind: RouteKind::Mcp,
            chain,
            format: RouteFormat::Auto,
            auth: RouteAuth::None,
            unreadable: UnreadableAnswers::Block,
            unguarded_calls: UnguardedCalls::Refuse,
            metrics: RouteMetrics::default(),
        }
    }

    /// The upstream of an LLM route.
    pub fn upstream(&self) -> Option<&Arc<Upstream>> {
        match &self.kind {
            RouteKind::Llm(upstream) => Some(upstream),
            RouteKind::Mcp => None,
        }
    }

    fn matches(&self, path: &str) -> bool {
        match crate::request_path::strip_prefix_ignoring_case(path, &self.path) {
            Some(rest) => rest.is_empty() || rest.starts_with('/') || self.path.ends_with('/'),
            None => false,
        }
    }
}

/// The routes of one configuration, longest prefix first.
pub struct Router {
    routes: Vec<Arc<Route>>,
}

impl Router {
    pub fn new(routes: Vec<Route>) -> Self {
        let mut routes: Vec<Arc<Route>> = routes.into_iter().map(Arc::new).collect();
        routes.sort_by_key(|route| std::cmp::Reverse(route.path.len()));
        Router { routes }
    }

    /// The route for a request path (without its query).
    pub fn find(&self, path: &str) -> Option<&Arc<Route>> {
        self.routes.iter().find(|route| route.matches(path))
    }

    pub fn routes(&self) -> impl Iterator<Item = &Arc<Route>> {
        self.routes.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::UpstreamSettings;
    use std::time::Duration;

    fn route(path: &str) -> Route {
        let upstream = Upstream::new(UpstreamSettings {
            name: "u".into(),
            url: "http://127.0.0.1:1".into(),
            api_key: None,
            auth: None,
            tenant_keys: Default::default(),
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            read_timeout: Duration::from_secs(1),
        })
        .expect("a valid upstream");
        Route::new(
            path.into(),
            Arc::new(upstream),
            Chain::new(Vec::new()),
            RouteFormat::Auto,
        )
    }

    #[test]
    fn the_longest_prefix_wins_on_segment_boundaries() {
        let router = Router::new(vec![
            route("/"),
            route("/v1"),
            route("/v1/chat/completions"),
        ]);
        let find = |path: &str| router.find(path).map(|route| route.path.clone());
        assert_eq!(
            find("/v1/chat/completions").as_deref(),
            Some("/v1/chat/completions")
        );
        assert_eq!(
            find("/v1/chat/completions/x").as_deref(),
            Some("/v1/chat/completions")
        );
        assert_eq!(find("/v1/chat/completionsX").as_deref(), Some("/v1"));
        assert_eq!(find("/v1/models").as_deref(), Some("/v1"));
        assert_eq!(find("/health").as_deref(), Some("/"));
    }

    #[test]
    fn an_auto_route_reads_the_path_then_the_body() {
        let auto = RouteFormat::Auto;
        assert_eq!(
            auto.resolve("/v1/messages", Some(b"{\"input\":1}")),
            WireFormat::AnthropicMessages
        );
        assert_eq!(
            auto.resolve("/proxy", Some(b"{\"input\":\"hi\"}")),
            WireFormat::Responses
        );
        assert_eq!(auto.resolve("/proxy", None), WireFormat::ChatCompletions);
        let fixed = RouteFormat::Fixed(WireFormat::Responses);
        assert_eq!(fixed.resolve("/proxy", None), WireFormat::Responses);
        assert_eq!(
            fixed.resolve("/v1/chat/completions", None),
            WireFormat::ChatCompletions,
            "a path that names its format is read in it: a format setting cannot switch a guard off"
        );
    }

    #[test]
    fn no_route_means_none() {
        let router = Router::new(vec![route("/v1")]);
        assert!(router.find("/v2/x").is_none());
        assert!(router.find("/v10").is_none());
    }
}
