//! What a plugin sees at each stage of an exchange. Views are read-only: a plugin changes the
//! exchange by returning [`Verdict::Modify`](crate::Verdict::Modify), never by mutation.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Method, StatusCode};

use crate::format::{ParseError, ToolRequest, ToolResponse};
use crate::tenant::Tenant;
use crate::tool::{DeclaredTool, ToolCall};

/// Facts about the exchange that every stage shares.
#[derive(Debug, Clone)]
pub struct ExchangeMeta {
    /// The id toolgate answers in `x-request-id` and writes in the audit line.
    pub request_id: String,
    /// The matched route's path prefix (shared with the route, not copied per exchange).
    pub route: Arc<str>,
    /// The client's request method.
    pub method: Method,
    /// The request path and query as the client sent them.
    pub path_and_query: String,
    /// The tenant whose key authenticated the request, when tenants are configured.
    pub tenant: Option<Arc<Tenant>>,
    /// The conversation's workflow state, once `tool_groups` settled it in `pre_request` (it
    /// is unset on a route without that plugin). Set once, so plugins after it all see one
    /// state; a validator service is told it.
    pub workflow_state: std::sync::OnceLock<String>,
}

impl ExchangeMeta {
    /// The facts of a new exchange: no tenant yet, no workflow state settled.
    pub fn new(
        request_id: impl Into<String>,
        route: Arc<str>,
        method: Method,
        path_and_query: impl Into<String>,
    ) -> Self {
        ExchangeMeta {
            request_id: request_id.into(),
            route,
            method,
            path_and_query: path_and_query.into(),
            tenant: None,
            workflow_state: std::sync::OnceLock::new(),
        }
    }

    /// The same facts, with the tenant the request authenticated as.
    pub fn with_tenant(mut self, tenant: Option<Arc<Tenant>>) -> Self {
        self.tenant = tenant;
        self
    }
}

/// A body as the gateway could read it.
#[derive(Debug, Clone)]
pub enum Parsed<T> {
    /// The body was not read: no plugin on the route asked for it, or there was none.
    Absent,
    /// The body was read but is not in a format toolgate understands.
    Unparsable(ParseError),
    /// The body, read into the format-neutral view.
    Parsed(T),
}

impl<T> Parsed<T> {
    /// The view, when the body was read; `None` when absent or unparsable.
    pub fn as_parsed(&self) -> Option<&T> {
        match self {
            Parsed::Parsed(value) => Some(value),
            _ => None,
        }
    }
}

/// The `pre_request` view: the client's request before it goes upstream.
#[derive(Debug)]
pub struct RequestExchange<'a> {
    /// What every stage shares.
    pub meta: &'a ExchangeMeta,
    /// The client's request headers (no plugin's header edit is in them).
    pub headers: &'a HeaderMap,
    /// The request body as read, after the edits of the plugins that ran before.
    pub request: &'a Parsed<ToolRequest>,
}

impl RequestExchange<'_> {
    /// The tools the request declares; none when it was not read or not understood. A plugin
    /// that must refuse a request it cannot read matches on `request` instead.
    pub fn declared_tools(&self) -> &[DeclaredTool] {
        self.request
            .as_parsed()
            .map_or(&[], |request| &request.declared_tools)
    }
}

/// The `pre_response` view: the upstream's answer before any byte of it reaches the client.
/// For a stream, `response` holds the calls reassembled so far that are complete and not yet
/// released; text already passed through is not repeated.
#[derive(Debug)]
pub struct ResponseExchange<'a> {
    /// What every stage shares.
    pub meta: &'a ExchangeMeta,
    /// The client's request headers.
    pub request_headers: &'a HeaderMap,
    /// The request body as it went upstream (after `pre_request` edits).
    pub request: &'a Parsed<ToolRequest>,
    /// The upstream's status (always 2xx: other answers skip this stage).
    pub status: StatusCode,
    /// The answer, or the calls a stream completed so far.
    pub response: &'a Parsed<ToolResponse>,
    /// Whether the answer is a stream (`pre_response` then runs once per set of calls).
    pub streamed: bool,
}

impl ResponseExchange<'_> {
    /// The calls the answer holds; none when it was not read or not understood. A plugin that
    /// must refuse an answer it cannot read matches on `response` instead.
    pub fn calls(&self) -> &[ToolCall] {
        self.response
            .as_parsed()
            .map_or(&[], |response| &response.calls)
    }
}

/// The `post_response` view: the exchange after the client got its answer (for accounting).
#[derive(Debug)]
pub struct CompletedExchange<'a> {
    /// What every stage shares.
    pub meta: &'a ExchangeMeta,
    /// The client's request headers.
    pub request_headers: &'a HeaderMap,
    /// The request body as it went upstream.
    pub request: &'a Parsed<ToolRequest>,
    /// The status the client received (toolgate's own, when it blocked).
    pub status: StatusCode,
    /// Every call the client received (blocked calls are not here).
    pub delivered_calls: &'a [ToolCall],
    /// Calls toolgate executed itself, on the client's behalf, and whose backend answered (an
    /// MCP route's `tools/call`): their results never come back in a history, so accounting
    /// that counts executed calls counts these here. `post_response` then runs before the
    /// answer leaves.
    pub executed_calls: &'a [ToolCall],
    /// Time from the request's arrival to the end of the answer.
    pub elapsed: Duration,
}
