//! Why a validator service gave no usable answer: the kinds the metrics count and the
//! failure table maps to a status, and the detail that goes to the log.

/// Why a service gave no usable answer, the `kind` label of `toolgate_service_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// No complete answer within `timeout_ms`.
    Timeout,
    /// The connection could not be made or broke.
    Transport,
    /// A status other than 2xx.
    Status,
    /// The answer's `error` was set.
    ServiceError,
    /// Not JSON, not an envelope, too large, or a patch toolgate cannot apply.
    InvalidAnswer,
    /// The breaker is open: the service was not called.
    BreakerOpen,
}

impl FailureKind {
    /// Every kind, for series that must exist before the first failure.
    pub const ALL: [FailureKind; 6] = [
        FailureKind::Timeout,
        FailureKind::Transport,
        FailureKind::Status,
        FailureKind::ServiceError,
        FailureKind::InvalidAnswer,
        FailureKind::BreakerOpen,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::Transport => "transport",
            FailureKind::Status => "status",
            FailureKind::ServiceError => "service_error",
            FailureKind::InvalidAnswer => "invalid_answer",
            FailureKind::BreakerOpen => "breaker_open",
        }
    }
}

/// A call without a usable answer; `detail` goes to the log, not to the client.
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: FailureKind,
    pub detail: String,
}

impl Failure {
    pub fn new(kind: FailureKind, detail: impl Into<String>) -> Self {
        Failure {
            kind,
            detail: detail.into(),
        }
    }
}
