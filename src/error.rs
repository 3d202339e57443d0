//! The gateway's own answers: one error type that records who is to blame, one function that
//! turns it into a status, and the OpenAI error envelope every answer toolgate makes itself uses
//! (so every OpenAI SDK raises its usual exception with a readable message).

use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::json;
use toolgate_plugin::{Check, ErrorFacts, Rejection, Unavailable, Violation, WireFormat};

use crate::body::ProxyBody;
use crate::upstream::UpstreamError;

/// Who caused a failure; decides the status class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    Client,
    Upstream,
    Internal,
}

impl Blame {
    /// The envelope's `type`, in OpenAI's vocabulary where it has a word for it.
    fn error_type(self) -> &'static str {
        match self {
            Blame::Client => "invalid_request_error",
            Blame::Upstream => "upstream_error",
            Blame::Internal => "server_error",
        }
    }
}

/// A failure to proxy an exchange (a guardrail's block is a [`Rejection`], not an error).
#[derive(Debug, Clone)]
pub struct GatewayError {
    pub blame: Blame,
    pub status: StatusCode,
    /// The envelope's `type`: the failure table's for an upstream that cannot answer, else
    /// the blame's.
    error_type: &'static str,
    /// A stable code for programs, e.g. `upstream_timeout`.
    pub code: &'static str,
    pub message: String,
}

impl GatewayError {
    fn new(
        blame: Blame,
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        GatewayError {
            blame,
            status,
            error_type: blame.error_type(),
            code,
            message: message.into(),
        }
    }

    /// An upstream that cannot answer, answered as the failure table says.
    fn upstream(what: Unavailable, message: impl Into<String>) -> Self {
        let answer = what.failure_status();
        GatewayError {
            blame: Blame::Upstream,
            status: answer.status,
            error_type: answer.error_type,
            code: answer.code,
            message: message.into(),
        }
    }

    pub fn route_not_found(path: &str) -> Self {
        Self::new(
            Blame::Client,
            StatusCode::NOT_FOUND,
            "route_not_found",
            format!("no route for path '{path}'"),
        )
    }

    /// A request path toolgate will not guess the reading of ([`crate::request_path`]).
    pub fn path_refused(refusal: &crate::request_path::PathRefusal) -> Self {
        Self::new(
            Blame::Client,
            StatusCode::BAD_REQUEST,
            "invalid_path",
            format!("{refusal}; send the path with those characters written plainly"),
        )
    }

    pub fn request_too_large(limit: usize) -> Self {
        Self::new(
            Blame::Client,
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            format!("the request body exceeds the gateway's limit of {limit} bytes"),
        )
    }

    /// A client whose request body did not arrive in time: silent too long, or trickled past
    /// the whole body's deadline.
    pub fn request_timeout(message: impl Into<String>) -> Self {
        Self::new(
            Blame::Client,
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            message,
        )
    }

    /// An exchange still running when the shutdown grace ran out: the client may retry on
    /// another replica.
    pub fn shutting_down() -> Self {
        Self::new(
            Blame::Internal,
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the gateway is shutting down and could not finish this exchange in its grace period; retry",
        )
    }

    /// A route that requires a tenant's key got none, one no tenant holds, or a JWT that does
    /// not verify (the code says why: `token_expired`, `bad_signature`, `wrong_audience`, …).
    pub fn unauthenticated(failure: crate::tenants::AuthFailure) -> Self {
        let (code, message) = match failure {
            crate::tenants::AuthFailure::MissingKey => (
                "missing_api_key",
                "this route requires a tenant API key (Authorization: Bearer <key>)",
            ),
            crate::tenants::AuthFailure::UnknownKey => (
                "invalid_api_key",
                "the API key does not belong to any tenant",
            ),
            crate::tenants::AuthFailure::Token(rejection) => {
                (rejection.code(), rejection.message())
            }
        };
        Self::new(Blame::Client, StatusCode::UNAUTHORIZED, code, message)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(
            Blame::Client,
            StatusCode::BAD_REQUEST,
            "invalid_request",
            message,
        )
    }

    /// A request whose `toolgate` object is not one toolgate can read (not an object, a wrong
    /// type, an unknown key).
    pub fn invalid_directive(message: impl Into<String>) -> Self {
        Self::new(
            Blame::Client,
            StatusCode::BAD_REQUEST,
            "invalid_directive",
            message,
        )
    }

    /// A guarded request whose JSON repeats a key the checks read: refused, because the
    /// upstream might read the other copy than the one checked.
    pub fn ambiguous_request(error: &toolgate_plugin::ParseError) -> Self {
        Self::new(
            Blame::Client,
            StatusCode::BAD_REQUEST,
            "ambiguous_request",
            format!("the request repeats a key, so it cannot be checked unambiguously: {error}"),
        )
    }

    /// A Responses `background: true` request on a guarded route: its answer would be fetched
    /// later by id, where the guard cannot hold it against this request's declared tools.
    pub fn background_refused() -> Self {
        Self::new(
            Blame::Client,
            StatusCode::BAD_REQUEST,
            "background_not_supported",
            "background responses are not supported on a guarded route: their answer is fetched later by id, out of the guard's sight; send the request without \"background\"".to_owned(),
        )
    }

    /// The block of a guarded answer that cannot be read unambiguously: a 403 like every block
    /// of the guard (an SDK raises it rather than retrying, as it would a 5xx), audited and
    /// counted with its `parse` violation.
    pub fn unreadable_response(error: &toolgate_plugin::ParseError) -> Rejection {
        let (code, message) = match error.kind() {
            toolgate_plugin::ParseErrorKind::Ambiguous => (
                "ambiguous_response",
                format!(
                    "the upstream answer repeats a key, so it cannot be checked unambiguously: {error}"
                ),
            ),
            _ => (
                "unparsable_response",
                format!("the upstream answer cannot be read unambiguously: {error}"),
            ),
        };
        Rejection::forbidden(vec![Violation::new(Check::Parse, code, message)])
    }

    pub fn response_too_large(limit: usize) -> Self {
        Self::new(
            Blame::Upstream,
            StatusCode::BAD_GATEWAY,
            "upstream_response_too_large",
            format!("the upstream response exceeds the gateway's limit of {limit} bytes"),
        )
    }

    /// The upstream's connection broke, or its answer ended before it was whole.
    pub fn upstream_failed(message: impl Into<String>) -> Self {
        Self::upstream(Unavailable::UpstreamFailed, message)
    }

    /// The upstream did not answer in time; `what` says which part was late.
    pub fn upstream_timeout(what: &str) -> Self {
        Self::upstream(
            Unavailable::UpstreamTimeout,
            format!("the upstream did not answer in time ({what})"),
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            Blame::Internal,
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            message,
        )
    }

    pub fn report<'a>(&'a self, request_id: &'a str) -> ErrorReport<'a> {
        ErrorReport {
            status: self.status,
            error_type: self.error_type,
            code: self.code,
            message: self.message.clone(),
            request_id,
            violations: &[],
            headers: None,
        }
    }
}

impl std::fmt::Display for GatewayError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.message)
    }
}

/// A body ended by toolgate itself (a shutdown) fails with the gateway's reason.
impl std::error::Error for GatewayError {}

impl From<UpstreamError> for GatewayError {
    fn from(error: UpstreamError) -> Self {
        match error {
            UpstreamError::Unreachable(reason) => Self::upstream(
                Unavailable::UpstreamUnreachable,
                format!("the upstream could not be reached: {reason}"),
            ),
            UpstreamError::Timeout => GatewayError::upstream_timeout("no response head"),
            UpstreamError::Failed(reason) => {
                GatewayError::upstream_failed(format!("the upstream connection failed: {reason}"))
            }
        }
    }
}

/// What one of toolgate's own answers says, before it is shaped for the client's format.
#[derive(Debug, Clone)]
pub struct ErrorReport<'a> {
    pub status: StatusCode,
    /// toolgate's error type, e.g. `tool_call_blocked` (OpenAI's `type`).
    pub error_type: &'a str,
    /// A stable code for programs, e.g. `undeclared_tool`.
    pub code: &'a str,
    pub message: String,
    pub request_id: &'a str,
    pub violations: &'a [Violation],
    /// Headers the answer carries besides the body's (`Retry-After` on a 429).
    pub headers: Option<&'a http::HeaderMap>,
}

impl ErrorReport<'_> {
    /// The report of a rejection: message and code from its first violation.
    pub fn of_rejection<'a>(rejection: &'a Rejection, request_id: &'a str) -> ErrorReport<'a> {
        let first = rejection.violations.first();
        let detail = first.map_or("a guardrail refused the exchange", |violation| {
            violation.message.as_str()
        });
        let mut message = if rejection.status == StatusCode::FORBIDDEN {
            format!("tool call blocked: {detail}")
        } else {
            detail.to_owned()
        };
        if rejection.violations.len() > 1 {
            message.push_str(&format!(" (and {} more)", rejection.violations.len() - 1));
        }
        ErrorReport {
            status: rejection.status,
            error_type: rejection.error_type,
            code: first.map_or("blocked", |violation| violation.code.as_str()),
            message,
            request_id,
            violations: &rejection.violations,
            headers: Some(&rejection.headers),
        }
    }

    /// The body in the shape of `format`'s clients (its adapter's): OpenAI clients get
    /// `{"error": {message, type, param, code}}`, Anthropic clients `{"type": "error", "error":
    /// {type, message}}` with the error type their SDKs map to the status. All carry toolgate's
    /// `code`, `request_id` and `violations` inside `error`.
    pub fn body(&self, format: WireFormat) -> serde_json::Value {
        let violations = (!self.violations.is_empty()).then(|| json!(self.violations));
        format.error_body(&self.facts(violations.as_ref()))
    }

    fn facts<'a>(&'a self, violations: Option<&'a serde_json::Value>) -> ErrorFacts<'a> {
        ErrorFacts {
            status: self.status.as_u16(),
            error_type: self.error_type,
            code: self.code,
            message: &self.message,
            request_id: self.request_id,
            violations,
        }
    }

    pub fn response(&self, format: WireFormat) -> Response<ProxyBody> {
        let mut response = crate::body::json(self.status, self.body(format).to_string());
        for (name, value) in self.headers.into_iter().flatten() {
            response.headers_mut().insert(name.clone(), value.clone());
        }
        response
    }

    /// The SSE event that ends a stream whose head was already sent, as each format's clients
    /// expect an error mid-stream (its adapter's `error_event`: chat completions
    /// `data: {"error": …}`, Anthropic an `error` event, the Responses API an `error` event
    /// numbered after the `sequence_number` events relayed before it).
    pub fn sse_frame(&self, format: WireFormat, sequence_number: u64) -> Bytes {
        // Some SDKs keep only an error event's `code`, `message`, `param` and sequence number
        // (the Vercel AI SDK's Responses provider): the message names every violation too.
        let report = ErrorReport {
            message: self.message_with_violations(),
            headers: None,
            ..*self
        };
        report.event(format, sequence_number)
    }

    /// The message followed by each violation in a few words: `[check code tool (call id)
    /// at /path; …]`.
    fn message_with_violations(&self) -> String {
        if self.violations.is_empty() {
            return self.message.clone();
        }
        let listed: Vec<String> = self
            .violations
            .iter()
            .map(|violation| {
                let mut words = format!("{} {}", violation.check.as_str(), violation.code);
                if let Some(tool) = &violation.tool {
                    words.push_str(&format!(" {tool}"));
                }
                if let Some(id) = &violation.tool_call_id {
                    words.push_str(&format!(" ({id})"));
                }
                if let Some(path) = violation.instance_path.as_deref().filter(|p| !p.is_empty()) {
                    words.push_str(&format!(" at {path}"));
                }
                words
            })
            .collect();
        format!("{} [{}]", self.message, listed.join("; "))
    }

    /// The error event of `format` with this report as it is.
    fn event(&self, format: WireFormat, sequence_number: u64) -> Bytes {
        let violations = (!self.violations.is_empty()).then(|| json!(self.violations));
        format.error_event(&self.facts(violations.as_ref()), sequence_number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_violations() -> Rejection {
        Rejection::forbidden(vec![
            Violation::new(
                Check::Membership,
                "undeclared_tool",
                "'delete_user' is not a declared tool",
            ),
            Violation::new(Check::Schema, "schema_violation", "missing 'to'"),
        ])
    }

    #[test]
    fn a_rejection_reads_like_the_contract() {
        let rejection = two_violations();
        let body = ErrorReport::of_rejection(&rejection, "req-1").body(WireFormat::ChatCompletions);
        assert_eq!(
            body["error"]["message"],
            "tool call blocked: 'delete_user' is not a declared tool (and 1 more)"
        );
        assert_eq!(body["error"]["type"], "tool_call_blocked");
        assert_eq!(body["error"]["code"], "undeclared_tool");
        assert_eq!(body["error"]["request_id"], "req-1");
        assert_eq!(body["error"]["violations"][1]["check"], "schema");
    }

    #[test]
    fn anthropic_clients_get_anthropic_error_types() {
        let rejection = two_violations();
        let body =
            ErrorReport::of_rejection(&rejection, "req-2").body(WireFormat::AnthropicMessages);
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "permission_error");
        assert_eq!(body["error"]["code"], "undeclared_tool");
        assert_eq!(
            body["error"]["violations"][0]["tool"],
            serde_json::Value::Null
        );
        let timeout = GatewayError::from(UpstreamError::Timeout);
        assert_eq!(
            timeout.report("r").body(WireFormat::AnthropicMessages)["error"]["type"],
            "api_error"
        );
        let missing = GatewayError::route_not_found("/x");
        assert_eq!(
            missing.report("r").body(WireFormat::AnthropicMessages)["error"]["type"],
            "not_found_error"
        );
    }

    #[test]
    fn each_format_gets_its_own_error_event_mid_stream() {
        let rejection = two_violations();
        let report = ErrorReport::of_rejection(&rejection, "req-3");
        let chat = report.sse_frame(WireFormat::ChatCompletions, 0);
        assert!(chat.starts_with(b"data: {\"error\""));
        let responses =
            String::from_utf8_lossy(&report.sse_frame(WireFormat::Responses, 7)).into_owned();
        assert!(
            responses.starts_with("event: error\ndata: {"),
            "{responses}"
        );
        let event: serde_json::Value = serde_json::from_str(
            responses
                .trim()
                .strip_prefix("event: error\ndata: ")
                .expect("one data line"),
        )
        .expect("JSON");
        assert_eq!(event["type"], "error");
        assert_eq!(event["sequence_number"], 7);
        assert_eq!(event["code"], "undeclared_tool");
        assert_eq!(event["error"]["code"], "undeclared_tool");
        assert_eq!(event["error"]["type"], "tool_call_blocked");
        assert_eq!(event["error"]["violations"][0]["check"], "membership");
        let anthropic =
            String::from_utf8_lossy(&report.sse_frame(WireFormat::AnthropicMessages, 0))
                .into_owned();
        assert!(anthropic.contains("\"permission_error\""), "{anthropic}");
    }

    #[test]
    fn gateway_errors_map_to_their_status() {
        assert_eq!(
            GatewayError::from(UpstreamError::Timeout).status,
            StatusCode::GATEWAY_TIMEOUT
        );
        assert_eq!(
            GatewayError::from(UpstreamError::Unreachable("refused".into())).status,
            StatusCode::BAD_GATEWAY
        );
        assert_eq!(
            GatewayError::request_too_large(1).status,
            StatusCode::PAYLOAD_TOO_LARGE
        );
        assert_eq!(
            GatewayError::route_not_found("/x").status,
            StatusCode::NOT_FOUND
        );
    }
}
