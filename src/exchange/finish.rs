//! An exchange's close: metrics, its audit line, and the `post_response` stage.

use std::sync::Arc;
use std::time::Instant;

use http::HeaderMap;
use toolgate_plugin::{CompletedExchange, ExchangeMeta};

use super::Exchange;
use crate::capture::CaptureStore;
use crate::on_block::AttemptRecord;
use crate::recent::RecentExchanges;
use crate::router::Route;
use crate::state::GatewayState;
use crate::telemetry::{AuditCall, AuditRecord, AuditVerdict, Timings, millis, now_rfc3339};

impl Exchange {
    /// Closes an exchange whose handling panicked, which could not close itself: rebuilt from
    /// what its caller kept outside the panic, and closed as a failed one with the 500 a fault
    /// is, so it is counted and audited like any other. What it had learned inside (a tenant
    /// found later, the calls it checked) went with the panic.
    pub async fn close_panicked(
        state: &Arc<GatewayState>,
        meta: ExchangeMeta,
        route: Arc<Route>,
        started: Instant,
        streamed: bool,
    ) {
        let mut exchange = Exchange::new(meta, route, HeaderMap::new(), started);
        exchange.failed = true;
        exchange.streamed = streamed;
        exchange
            .finish(state, http::StatusCode::INTERNAL_SERVER_ERROR)
            .await;
    }

    /// Closes the exchange: metrics, the audit line, and `post_response` (in the background, so
    /// accounting never delays the client) when the chain has any.
    pub async fn finish(mut self, state: &Arc<GatewayState>, status: http::StatusCode) {
        self.close_disclosure().await;
        // The exchange's one reading of the clock at its close: its metrics, its audit line and
        // `post_response` all see the same time.
        let elapsed = self.started.elapsed();
        let route_path = self.route.path.clone();
        if let Some(mcp) = self.mcp.as_deref().filter(|mcp| mcp.method == "tools/call") {
            let server = mcp.server.as_deref().unwrap_or_default();
            state
                .metrics
                .record_mcp_call(&route_path, server, mcp.outcome);
        }
        // An MCP route's HTTP requests are counted by its endpoint: one may carry several
        // exchanges, or none.
        if !self.on_mcp_route() {
            state.metrics.record_route_request(
                &route_path,
                &self.route.metrics,
                status.as_u16(),
                elapsed,
                self.upstream_time,
            );
        }
        // A bare pass-through is not audited; anything guarded, authenticated or MCP is, 401s
        // too.
        let authenticated =
            self.meta.tenant.is_some() || self.route.auth == crate::tenants::RouteAuth::Tenant;
        let watched_something = self.blocked || !self.observed.is_empty();
        if self.route.chain.is_empty()
            && !authenticated
            && !self.on_mcp_route()
            && !watched_something
        {
            return;
        }
        let attempts = self.record_findings(state, &route_path);
        let line = self.audit_line(
            &state.captures,
            &state.recent,
            state.audit.is_enabled(),
            status,
            attempts,
            elapsed,
        );
        if let Some(line) = line
            && state.audit.is_enabled()
        {
            state.audit.write_line(line, &self.meta.request_id).await;
        }
        if !self.route.chain.runs_post_response() {
            return;
        }
        // A call toolgate executed is accounted before its answer leaves, so the caller's
        // next call meets the count (budgets are exact); other accounting runs on its own task.
        let executed_here = !self.executed_calls.is_empty();
        let accounting = async move {
            let completed = CompletedExchange {
                meta: &self.meta,
                request_headers: &self.request_headers,
                request: &self.request,
                status,
                delivered_calls: &self.delivered_calls,
                executed_calls: &self.executed_calls,
                elapsed,
            };
            self.route.chain.post_response(&completed).await;
        };
        if executed_here {
            accounting.await;
        } else {
            tokio::spawn(accounting);
        }
    }

    /// The exchange's audit line, its capture kept in `captures` when the setting names it, and
    /// the line listed in `recent` for the console; `None` when neither the audit output
    /// (`audit_on`) nor a capture wants it, or it cannot be serialized. The part of the close
    /// that captures and the console add to (`benches/capture.rs`).
    pub(crate) fn audit_line(
        &mut self,
        captures: &CaptureStore,
        recent: &RecentExchanges,
        audit_on: bool,
        status: http::StatusCode,
        attempts: Vec<AttemptRecord>,
        elapsed: std::time::Duration,
    ) -> Option<String> {
        let capture = self.wanted_capture(captures);
        if !audit_on && capture.is_none() {
            return None;
        }
        let record = self.audit_record(status, attempts, elapsed);
        if let Some(captured) = capture {
            self.keep_capture(captures, *captured, &record);
        }
        match serde_json::to_string(&record) {
            Ok(line) => {
                // The console lists the same line the audit output gets.
                recent.push(&record.request_id, line.as_str().into());
                Some(line)
            }
            Err(error) => {
                tracing::error!(%error, "cannot serialize an audit record");
                None
            }
        }
    }

    /// Counts what the checks found (calls checked, violations, retries) and gives the
    /// attempts an audit line lists (each blocked attempt, then the last).
    fn record_findings(
        &self,
        state: &Arc<GatewayState>,
        route_path: &Arc<str>,
    ) -> Vec<AttemptRecord> {
        state
            .metrics
            .record_checked(route_path, &self.route.metrics, self.checked_count);
        state
            .metrics
            .record_violations(route_path, "enforce", &self.violations);
        let mut attempts = Vec::new();
        if let Some(recovery) = self.recovery.as_deref() {
            for attempt in &recovery.attempts {
                state
                    .metrics
                    .record_violations(route_path, "enforce", &attempt.violations);
            }
            for outcome in &recovery.outcomes {
                state
                    .metrics
                    .record_block_retry(route_path, outcome.label());
            }
            if !recovery.attempts.is_empty() {
                attempts.extend(recovery.attempts.iter().cloned());
                attempts.push(AttemptRecord {
                    attempt: recovery.attempts.len() as u32 + 1,
                    violations: self.violations.clone(),
                });
            }
        }
        state
            .metrics
            .record_violations(route_path, "observe", &self.observed);
        attempts
    }

    /// The exchange's audit line.
    fn audit_record(
        &self,
        status: http::StatusCode,
        attempts: Vec<AttemptRecord>,
        elapsed: std::time::Duration,
    ) -> AuditRecord {
        let verdict = if self.failed {
            AuditVerdict::Error
        } else if self.blocked {
            AuditVerdict::Blocked
        } else if !self.observed.is_empty() {
            AuditVerdict::Observed
        } else {
            AuditVerdict::Allowed
        };
        AuditRecord {
            timestamp: now_rfc3339(),
            request_id: self.meta.request_id.clone(),
            route: self.route.path.to_string(),
            method: self.meta.method.to_string(),
            path: crate::capture::path_for_logs(&self.meta.path_and_query),
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
                total: millis(elapsed),
                upstream: millis(self.upstream_time),
                checks: millis(self.checks_time),
            },
            mcp: self.mcp.as_deref().cloned(),
            attempts,
        }
    }
}
