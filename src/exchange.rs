//! One exchange in flight: what the gateway learned about it on the way (tools, calls, verdicts,
//! timings), and how it is closed — one audit line, the metrics, and the `post_response` stage.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;
use toolgate_plugin::sse::SseEvent;
use toolgate_plugin::stream::StreamStep;
use toolgate_plugin::{
    Check, CompletedExchange, ErrorShape, ExchangeMeta, Parsed, Rejection, ToolCall, ToolRequest,
    ToolResponse, Violation, WireFormat,
};

use crate::body::ProxyBody;
use crate::error::{ErrorReport, GatewayError};
use crate::pipeline::StageOutcome;
use crate::router::{Route, UnreadableAnswers};
use crate::state::GatewayState;
use crate::telemetry::{AuditCall, AuditRecord, AuditVerdict, Timings, millis, now_rfc3339};

pub struct Exchange {
    pub meta: ExchangeMeta,
    pub route: Arc<Route>,
    /// The exchange's wire format: from the route, the path, then the body once read.
    pub format: WireFormat,
    pub request_headers: HeaderMap,
    pub request: Parsed<ToolRequest>,
    pub started: Instant,
    pub upstream_time: Duration,
    pub checks_time: Duration,
    /// Calls that reached the client.
    pub delivered_calls: Vec<ToolCall>,
    /// Every call that was checked.
    pub checked_calls: Vec<ToolCall>,
    pub violations: Vec<Violation>,
    pub observed: Vec<Violation>,
    pub blocked: bool,
    pub failed: bool,
    pub streamed: bool,
    /// Headers plugins asked to set on the client's response.
    pub response_headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Fields plugins added to the audit line.
    pub annotations: serde_json::Map<String, serde_json::Value>,
}

impl Exchange {
    pub fn new(
        meta: ExchangeMeta,
        route: Arc<Route>,
        request_headers: HeaderMap,
        started: Instant,
    ) -> Self {
        let path = meta
            .path_and_query
            .split('?')
            .next()
            .unwrap_or_default()
            .to_owned();
        let format = route.format.resolve(&path, None);
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
            checked_calls: Vec::new(),
            violations: Vec::new(),
            observed: Vec::new(),
            blocked: false,
            failed: false,
            streamed: false,
            response_headers: Vec::new(),
            annotations: serde_json::Map::new(),
        }
    }

    /// The shape of toolgate's own answers for this exchange's clients.
    pub fn error_shape(&self) -> ErrorShape {
        self.format.error_shape()
    }

    /// Whether this exchange refuses answers it cannot read unambiguously (the route's
    /// `unreadable_answers`, default `block`).
    pub fn closes_on_doubt(&self) -> bool {
        self.route.unreadable == UnreadableAnswers::Block
    }

    /// Reads a complete 2xx answer for `pre_response`: by its own shape and closed on doubt,
    /// or, on a route that opted out, in the exchange's format with what cannot be read left to
    /// the plugins. `Err` is the block the client gets instead.
    pub fn read_answer(&self, body: &[u8]) -> Result<Parsed<ToolResponse>, Box<Rejection>> {
        if !self.closes_on_doubt() {
            return match self.format.parse_response(body) {
                Ok(parsed) => Ok(Parsed::Parsed(parsed)),
                Err(error) if error.is_ambiguous() => {
                    Err(Box::new(GatewayError::unreadable_response(&error)))
                }
                Err(error) => Ok(Parsed::Unparsable(error)),
            };
        }
        let response = toolgate_plugin::answer::read_answer(self.format, body)
            .map_err(|error| Box::new(GatewayError::unreadable_response(&error)))?;
        self.verifiable(&response)?;
        Ok(Parsed::Parsed(response))
    }

    /// A stream event the guard must refuse, if this exchange closes on doubt.
    pub fn refuse_event(&self, step: StreamStep, event: &SseEvent) -> Option<Rejection> {
        if !self.closes_on_doubt() {
            return None;
        }
        toolgate_plugin::stream::refusal(step, event)
            .map(|error| GatewayError::unreadable_response(&error))
    }

    /// Calls answering a request toolgate could not read (a stored response fetched by id, a
    /// compressed body) cannot be held against what the client declared: on a route that
    /// closes on doubt they are refused, not waved through as "nothing was declared".
    pub fn verifiable(&self, response: &ToolResponse) -> Result<(), Box<Rejection>> {
        if !self.closes_on_doubt()
            || !response.has_calls()
            || matches!(self.request, Parsed::Parsed(_))
        {
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

    /// Records a block the gateway made itself (a stage's blocks come with `absorb`).
    pub fn record_block(&mut self, rejection: &Rejection) {
        self.blocked = true;
        self.violations.extend(rejection.violations.iter().cloned());
    }

    /// The answer a client gets for a block made before anything of the answer was sent.
    pub fn block_response(&self, rejection: &Rejection) -> http::Response<ProxyBody> {
        ErrorReport::of_rejection(rejection, &self.meta.request_id).response(self.error_shape())
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

    /// Closes the exchange: metrics, the audit line, and `post_response` (in the background, so
    /// accounting never delays the client) when the chain has any.
    pub async fn finish(self, state: &Arc<GatewayState>, status: http::StatusCode) {
        let route_path = self.route.path.clone();
        state
            .metrics
            .record_request(&route_path, status.as_u16(), self.started.elapsed());
        // A bare pass-through is not audited; anything guarded or authenticated is, 401s too.
        let authenticated =
            self.meta.tenant.is_some() || self.route.auth == crate::tenants::RouteAuth::Tenant;
        if self.route.chain.is_empty() && !authenticated {
            return;
        }
        state
            .metrics
            .record_checked(&route_path, self.checked_calls.len());
        state
            .metrics
            .record_violations(&route_path, "enforce", &self.violations);
        state
            .metrics
            .record_violations(&route_path, "observe", &self.observed);
        if state.audit.is_enabled() {
            let verdict = if self.failed {
                AuditVerdict::Error
            } else if self.blocked {
                AuditVerdict::Blocked
            } else if !self.observed.is_empty() {
                AuditVerdict::Observed
            } else {
                AuditVerdict::Allowed
            };
            let record = AuditRecord {
                timestamp: now_rfc3339(),
                request_id: self.meta.request_id.clone(),
                route: route_path,
                method: self.meta.method.to_string(),
                path: self.meta.path_and_query.clone(),
                tenant: self.meta.tenant.as_ref().map(|tenant| tenant.name.clone()),
                status: status.as_u16(),
                verdict,
                streamed: self.streamed,
                plugins: self.route.chain.names().map(str::to_owned).collect(),
                declared_tools: self
                    .request
                    .as_parsed()
                    .map(|request| {
                        request
                            .declared_tools
                            .iter()
                            .map(|tool| tool.name.clone())
                            .collect()
                    })
                    .unwrap_or_default(),
                calls: self.checked_calls.iter().map(AuditCall::from).collect(),
                violations: self.violations.clone(),
                observed: self.observed.clone(),
                annotations: self.annotations.clone(),
                timings_ms: Timings {
                    total: millis(self.started.elapsed()),
                    upstream: millis(self.upstream_time),
                    checks: millis(self.checks_time),
                },
                mcp: None,
            };
            state.audit.write(&record).await;
        }
        if !self.route.chain.runs_post_response() {
            return;
        }
        let elapsed = self.started.elapsed();
        tokio::spawn(async move {
            let completed = CompletedExchange {
                meta: &self.meta,
                request_headers: &self.request_headers,
                request: &self.request,
                status,
                delivered_calls: &self.delivered_calls,
                elapsed,
            };
            self.route.chain.post_response(&completed).await;
        });
    }
}

/// The path and query a request is forwarded and audited with (`/` when the URI has none).
pub(crate) fn path_and_query(uri: &http::Uri) -> String {
    uri.path_and_query()
        .map_or_else(|| "/".to_owned(), |pq| pq.as_str().to_owned())
}
