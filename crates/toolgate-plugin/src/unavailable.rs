//! The one table of what a client is answered when something toolgate relies on cannot answer:
//! the semantic judge, a validator service, the state store, the upstream. Plugins and the
//! gateway ask [`Unavailable::failure_status`] instead of choosing a status case by case, so
//! the same outage reads the same everywhere, and a change of policy is one line here.

use http::StatusCode;

use crate::tool::ToolCall;
use crate::verdict::{Check, Rejection, Violation};

/// Something toolgate relies on that gave no usable answer (none, too late, or garbage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unavailable {
    /// `tool_selection`'s semantic judge, under `semantic_fail_mode = "block"`.
    Judge,
    /// A validator service (`[services.NAME]`), under its `fail_mode = "block"`.
    Service,
    /// The shared state store (`[store]`), under `fail_mode = "block"`.
    Store,
    /// The upstream could not be reached (connection refused, DNS, TLS).
    UpstreamUnreachable,
    /// The upstream did not answer in time: no response head, or a body or stream that stalled.
    UpstreamTimeout,
    /// The upstream's connection broke, or its answer ended before it was whole.
    UpstreamFailed,
}

/// How a client is answered for one [`Unavailable`]: the HTTP status, the envelope's `type`
/// and its `code`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailureStatus {
    /// The HTTP status of toolgate's answer.
    pub status: StatusCode,
    /// The envelope's `type` (OpenAI's vocabulary where it has a word for it).
    pub error_type: &'static str,
    /// The envelope's (and the violation's) `code`, stable for programs.
    pub code: &'static str,
}

impl Unavailable {
    /// The table. The reviewers a route's fail mode stands in for (judge, services) block as
    /// the guard blocks — a 403 whose code says nothing was found, only not checked — so their
    /// violation sits on its call next to the other findings of the same answer, and an SDK
    /// raises it instead of retrying a generation the guard may still be unable to review. What
    /// the gateway runs on (store, upstream) failing is the gateway's own failure: a 5xx, which
    /// clients retry.
    pub const fn failure_status(self) -> FailureStatus {
        let (status, error_type, code) = match self {
            Unavailable::Judge => (
                StatusCode::FORBIDDEN,
                "tool_call_blocked",
                "semantic_unavailable",
            ),
            Unavailable::Service => (
                StatusCode::FORBIDDEN,
                "tool_call_blocked",
                "service_unavailable",
            ),
            Unavailable::Store => (
                StatusCode::SERVICE_UNAVAILABLE,
                "server_error",
                "state_store_unavailable",
            ),
            Unavailable::UpstreamUnreachable => (
                StatusCode::BAD_GATEWAY,
                "upstream_error",
                "upstream_unreachable",
            ),
            Unavailable::UpstreamTimeout => (
                StatusCode::GATEWAY_TIMEOUT,
                "upstream_error",
                "upstream_timeout",
            ),
            Unavailable::UpstreamFailed => {
                (StatusCode::BAD_GATEWAY, "upstream_error", "upstream_failed")
            }
        };
        FailureStatus {
            status,
            error_type,
            code,
        }
    }

    /// The table's code, e.g. `semantic_unavailable`.
    pub const fn code(self) -> &'static str {
        self.failure_status().code
    }

    /// Whether `violation` reports this outage (rather than a finding).
    pub fn reported_by(self, violation: &Violation) -> bool {
        violation.code == self.code()
    }

    /// A violation of `check` that reports this outage, not tied to any call.
    pub fn violation(self, check: Check, message: impl Into<String>) -> Violation {
        Violation::new(check, self.code(), message)
    }

    /// A violation of `check` that reports this outage for one call.
    pub fn on_call(self, check: Check, call: &ToolCall, message: impl Into<String>) -> Violation {
        Violation::on_call(check, self.code(), call, message)
    }

    /// The rejection of an exchange refused because of this outage, with the table's status
    /// and type.
    pub fn rejection(self, violations: Vec<Violation>) -> Rejection {
        let answer = self.failure_status();
        Rejection::forbidden(violations).with_status(answer.status, answer.error_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The statuses and codes clients, SDK tests and the README rely on.
    #[test]
    fn the_table_keeps_the_documented_answers() {
        let rows = [
            (
                Unavailable::Judge,
                403,
                "tool_call_blocked",
                "semantic_unavailable",
            ),
            (
                Unavailable::Service,
                403,
                "tool_call_blocked",
                "service_unavailable",
            ),
            (
                Unavailable::Store,
                503,
                "server_error",
                "state_store_unavailable",
            ),
            (
                Unavailable::UpstreamUnreachable,
                502,
                "upstream_error",
                "upstream_unreachable",
            ),
            (
                Unavailable::UpstreamTimeout,
                504,
                "upstream_error",
                "upstream_timeout",
            ),
            (
                Unavailable::UpstreamFailed,
                502,
                "upstream_error",
                "upstream_failed",
            ),
        ];
        for (what, status, error_type, code) in rows {
            let answer = what.failure_status();
            assert_eq!(
                (answer.status.as_u16(), answer.error_type, answer.code),
                (status, error_type, code),
                "{what:?}"
            );
        }
    }

    #[test]
    fn a_rejection_carries_the_row_and_its_violation_the_code() {
        let rejection = Unavailable::Store.rejection(vec![
            Unavailable::Store.violation(Check::Budget, "the store did not answer"),
        ]);
        assert_eq!(rejection.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(rejection.error_type, "server_error");
        assert_eq!(rejection.violations[0].check, Check::Budget);
        assert!(Unavailable::Store.reported_by(&rejection.violations[0]));
        assert!(!Unavailable::Judge.reported_by(&rejection.violations[0]));
    }
}
