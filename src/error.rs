//! The gateway's own answers: one error type that records who is to blame, one function that
//! turns it into a status, and the OpenAI error envelope every answer toolgate makes itself uses
//! (so every OpenAI SDK raises its usual exception with a readable message).

use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};
use serde_json::json;
use toolgate_plugin::{Rejection, Violation};

use crate::body::{ProxyBody, full};
use crate::upstream::UpstreamError;

/// Who caused a failure; decides the status class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blame {
    Client,
    Upstream,
    Internal,
}

/// A failure to proxy an exchange (a guardrail's block is a [`Rejection`], not an error).
#[derive(Debug, Clone)]
pub struct GatewayError {
    pub blame: Blame,
    pub status: StatusCode,
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
            code,
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

    pub fn request_too_large(limit: usize) -> Self {
        Self::new(
            Blame::Client,
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            format!("the request body exceeds the gateway's limit of {limit} bytes"),
        )
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(
            Blame::Client,
            StatusCode::BAD_REQUEST,
            "invalid_request",
            message,
        )
    }

    pub fn response_too_large(limit: usize) -> Self {
        Self::new(
            Blame::Upstream,
            StatusCode::BAD_GATEWAY,
            "upstream_response_too_large",
            format!("the upstream response exceeds the gateway's limit of {limit} bytes"),
        )
    }

    pub fn upstream_failed(message: impl Into<String>) -> Self {
        Self::new(
            Blame::Upstream,
            StatusCode::BAD_GATEWAY,
            "upstream_failed",
            message,
        )
    }

    pub fn upstream_timeout(what: &str) -> Self {
        Self::new(
            Blame::Upstream,
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
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

    /// The envelope's `type`, in OpenAI's vocabulary where it has a word for it.
    fn error_type(&self) -> &'static str {
        match self.blame {
            Blame::Client => "invalid_request_error",
            Blame::Upstream => "upstream_error",
            Blame::Internal => "server_error",
        }
    }

    pub fn into_response(self, request_id: &str) -> Response<ProxyBody> {
        json_response(self.status, &self.envelope(request_id))
    }

    pub fn envelope(&self, request_id: &str) -> serde_json::Value {
        envelope(&self.message, self.error_type(), self.code, request_id, &[])
    }

    /// The SSE frame that ends a stream whose head was already sent.
    pub fn sse_frame(&self, request_id: &str) -> bytes::Bytes {
        sse_frame(&self.envelope(request_id))
    }
}

impl From<UpstreamError> for GatewayError {
    fn from(error: UpstreamError) -> Self {
        match error {
            UpstreamError::Unreachable(reason) => Self::new(
                Blame::Upstream,
                StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                format!("the upstream could not be reached: {reason}"),
            ),
            UpstreamError::Timeout => GatewayError::upstream_timeout("no response head"),
            UpstreamError::Failed(reason) => {
                GatewayError::upstream_failed(format!("the upstream connection failed: {reason}"))
            }
        }
    }
}

/// The OpenAI error envelope, with toolgate's `request_id` and, for blocks, its `violations`.
pub fn envelope(
    message: &str,
    error_type: &str,
    code: &str,
    request_id: &str,
    violations: &[Violation],
) -> serde_json::Value {
    let mut error = json!({
        "message": message,
        "type": error_type,
        "param": null,
        "code": code,
        "request_id": request_id,
    });
    if !violations.is_empty() {
        error["violations"] = json!(violations);
    }
    json!({ "error": error })
}

/// The envelope of a rejection: message and code from its first violation.
pub fn rejection_envelope(rejection: &Rejection, request_id: &str) -> serde_json::Value {
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
    let code = first.map_or("blocked", |violation| violation.code.as_str());
    envelope(
        &message,
        rejection.error_type,
        code,
        request_id,
        &rejection.violations,
    )
}

pub fn rejection_response(rejection: &Rejection, request_id: &str) -> Response<ProxyBody> {
    let mut response = json_response(rejection.status, &rejection_envelope(rejection, request_id));
    for (name, value) in &rejection.headers {
        response.headers_mut().insert(name.clone(), value.clone());
    }
    response
}

/// The SSE frame that ends a stream whose head was already sent when a block happened.
pub fn rejection_sse_frame(rejection: &Rejection, request_id: &str) -> bytes::Bytes {
    sse_frame(&rejection_envelope(rejection, request_id))
}

fn sse_frame(envelope: &serde_json::Value) -> bytes::Bytes {
    bytes::Bytes::from(format!("data: {envelope}\n\n"))
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> Response<ProxyBody> {
    let mut response = Response::new(full(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_plugin::Check;

    #[test]
    fn a_rejection_reads_like_the_contract() {
        let rejection = Rejection::forbidden(vec![
            Violation::new(
                Check::Membership,
                "undeclared_tool",
                "'delete_user' is not a declared tool",
            ),
            Violation::new(Check::Schema, "schema_violation", "missing 'to'"),
        ]);
        let body = rejection_envelope(&rejection, "req-1");
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
