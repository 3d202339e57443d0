//! One exchange and its lifecycle, whatever carries it (a JSON answer, a stream, an MCP call,
//! `toolgate explain`): read the answer as a guard must, run `pre_request` and `pre_response`,
//! release or block, and close — one audit line, the metrics, and the `post_response` stage.
//! Each stage exists here once; the paths differ only in how bytes move. Recovering from a
//! block is `recovery`, the close is `finish`; `crate::rounds` reads the answers in turn.

mod capture;
mod disclosure;
mod finish;
mod recovery;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::PathAndQuery;
use http::{HeaderMap, StatusCode};
use toolgate_formats::sse::SseEvent;
use toolgate_formats::stream::StreamStep;
use toolgate_plugin::{
    Check, Edit, ExchangeMeta, Parsed, Rejection, ResponseExchange, ToolCall, ToolRequest,
    ToolResponse, Violation, WireFormat,
};

use crate::body::ProxyBody;
use crate::error::{ErrorReport, GatewayError};
use crate::on_block::{Recovery, ResendHead};
use crate::pipeline::StageOutcome;
use crate::router::{Route, UnguardedCalls, UnreadableAnswers};
use crate::telemetry::McpAudit;

pub use disclosure::Discovered;
pub use recovery::AfterBlock;

/// One exchange, told what happens to it by the driver that carries it; its record is its own.
pub struct Exchange {
    meta: ExchangeMeta,
    route: Arc<Route>,
    /// The exchange's wire format: from the route, the path, then the body once read.
    format: WireFormat,
    request_headers: HeaderMap,
    request: Parsed<ToolRequest>,
    started: Instant,
    upstream_time: Duration,
    checks_time: Duration,
    /// Calls that reached the client.
    delivered_calls: Vec<ToolCall>,
    /// Calls toolgate executed itself and the backend answered (MCP `tools/call`).
    executed_calls: Vec<ToolCall>,
    /// How many calls were checked.
    checked_count: usize,
    /// Every call that was checked, for the audit line: kept only while `keeps_checked_calls`.
    checked_calls: Vec<ToolCall>,
    /// Whether the checked calls are copied for an audit line; off where none is written, as
    /// the copy would be made for every guarded answer and read by nothing.
    keeps_checked_calls: bool,
    violations: Vec<Violation>,
    observed: Vec<Violation>,
    blocked: bool,
    failed: bool,
    streamed: bool,
    /// Headers plugins asked to set on the client's response.
    response_headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Fields plugins added to the audit line.
    annotations: serde_json::Map<String, serde_json::Value>,
    /// What an MCP `tools/list` or `tools/call` adds to its audit line and metrics.
    mcp: Option<Box<McpAudit>>,
    /// On a chain that recovers from blocks (`on_block`): the request as it went upstream, and
    /// the attempts so far. Boxed: most exchanges have none, and all wait with this state.
    recovery: Option<Box<Recovery>>,
    /// On a route with `tool_disclosure`, once the request was disclosed.
    disclosure: Option<Box<disclosure::Disclosing>>,
    /// Whether the gateway itself watches this answer for tool calls: its route is a bare
    /// pass-through (no plugin at all), yet its path may be served as a generation
    /// ([`UnguardedCalls`]).
    watches_unguarded_calls: bool,
    /// The client's connection, to tell a client that stopped reading from one that left.
    connection: Option<crate::connections::DrainSignal>,
    /// The bodies collected for a capture, when captures are on.
    captured: Option<Box<crate::capture::Captured>>,
}

impl Exchange {
    pub fn new(
        meta: ExchangeMeta,
        route: Arc<Route>,
        request_headers: HeaderMap,
        started: Instant,
    ) -> Self {
        let path = meta.path_and_query.split('?').next().unwrap_or_default();
        let format = route.format.resolve(path, None);
        let watches_unguarded_calls = route.unguarded_calls != UnguardedCalls::Pass
            && matches!(route.kind, crate::router::RouteKind::Llm(_))
            && route.chain.is_empty()
            && crate::route_table::answers_generations(path);
        Exchange {
            meta,
            route,
            format,
            request_headers,
            request: Parsed::Absent,
            started,
            upstream_time: Duration::ZERO,
            checks_time: Duration::ZERO,
            delivered_calls: Vec::new(),
            executed_calls: Vec::new(),
            checked_count: 0,
            checked_calls: Vec::new(),
            keeps_checked_calls: true,
            violations: Vec::new(),
            observed: Vec::new(),
            blocked: false,
            failed: false,
            streamed: false,
            response_headers: Vec::new(),
            annotations: serde_json::Map::new(),
            mcp: None,
            recovery: None,
            disclosure: None,
            watches_unguarded_calls,
            connection: None,
            captured: None,
        }
    }

    pub fn meta(&self) -> &ExchangeMeta {
        &self.meta
    }

    pub fn route(&self) -> &Arc<Route> {
        &self.route
    }

    /// The exchange's wire format: from the route, the path, then the body once read.
    pub fn format(&self) -> WireFormat {
        self.format
    }

    /// The request as read (`Absent` when no plugin needed it).
    pub fn request(&self) -> &Parsed<ToolRequest> {
        &self.request
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// The tenant the request authenticated as.
    pub fn authenticated(&mut self, tenant: Option<Arc<toolgate_plugin::Tenant>>) {
        self.meta.tenant = tenant;
    }

    /// The request was read: its format, as its body tells it too, and what was read.
    pub fn request_read(&mut self, format: WireFormat, request: Parsed<ToolRequest>) {
        self.format = format;
        self.request = request;
    }

    /// Whether the checked calls are copied for an audit line (only when one is written).
    pub fn keep_checked_calls(&mut self, keep: bool) {
        self.keeps_checked_calls = keep;
    }

    /// The client's connection, to tell a client that stopped reading from one that left.
    pub fn watch_connection(&mut self, connection: crate::connections::DrainSignal) {
        self.connection = Some(connection);
    }

    /// Whether the answer is (or was) a stream.
    pub fn is_streamed(&self) -> bool {
        self.streamed
    }

    /// The answer comes as a stream.
    pub fn streaming(&mut self) {
        self.streamed = true;
    }

    /// How long the upstream (or MCP backend) took, all told.
    pub fn upstream_took(&mut self, took: Duration) {
        self.upstream_time = took;
    }

    /// Adds a part of the upstream's time (a retry's, the rest of a body).
    pub fn upstream_took_more(&mut self, took: Duration) {
        self.upstream_time += took;
    }

    /// The exchange failed before a verdict (an upstream failure, a bad request).
    pub fn record_failure(&mut self) {
        self.failed = true;
    }

    /// The exchange was refused (by MCP's own rules, before any plugin ran).
    pub fn record_refusal(&mut self, code: &str) {
        self.blocked = true;
        self.annotations
            .insert("refusal".to_owned(), serde_json::Value::from(code));
    }

    /// Headers plugins asked to set on the client's response, handed over once.
    pub fn take_response_headers(&mut self) -> Vec<(http::HeaderName, http::HeaderValue)> {
        std::mem::take(&mut self.response_headers)
    }

    /// The route recovers from blocks (`on_block`): the request body as it goes upstream is
    /// kept for a retry to continue.
    pub fn recover_from(&mut self, body: Bytes) {
        self.recovery = Some(Box::new(Recovery {
            body,
            ..Recovery::default()
        }));
    }

    /// The request's head as it went upstream, for a retry to go the same way.
    pub fn went_upstream_as(&mut self, head: impl FnOnce() -> ResendHead) {
        if let Some(recovery) = self.recovery.as_mut() {
            recovery.head = Some(head());
        }
    }

    /// The exchange is an MCP `tools/list` or `tools/call`, audited and counted as one.
    pub fn audit_as_mcp(&mut self, audit: McpAudit) {
        self.mcp = Some(Box::new(audit));
    }

    /// What an MCP exchange adds to its audit line and metrics, while it runs.
    pub fn mcp_audit(&mut self) -> Option<&mut McpAudit> {
        self.mcp.as_deref_mut()
    }

    /// A call toolgate executed itself (an MCP `tools/call`) that its backend answered.
    pub fn executed(&mut self, call: ToolCall) {
        self.executed_calls.push(call);
    }

    /// An MCP call's result that failed its tool's output schema.
    pub fn record_result_violations(&mut self, violations: &[Violation]) {
        self.violations.extend(violations.iter().cloned());
    }

    /// Records that the client stopped taking the answer: its connection was closed for
    /// accepting no bytes within `write_timeout_ms` (`client_stalled`), or it left.
    pub fn record_client_gone(&mut self) {
        let stalled = self
            .connection
            .as_ref()
            .is_some_and(crate::connections::DrainSignal::closed_stalled);
        let outcome = if stalled {
            "client_stalled"
        } else {
            "client_left"
        };
        self.annotations
            .insert("outcome".to_owned(), serde_json::Value::from(outcome));
    }

    /// The `pre_request` stage: the chain judges the request. Edits are applied to `body` (or,
    /// for a body-less MCP request, to the request itself) and the request is read again; what
    /// the chain decided is recorded.
    pub async fn pre_request(&mut self, body: &mut Bytes) -> StageOutcome {
        let started = Instant::now();
        let route = self.route.clone();
        let outcome = route
            .chain
            .pre_request(
                &self.meta,
                &self.request_headers,
                self.format,
                &mut self.request,
                body,
            )
            .await;
        self.absorb(&outcome, started);
        outcome
    }

    /// The `pre_response` stage: the chain judges the calls of an answer (all of them, or the
    /// ones a stream completed). What it decided is recorded, and the calls count as checked.
    pub async fn pre_response(
        &mut self,
        response: &Parsed<ToolResponse>,
        status: StatusCode,
    ) -> StageOutcome {
        let started = Instant::now();
        let route = self.route.clone();
        let mut outcome = route
            .chain
            .pre_response(&ResponseExchange {
                meta: &self.meta,
                request_headers: &self.request_headers,
                request: &self.request,
                status,
                response,
                streamed: self.streamed,
            })
            .await;
        if self.watches_unguarded_calls
            && let Parsed::Parsed(parsed) = response
        {
            self.watch_unguarded_calls(parsed, &mut outcome);
        }
        self.absorb(&outcome, started);
        if let Parsed::Parsed(parsed) = response {
            self.checked_count += parsed.calls.len();
            if self.keeps_checked_calls {
                self.checked_calls.extend(parsed.calls.iter().cloned());
            }
        }
        outcome
    }

    /// The gateway's own check on a pass-through route: each call its answer carries
    /// is refused (`unguarded_calls = "refuse"`) or recorded as seen (`"log"`).
    fn watch_unguarded_calls(&self, response: &ToolResponse, outcome: &mut StageOutcome) {
        if response.calls.is_empty() {
            return;
        }
        let violations: Vec<Violation> = response
            .calls
            .iter()
            .map(|call| {
                let message = format!(
                    "'{}' reached route {}, which runs no plugin that checks tool calls: guard the \
                     route, or set its unguarded_calls",
                    call.name, self.route.path
                );
                Violation::on_call(
                    Check::Custom("route"),
                    "unguarded_tool_calls",
                    call,
                    message,
                )
            })
            .collect();
        tracing::warn!(
            request_id = %self.meta.request_id,
            route = %self.route.path,
            path = %self.meta.path_and_query.split('?').next().unwrap_or_default(),
            calls = violations.len(),
            "an answer on a route that checks no tool calls carries some"
        );
        let rejection = Rejection::forbidden(violations);
        match self.route.unguarded_calls {
            UnguardedCalls::Refuse => {
                outcome.blocked_by.push("unguarded_calls".to_owned());
                match &mut outcome.blocked {
                    Some(first) => first.violations.extend(rejection.violations),
                    None => outcome.blocked = Some(rejection),
                }
            }
            _ => outcome.observed.push(crate::pipeline::ObservedBlock {
                plugin: "unguarded_calls".to_owned(),
                rejection,
            }),
        }
    }

    /// Whether this exchange's answer is read before it is released: its chain reads answers,
    /// or the gateway watches it for calls on a route that does not.
    pub fn reads_answers(&self) -> bool {
        self.route.chain.body_needs().response || self.watches_unguarded_calls
    }

    /// Counts a call checked outside `pre_response` (an MCP call), kept for the audit line.
    pub fn record_checked_call(&mut self, call: ToolCall) {
        self.checked_count += 1;
        if self.keeps_checked_calls {
            self.checked_calls.push(call);
        }
    }

    /// Records calls released to the client, as the checks' edits left them, and runs the
    /// chain's `on_delivery` with them before they leave: the one place every path (a whole
    /// answer, a stream, any format) tells plugins which calls the client got.
    pub async fn deliver(&mut self, mut calls: Vec<ToolCall>, edits: &[Edit]) {
        toolgate_formats::edits::replace_arguments(&mut calls, edits);
        if calls.is_empty() || !self.route.chain.runs_on_delivery() {
            self.delivered_calls.extend(calls);
            return;
        }
        let delivered = Parsed::Parsed(ToolResponse::from_calls(calls));
        let route = self.route.clone();
        route
            .chain
            .on_delivery(&ResponseExchange {
                meta: &self.meta,
                request_headers: &self.request_headers,
                request: &self.request,
                status: StatusCode::OK,
                response: &delivered,
                streamed: self.streamed,
            })
            .await;
        if let Parsed::Parsed(delivered) = delivered {
            self.delivered_calls.extend(delivered.calls);
        }
    }

    /// Whether this exchange is an MCP request (its HTTP request is the MCP endpoint's).
    fn on_mcp_route(&self) -> bool {
        matches!(self.route.kind, crate::router::RouteKind::Mcp)
    }

    /// The format whose shape toolgate's own answers take for this exchange's clients.
    pub fn error_format(&self) -> WireFormat {
        self.format
    }

    /// Whether this exchange refuses answers it cannot read unambiguously: the route's
    /// `unreadable_answers` (default `block`) on a chain that enforces some check of answers.
    /// An observing chain never blocks; its plugins see what cannot be read as unparsable.
    pub fn closes_on_doubt(&self) -> bool {
        (self.route.unreadable == UnreadableAnswers::Block && self.route.chain.enforces_responses())
            || (self.watches_unguarded_calls
                && self.route.unguarded_calls == UnguardedCalls::Refuse)
    }

    /// Reads a complete 2xx answer for `pre_response`: by its own shape and closed on doubt,
    /// or, on a route that opted out, in the exchange's format with what cannot be read left to
    /// the plugins. `Err` is the block the client gets instead.
    pub fn read_answer(&mut self, body: &[u8]) -> Result<Parsed<ToolResponse>, Box<Rejection>> {
        if !self.closes_on_doubt() {
            return match self.format.parse_response(body) {
                Ok(parsed) => {
                    self.capture_calls(&parsed.calls);
                    Ok(Parsed::Parsed(parsed))
                }
                Err(error) if error.is_ambiguous() => {
                    Err(Box::new(GatewayError::unreadable_response(&error)))
                }
                Err(error) => Ok(Parsed::Unparsable(error)),
            };
        }
        // A route that checks no calls is watched for them, not held to a generation's reading:
        // what it serves may be anything.
        let read = if !self.watches_unguarded_calls
            && crate::route_table::answers_generations(self.meta.path_and_query.as_str())
        {
            toolgate_formats::answer::read_answer
        } else {
            toolgate_formats::answer::read_non_generation_answer
        };
        let response = read(self.format, body)
            .map_err(|error| Box::new(GatewayError::unreadable_response(&error)))?;
        // Before it may be refused: a refused answer's capture is redacted too.
        self.capture_calls(&response.calls);
        self.verifiable(&response)?;
        Ok(Parsed::Parsed(response))
    }

    /// A stream event the guard must refuse, if this exchange closes on doubt.
    pub fn refuse_event(&self, step: StreamStep, event: &SseEvent) -> Option<Rejection> {
        if !self.closes_on_doubt() {
            return None;
        }
        toolgate_formats::stream::refusal(step, event)
            .map(|error| GatewayError::unreadable_response(&error))
    }

    /// Whether the calls of an answer can be checked at all, on a route that closes on doubt:
    /// a call named by a value that is not a string is named differently by each client, and
    /// calls answering a request toolgate could not read (a stored response fetched by id, a
    /// compressed body) cannot be held against what the client declared. Either is refused,
    /// not waved through.
    pub fn verifiable(&self, response: &ToolResponse) -> Result<(), Box<Rejection>> {
        // A watched route refuses every call in `pre_response`, with its own reason.
        if !self.closes_on_doubt() || !response.has_calls() || self.watches_unguarded_calls {
            return Ok(());
        }
        if let Some(name) = toolgate_formats::answer::odd_name(response) {
            let error = toolgate_plugin::ParseError::unreadable(format!(
                "a call is named by {name}, not a string: clients read such a name each their own way"
            ));
            return Err(Box::new(GatewayError::unreadable_response(&error)));
        }
        if matches!(self.request, Parsed::Parsed(_)) {
            return Ok(());
        }
        let why = match &self.request {
            Parsed::Unparsable(error) => {
                format!("the request's declared tools could not be read ({error})")
            }
            _ => "its request declared no tools toolgate could read (a stored answer fetched by id is not checked against the request that made it)".to_owned(),
        };
        let violations = response
            .calls
            .iter()
            .map(|call| {
                let message = format!("'{}' cannot be checked: {why}", call.name);
                Violation::on_call(Check::Parse, "unverifiable_calls", call, message)
            })
            .collect();
        Err(Box::new(Rejection::forbidden(violations)))
    }

    /// Records a block whose reasons its caller answers itself (an MCP error), not violations.
    pub fn record_block_without_violations(&mut self) {
        self.blocked = true;
    }

    /// Records a block the gateway made itself (a stage's blocks come with `absorb`).
    pub fn record_block(&mut self, rejection: &Rejection) {
        self.blocked = true;
        self.violations.extend(rejection.violations.iter().cloned());
    }

    /// The answer a client gets for a block made before anything of the answer was sent.
    pub fn block_response(&self, rejection: &Rejection) -> http::Response<ProxyBody> {
        ErrorReport::of_rejection(rejection, &self.meta.request_id).response(self.error_format())
    }

    /// Records a stage's findings, timed from `since`.
    pub fn absorb(&mut self, outcome: &StageOutcome, since: Instant) {
        self.checks_time += since.elapsed();
        if let Some(rejection) = &outcome.blocked {
            self.blocked = true;
            self.violations.extend(rejection.violations.iter().cloned());
        }
        self.response_headers
            .extend(outcome.response_headers.iter().cloned());
        for (key, value) in &outcome.annotations {
            self.annotations.insert(key.clone(), value.clone());
        }
        for observed in &outcome.observed {
            self.observed
                .extend(observed.rejection.violations.iter().cloned());
        }
    }
}

/// The path and query a request is forwarded with (`/` when the URI has none): the URI's own
/// where it has one, so forwarding it parses and copies nothing.
pub(crate) fn forwarded_path_and_query(uri: &http::Uri) -> Cow<'_, PathAndQuery> {
    uri.path_and_query()
        .map_or_else(|| Cow::Owned(PathAndQuery::from_static("/")), Cow::Borrowed)
}

/// The path and query a request is forwarded and audited with, as text.
pub(crate) fn path_and_query(uri: &http::Uri) -> String {
    forwarded_path_and_query(uri).as_str().to_owned()
}
