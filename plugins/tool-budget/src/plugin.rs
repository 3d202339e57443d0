//! The tool_budget plugin: counts calls against each budget that covers them, and decides what
//! a spent budget means for the exchange — strip the tool from the request, refuse the call
//! with 429, or only report it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue, StatusCode};
use toolgate_plugin::store::{CountOutcome, CountPolicy, StateStore, WindowUsage};
use toolgate_plugin::tool_removal;
use toolgate_plugin::{
    BodyNeeds, CallOutcome, Check, CompletedExchange, ExchangeMeta, Plugin, Rejection, RequestEdit,
    RequestExchange, ResponseEdit, ResponseExchange, StageWork, StoreError, StoreFailMode,
    ToolCall, ToolKey, Unavailable, Verdict, Violation, async_trait,
};

use crate::Metrics;
use crate::settings::{Behaviour, Budget, Counting, Settings};

pub const NAME: &str = "tool_budget";

pub struct ToolBudget {
    pub(crate) settings: Settings,
    pub(crate) store: Arc<dyn StateStore>,
    pub(crate) fail_mode: StoreFailMode,
    pub(crate) metrics: Metrics,
}

/// The counter of one budget for one tenant.
fn counter_key(budget: &Budget, tenant: Option<&str>) -> String {
    format!(
        "toolgate:budget:{}:{}",
        escape(&budget.name),
        tenant.map_or_else(
            || "anonymous".to_owned(),
            |name| format!("t.{}", escape(name))
        )
    )
}

/// Keeps `:` as the key's only separator, whatever a name holds.
fn escape(part: &str) -> String {
    part.replace('%', "%25").replace(':', "%3A")
}

fn tenant_of(meta: &ExchangeMeta) -> Option<&str> {
    meta.tenant.as_ref().map(|tenant| tenant.name.as_str())
}

impl ToolBudget {
    fn budgets_for<'a>(&'a self, tenant: Option<&'a str>) -> impl Iterator<Item = &'a Budget> {
        self.settings
            .budgets
            .iter()
            .filter(move |budget| budget.applies_to(tenant))
    }

    /// The store failed: block as the failure table says, or let through, per `[store] fail_mode`.
    fn unavailable<E>(&self, meta: &ExchangeMeta, error: &StoreError) -> Verdict<E> {
        self.metrics.store_errors.inc();
        tracing::warn!(request_id = %meta.request_id, store = %self.store.describe(), %error, "tool budgets could not be checked");
        match self.fail_mode {
            StoreFailMode::Allow => Verdict::Continue,
            StoreFailMode::Block => {
                Verdict::Block(
                    Unavailable::Store.rejection(vec![Unavailable::Store.violation(
                        Check::Budget,
                        "tool budgets cannot be checked right now: the state store did not answer",
                    )]),
                )
            }
        }
    }

    /// Counts the history's executed calls once each (executed counting), or reads the
    /// counter (proposed counting), for a budget the request touches.
    async fn tally_history(
        &self,
        budget: &Budget,
        tenant: Option<&str>,
        history: &[(toolgate_plugin::HistoryCall, ToolKey)],
    ) -> Result<CountOutcome, StoreError> {
        let key = counter_key(budget, tenant);
        match self.settings.counting {
            Counting::Proposed => {
                self.store
                    .count(&key, &budget.windows, 0, CountPolicy::WithinLimits)
                    .await
            }
            Counting::Executed => {
                let markers: Vec<String> = history
                    .iter()
                    .filter(|(call, key)| {
                        call.outcome != CallOutcome::Pending && budget.covers(key)
                    })
                    .filter_map(|(call, _)| call.id.as_deref())
                    .map(|id| format!("{key}:call:{}", escape(id)))
                    .collect();
                self.store
                    .count_new(
                        &key,
                        &budget.windows,
                        &markers,
                        self.settings.remember_calls_for,
                    )
                    .await
            }
        }
    }
}

#[async_trait]
impl Plugin for ToolBudget {
    fn body_needs(&self) -> BodyNeeds {
        BodyNeeds::BOTH
    }

    async fn pre_request(&self, exchange: &RequestExchange<'_>) -> Verdict<RequestEdit> {
        let Some(request) = exchange.request.as_parsed() else {
            return Verdict::Continue;
        };
        let tenant = tenant_of(exchange.meta);
        let needs_history = self.settings.counting == Counting::Executed;
        // Every name is resolved to its key once, then matched against each budget.
        let history: Vec<_> = if needs_history {
            request
                .history()
                .into_iter()
                .map(|call| {
                    let key = call.key();
                    (call, key)
                })
                .collect()
        } else {
            Vec::new()
        };
        let declared_keys: Vec<(&str, ToolKey)> = request
            .declared_tools
            .iter()
            .map(|tool| (tool.name.as_str(), tool.key()))
            .collect();
        let mut stripped = Vec::new();
        for budget in self.budgets_for(tenant) {
            // The exact declared names: a strip edit removes tools by the name the body holds.
            let declared: Vec<&str> = budget.covered(&declared_keys).collect();
            let touched = history.iter().any(|(_, key)| budget.covers(key));
            let reads_for_strip = budget.behaviour == Behaviour::Strip && !declared.is_empty();
            if !touched && !reads_for_strip {
                continue;
            }
            let outcome = match self.tally_history(budget, tenant, &history).await {
                Ok(outcome) => outcome,
                Err(error) => return self.unavailable(exchange.meta, &error),
            };
            if outcome.binding_window().is_none() {
                continue;
            }
            match budget.behaviour {
                Behaviour::Strip => {
                    self.metrics.record_spent(&budget.name, "strip");
                    stripped.extend(declared.iter().map(|name| (*name).to_owned()));
                }
                Behaviour::Observe if !declared.is_empty() => {
                    self.metrics.record_spent(&budget.name, "observe");
                    tracing::info!(request_id = %exchange.meta.request_id, budget = %budget.name, tenant = tenant.unwrap_or("anonymous"), "observe: a spent tool budget");
                }
                Behaviour::Observe | Behaviour::Reject => {}
            }
        }
        stripped.sort();
        stripped.dedup();
        tool_removal::verdict(
            &request.declared_tools,
            stripped,
            self.settings.on_empty,
            Check::Budget,
            Vec::new(),
        )
    }

    async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
        if exchange.calls().is_empty() {
            return Verdict::Continue;
        }
        let tenant = tenant_of(exchange.meta);
        let mut violations = Vec::new();
        let mut binding: Option<(WindowUsage, String)> = None;
        let keyed: Vec<(&ToolCall, ToolKey)> = (exchange.calls().iter())
            .map(|call| (call, call.key()))
            .collect();
        for budget in self.budgets_for(tenant) {
            let calls: Vec<&ToolCall> = budget.covered(&keyed).collect();
            if calls.is_empty() {
                continue;
            }
            let key = counter_key(budget, tenant);
            let amount = calls.len() as u64;
            let (policy, proposed) = match self.settings.counting {
                Counting::Proposed => (CountPolicy::WithinLimits, amount),
                Counting::Executed => (CountPolicy::WithinLimits, 0),
            };
            let outcome = match self
                .store
                .count(&key, &budget.windows, proposed, policy)
                .await
            {
                Ok(outcome) => outcome,
                Err(error) => return self.unavailable(exchange.meta, &error),
            };
            // The windows this response would take past their limit.
            let extra = if self.settings.counting == Counting::Proposed {
                if outcome.added == amount {
                    continue;
                } else {
                    amount
                }
            } else {
                amount
            };
            let over: Vec<&WindowUsage> = outcome
                .windows
                .iter()
                .filter(|usage| usage.used.saturating_add(extra) > usage.window.limit)
                .collect();
            let Some(window) = over.iter().max_by_key(|usage| usage.resets_in) else {
                continue;
            };
            if budget.behaviour == Behaviour::Observe {
                self.metrics.record_spent(&budget.name, "observe");
                tracing::info!(request_id = %exchange.meta.request_id, budget = %budget.name, tenant = tenant.unwrap_or("anonymous"), "observe: calls past a tool budget");
                continue;
            }
            self.metrics.record_spent(&budget.name, "reject");
            let message = format!(
                "tool '{}' is over its budget '{}'{}: {} calls per {} ({} left, resets in {}s)",
                calls[0].name,
                budget.name,
                tenant
                    .map(|name| format!(" for tenant '{name}'"))
                    .unwrap_or_default(),
                window.window.limit,
                humantime::format_duration(window.window.length),
                window.remaining(),
                seconds_up(window.resets_in),
            );
            violations.extend(calls.iter().map(|call| {
                Violation::on_call(Check::Budget, "tool_budget_exceeded", call, message.clone())
            }));
            if binding
                .as_ref()
                .is_none_or(|(seen, _)| window.resets_in > seen.resets_in)
            {
                binding = Some((**window, calls[0].name.clone()));
            }
        }
        match binding {
            None => Verdict::Continue,
            Some((window, tool)) => Verdict::Block(rate_limited(violations, &window, &tool)),
        }
    }

    /// Executed counting of the calls toolgate executed itself (MCP): their results never
    /// come back in a history, so each is counted here, once (marked by the exchange's own id).
    /// Only executed counting has calls to count after the answer.
    async fn post_response(&self, exchange: &CompletedExchange<'_>) -> StageWork {
        if self.settings.counting != Counting::Executed {
            return StageWork::Nothing;
        }
        let tenant = tenant_of(exchange.meta);
        let executed: Vec<(usize, ToolKey)> = (exchange.executed_calls.iter())
            .enumerate()
            .map(|(index, call)| (index, ToolKey::new(&call.name)))
            .collect();
        for budget in self.budgets_for(tenant) {
            let key = counter_key(budget, tenant);
            let markers: Vec<String> = (budget.covered(&executed))
                .map(|index| {
                    let request = escape(&exchange.meta.request_id);
                    format!("{key}:executed:{request}:{index}")
                })
                .collect();
            if markers.is_empty() {
                continue;
            }
            let counted = self
                .store
                .count_new(
                    &key,
                    &budget.windows,
                    &markers,
                    self.settings.remember_calls_for,
                )
                .await;
            if let Err(error) = counted {
                self.metrics.store_errors.inc();
                tracing::warn!(request_id = %exchange.meta.request_id, budget = %budget.name, %error, "an executed call could not be counted");
            }
        }
        StageWork::Done
    }
}

/// The longest wait a budget's 429 still invites a retry for: the OpenAI SDKs honour a
/// `retry-after` up to a minute; a window that resets later says `x-should-retry: false`.
const RETRY_WORTH_WAITING_SECS: u64 = 60;

/// Whole seconds, rounded up, so a client that waits that long finds the window reset.
fn seconds_up(duration: Duration) -> u64 {
    duration.as_millis().div_ceil(1000) as u64
}

/// The 429 a spent budget answers, with the headers rate-limited clients read.
fn rate_limited(violations: Vec<Violation>, window: &WindowUsage, tool: &str) -> Rejection {
    let seconds = seconds_up(window.resets_in).max(1);
    let reset = seconds.to_string();
    let mut headers: BTreeMap<&'static str, String> = BTreeMap::new();
    // A window that ends later than a client can usefully wait is said not worth retrying, in
    // the header the OpenAI and Anthropic SDKs obey before any backoff: otherwise they sleep
    // (or retry at once, past their ceiling on `retry-after`) into answers that stay 429s.
    if seconds > RETRY_WORTH_WAITING_SECS {
        headers.insert("x-should-retry", "false".to_owned());
    }
    headers.insert("retry-after", reset.clone());
    headers.insert("x-ratelimit-limit", window.window.limit.to_string());
    headers.insert("x-ratelimit-remaining", window.remaining().to_string());
    headers.insert("x-ratelimit-reset", reset);
    headers.insert("x-ratelimit-tool", tool.to_owned());
    let mut rejection = Rejection::forbidden(violations)
        .with_status(StatusCode::TOO_MANY_REQUESTS, "rate_limit_exceeded");
    for (name, value) in headers {
        // A tool name that is not a valid header value is left out rather than mangled.
        if let Ok(value) = HeaderValue::from_str(&value) {
            rejection = rejection.with_header(HeaderName::from_static(name), value);
        }
    }
    rejection
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_plugin::store::Window;

    #[test]
    fn keys_keep_one_separator() {
        let settings = Settings::parse(&serde_json::json!({"budgets": [
            {"tools": "db:*", "limits": ["1/s"]}
        ]}))
        .expect("valid");
        let budget = &settings.budgets[0];
        assert_eq!(
            counter_key(budget, Some("a:b")),
            "toolgate:budget:db%3A*:t.a%3Ab"
        );
        assert_eq!(
            counter_key(budget, None),
            "toolgate:budget:db%3A*:anonymous"
        );
    }

    #[test]
    fn a_rejection_carries_the_rate_limit_headers() {
        let window = WindowUsage {
            window: Window {
                length: Duration::from_secs(60),
                limit: 3,
            },
            used: 3,
            resets_in: Duration::from_millis(41_200),
        };
        let rejection = rate_limited(Vec::new(), &window, "pay");
        assert_eq!(rejection.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(rejection.headers["retry-after"], "42");
        assert_eq!(rejection.headers["x-ratelimit-remaining"], "0");
        assert_eq!(rejection.headers["x-ratelimit-limit"], "3");
        assert_eq!(rejection.headers["x-ratelimit-tool"], "pay");
    }
}
