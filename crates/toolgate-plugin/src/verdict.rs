//! What a plugin answers: continue, block with violations, or modify the exchange — and the
//! edits each stage may ask for. A stage's verdict is typed by its edit, so an edit the stage
//! cannot make (replacing a call's arguments before the response exists) does not compile.

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde::Serialize;

/// A plugin's answer at one stage: `Verdict<RequestEdit>` at `pre_request`,
/// `Verdict<ResponseEdit>` at `pre_response`. An edit of the answer before it exists is a
/// type error, not a case the gateway has to ignore at run time:
///
/// ```compile_fail
/// use toolgate_plugin::{RequestEdit, ResponseEdit, Verdict};
/// let redact = ResponseEdit::ReplaceArguments {
///     choice: 0,
///     call_id: None,
///     arguments: "{}".into(),
/// };
/// let _at_pre_request: Verdict<RequestEdit> = Verdict::Modify(vec![redact]);
/// ```
#[derive(Debug, Clone, Default)]
pub enum Verdict<E> {
    /// Nothing to object to; the next plugin runs.
    #[default]
    Continue,
    /// Stop the exchange and answer the client with this rejection (unless the route observes).
    Block(Rejection),
    /// Change the exchange and continue; the gateway applies edits in the exchange's own format.
    Modify(Vec<E>),
}

/// Which check found a violation. Serialized as the `check` field of the 403 body, by its
/// name ([`Check::as_str`]). Non-exhaustive: the vocabulary grows, and a plugin crate names a
/// kind of its own with [`Check::Custom`] without waiting for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Check {
    /// The call names a tool the request did not declare.
    Membership,
    /// The call's arguments break the declared tool's JSON Schema.
    Schema,
    /// Arguments that are not valid JSON for a tool that declares a schema.
    Arguments,
    /// The semantic judge denied the call, or could not answer.
    Semantic,
    /// The tenant or the access levels do not permit the tool (seed 003).
    Permission,
    /// The tool is not in a group the request asked for, or the tenant holds (seed 000).
    Group,
    /// The tool is not available in the request's workflow state (seed 000).
    State,
    /// A call budget is spent, or could not be checked.
    Budget,
    /// A `tool_arguments` rule refused a value.
    Rule,
    /// A body that could not be parsed on a route that requires parsing (`strict`).
    Parse,
    /// A validator service (`[services.NAME]`) denied the exchange or could not answer.
    Service,
    /// A kind a plugin crate adds, serialized as this name. Pick a snake_case name none of the
    /// kinds above uses: clients tell kinds apart by the name alone.
    Custom(&'static str),
}

impl Check {
    /// The name a client reads in `check`, the audit line and the metrics' `check` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Check::Membership => "membership",
            Check::Schema => "schema",
            Check::Arguments => "arguments",
            Check::Semantic => "semantic",
            Check::Permission => "permission",
            Check::Group => "group",
            Check::State => "state",
            Check::Budget => "budget",
            Check::Rule => "rule",
            Check::Parse => "parse",
            Check::Service => "service",
            Check::Custom(name) => name,
        }
    }
}

/// A check is written as its bare name, so a custom kind reads like a built-in one
/// (`"check": "pii"`, not `{"custom": "pii"}`).
impl Serialize for Check {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// One failed check on one call (or on the exchange as a whole).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    /// The kind of check that failed.
    pub check: Check,
    /// A stable, machine-readable reason, e.g. `undeclared_tool`, `schema_violation`.
    pub code: String,
    /// The choice (or output) the call is in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choice: Option<u32>,
    /// The call's id; `None` for a legacy `function_call`, or a violation of the exchange.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The called tool's name as the model wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// JSON Pointer into the arguments (schema violations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_path: Option<String>,
    /// The JSON Schema keyword that failed (schema violations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keyword: Option<String>,
    /// What failed, for people; the envelope's `message` is the first violation's.
    pub message: String,
}

impl Violation {
    /// A violation not tied to any call.
    pub fn new(check: Check, code: impl Into<String>, message: impl Into<String>) -> Self {
        Violation {
            check,
            code: code.into(),
            choice: None,
            tool_call_id: None,
            tool: None,
            instance_path: None,
            keyword: None,
            message: message.into(),
        }
    }

    /// A violation about one tool call.
    pub fn on_call(
        check: Check,
        code: impl Into<String>,
        call: &crate::ToolCall,
        message: impl Into<String>,
    ) -> Self {
        Violation {
            choice: Some(call.choice),
            tool_call_id: call.id.clone(),
            tool: Some(call.name.clone()),
            ..Violation::new(check, code, message)
        }
    }
}

/// How the gateway answers a blocked exchange: status, error type, violations and extra headers.
/// The message and code of the envelope are derived from the first violation.
#[derive(Debug, Clone)]
pub struct Rejection {
    /// The HTTP status of the answer (403 for a guard's block).
    pub status: StatusCode,
    /// The envelope's `type`, e.g. `tool_call_blocked`.
    pub error_type: &'static str,
    /// What was found; the envelope's `message` and `code` are the first one's.
    pub violations: Vec<Violation>,
    /// Headers the answer carries besides the body's (`Retry-After` on a 429).
    pub headers: HeaderMap,
}

impl Rejection {
    /// 403 `tool_call_blocked`: the usual answer of a guardrail.
    pub fn forbidden(violations: Vec<Violation>) -> Self {
        Rejection {
            status: StatusCode::FORBIDDEN,
            error_type: "tool_call_blocked",
            violations,
            headers: HeaderMap::new(),
        }
    }

    /// The same rejection with another status and envelope `type` (a 429, a 503).
    pub fn with_status(mut self, status: StatusCode, error_type: &'static str) -> Self {
        self.status = status;
        self.error_type = error_type;
        self
    }

    /// The same rejection with one more header on the answer.
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.insert(name, value);
        self
    }
}

/// A change a plugin asks for at `pre_request`. The gateway applies body edits through the
/// exchange's format adapter, so the body stays in the client's format and untouched parts keep
/// their bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestEdit {
    /// Remove these declared tools from the request before it goes upstream. When every tool
    /// goes, the list is left empty (`tools: []`) and any `tool_choice` is dropped.
    RemoveDeclaredTools(Vec<String>),
    /// Remove the tool fields altogether (`tools`, legacy `functions`, `tool_choice`,
    /// `parallel_tool_calls`, …), for upstreams that refuse an empty tool list.
    StripToolFields,
    /// Set a header on the request sent upstream.
    SetRequestHeader(HeaderName, HeaderValue),
    /// Set a header on the response sent to the client (known before the upstream answers,
    /// e.g. the tools a request was left with).
    SetResponseHeader(HeaderName, HeaderValue),
    /// Add a field to the exchange's audit line (e.g. the groups a request asked for). Kept in
    /// observe mode too: it records what was seen, it changes nothing.
    Annotate(String, serde_json::Value),
}

/// A change a plugin asks for at `pre_response`, once the answer exists. The request has gone
/// upstream by then, so nothing here can touch it.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseEdit {
    /// Replace one call's arguments in the response (e.g. a redacted value).
    ReplaceArguments {
        /// The choice (or output) the call is in.
        choice: u32,
        /// The call's id, `None` for a legacy `function_call` that has none.
        call_id: Option<String>,
        /// The new arguments, a JSON string as the format carries it.
        arguments: String,
    },
    /// Set a header on the response sent to the client.
    SetResponseHeader(HeaderName, HeaderValue),
    /// Add a field to the exchange's audit line. Kept in observe mode too, as at `pre_request`.
    Annotate(String, serde_json::Value),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_check_keeps_its_json_name() {
        let names = [
            (Check::Membership, "membership"),
            (Check::Schema, "schema"),
            (Check::Arguments, "arguments"),
            (Check::Semantic, "semantic"),
            (Check::Permission, "permission"),
            (Check::Group, "group"),
            (Check::State, "state"),
            (Check::Budget, "budget"),
            (Check::Rule, "rule"),
            (Check::Parse, "parse"),
            (Check::Service, "service"),
        ];
        for (check, name) in names {
            assert_eq!(serde_json::to_value(check).ok(), Some(name.into()));
            assert_eq!(check.as_str(), name);
        }
    }

    /// What a plugin crate writes: its own kind, next to the built-in ones, with no change
    /// to this crate.
    const PII: Check = Check::Custom("pii");

    #[test]
    fn a_plugin_crate_adds_its_own_check_kind() {
        let violation = Violation::new(PII, "email_in_arguments", "an e-mail address");
        let json = serde_json::to_value(&violation).expect("a violation serializes");
        assert_eq!(json["check"], "pii");
        assert_eq!(json["code"], "email_in_arguments");
        assert_eq!(PII.as_str(), "pii");
        assert_ne!(PII, Check::Rule);
    }
}
