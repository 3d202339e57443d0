//! The wire contract with a validator service, both ways.
//!
//! toolgate POSTs `{user, config, stage, format, declared_tools, tool_calls, context}`, built
//! from the views the vocabulary crate already parsed (bodies are never re-read here), and reads
//! `{error, decision, violations, patch}`. A set `error` (seed 002's convention) means the
//! service could not decide, which the fail mode handles like an outage.

use std::collections::BTreeMap;

use http::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use toolgate_plugin::header_rules::is_connection_or_framing;
use toolgate_plugin::tool_removal::{self, OnEmpty};
use toolgate_plugin::{
    Check, DeclaredTool, RequestEdit, ResponseEdit, ToolCall, ToolKey, ToolKind, Violation,
    WireFormat,
};

use crate::failure::{Failure, FailureKind};

/// Violations kept from one answer, and the longest message and code kept of each: a 403 stays
/// readable whatever a service sends.
const MAX_VIOLATIONS: usize = 100;
const MAX_MESSAGE_CHARS: usize = 500;
const MAX_CODE_CHARS: usize = 64;

/// What toolgate sends.
#[derive(Debug, Serialize)]
pub struct Envelope<'a> {
    /// The tenant's name, or null on routes without tenants.
    pub user: Option<&'a str>,
    /// The instance's config values.
    pub config: &'a Map<String, Value>,
    pub stage: &'static str,
    /// The exchange's wire format, null when the request could not be read.
    pub format: Option<WireFormat>,
    pub declared_tools: Vec<DeclaredToolView<'a>>,
    /// The calls in the instance's scope (`tools`); empty before the response exists.
    pub tool_calls: Vec<&'a ToolCall>,
    pub context: EnvelopeContext<'a>,
}

/// A declared tool as the service sees it: name, kind and the JSON Schema as the client wrote it.
#[derive(Debug, Serialize)]
pub struct DeclaredToolView<'a> {
    pub name: &'a str,
    pub kind: ToolKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<&'a RawValue>,
}

impl<'a> From<&'a DeclaredTool> for DeclaredToolView<'a> {
    fn from(tool: &'a DeclaredTool) -> Self {
        DeclaredToolView {
            name: &tool.name,
            kind: tool.kind,
            // Text read from a body is JSON; one a plugin built by hand is sent only if it is too.
            parameters: tool
                .schema_text()
                .and_then(|text| serde_json::from_str(text).ok()),
        }
    }
}

/// Facts about the exchange a check may want.
#[derive(Debug, Serialize)]
pub struct EnvelopeContext<'a> {
    pub request_id: &'a str,
    pub route: &'a str,
    pub model: Option<&'a str>,
    pub stream: bool,
    /// The text of the latest user turn, when the request has one.
    pub user_request: Option<String>,
    /// The model's reasoning summary (pre_response, when present).
    pub reasoning: Option<&'a str>,
    /// The groups the tenant holds (null without a tenant), so a service can decide on them.
    pub tenant_groups: Option<&'a [String]>,
    /// The tenant's access level, when it has one.
    pub access_level: Option<&'a str>,
    /// The conversation's workflow state as `tool_groups` settled it (null on a route without
    /// it): toolgate's state, not one the client claimed.
    pub workflow_state: Option<&'a str>,
}

/// What a service answers.
#[derive(Debug, Deserialize)]
pub struct Answer {
    #[serde(default)]
    error: Option<ServiceError>,
    #[serde(default)]
    decision: Option<Decision>,
    #[serde(default)]
    violations: Vec<AnswerViolation>,
    #[serde(default)]
    patch: Option<Patch>,
}

#[derive(Debug, Deserialize)]
struct ServiceError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    Deny,
    Modify,
}

#[derive(Debug, Deserialize)]
struct AnswerViolation {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    tool: Option<String>,
    #[serde(default)]
    choice: Option<u32>,
}

/// The changes a `modify` answer asks for. Unknown keys are refused: a change toolgate cannot
/// apply must not be dropped silently.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Patch {
    /// pre_request: declared tools to remove before the request goes upstream.
    #[serde(default)]
    remove_tools: Vec<String>,
    /// pre_request: headers to set on the request sent upstream.
    #[serde(default)]
    request_headers: BTreeMap<String, String>,
    /// Either stage: headers to set on the response sent to the client.
    #[serde(default)]
    response_headers: BTreeMap<String, String>,
}

impl Answer {
    /// Reads an answer body. A body that is not an answer, or an answer with `error` set, is a
    /// failure.
    pub fn read(body: &[u8]) -> Result<Answer, Failure> {
        let answer: Answer = serde_json::from_slice(body).map_err(|error| {
            Failure::new(
                FailureKind::InvalidAnswer,
                format!("the answer is not a service envelope: {error}"),
            )
        })?;
        if let Some(error) = &answer.error {
            return Err(Failure::new(
                FailureKind::ServiceError,
                format!(
                    "the service reported an error of type '{}': {}",
                    truncate(&without_control_characters(&error.kind), MAX_CODE_CHARS),
                    truncate(
                        &without_control_characters(&error.message),
                        MAX_MESSAGE_CHARS
                    )
                ),
            ));
        }
        if answer.decision.is_none() {
            return Err(Failure::new(
                FailureKind::InvalidAnswer,
                "the answer has neither `error` nor `decision`",
            ));
        }
        Ok(answer)
    }

    /// The service's decision (always set on an answer that [`Answer::read`] accepted).
    pub fn decision(&self) -> Decision {
        self.decision.unwrap_or(Decision::Allow)
    }

    /// The service's violations for a deny, each attached to the call it names by
    /// `(choice, tool_call_id)`, or to a tool the request declared by `tool`. A violation that
    /// names a call or tool the service was not sent, or whose code is not `[a-z0-9_.-]`, makes
    /// the answer invalid: what reaches the client is never the service's invention. A deny
    /// without violations gets one (`service_denied`), so the 403 always says who refused.
    pub fn violations(
        &self,
        service: &str,
        calls: &[&ToolCall],
        declared: &[DeclaredToolView<'_>],
    ) -> Result<Vec<Violation>, Failure> {
        let mut violations = Vec::new();
        for (index, found) in self.violations.iter().take(MAX_VIOLATIONS).enumerate() {
            let code = match found.code.as_deref().filter(|code| !code.is_empty()) {
                None => "service_denied".to_owned(),
                Some(code) if is_valid_code(code) => code.to_owned(),
                Some(code) => {
                    return Err(invalid_violation(
                        index,
                        format!(
                            "code '{}' is not made of [a-z0-9_.-] (at most {MAX_CODE_CHARS})",
                            truncate(&without_control_characters(code), MAX_CODE_CHARS)
                        ),
                    ));
                }
            };
            let message = format!(
                "{} (service '{service}')",
                truncate(
                    &without_control_characters(
                        found.message.as_deref().unwrap_or("denied by the service")
                    ),
                    MAX_MESSAGE_CHARS
                )
            );
            violations.push(attach(found, index, calls, declared, code, message)?);
        }
        if violations.is_empty() {
            violations.push(Violation::new(
                Check::Service,
                "service_denied",
                format!("service '{service}' denied the exchange"),
            ));
        }
        Ok(violations)
    }

    /// The edits of a `modify` answer at the stage whose edit type is `E`, on a request that
    /// declared `declared`. A patch that is empty, malformed, or asks for a change the stage
    /// cannot make is an invalid answer (the service is another program: what it sends is
    /// checked when it arrives, not when it is compiled).
    pub fn edits<E: StageEdit>(
        &self,
        declared: &[DeclaredToolView<'_>],
    ) -> Result<Vec<E>, Failure> {
        let invalid = |detail: String| Failure::new(FailureKind::InvalidAnswer, detail);
        let patch = self
            .patch
            .as_ref()
            .ok_or_else(|| invalid("a modify answer without a patch".to_owned()))?;
        let edits = E::from_patch(patch, declared).map_err(invalid)?;
        if edits.is_empty() {
            return Err(invalid(
                "a modify answer whose patch changes nothing".to_owned(),
            ));
        }
        Ok(edits)
    }
}

/// One violation, on what it names: a call by `tool_call_id` (in `choice` when given), a call
/// without an id by `choice`, a declared tool by `tool`, or the exchange when it names nothing.
fn attach(
    found: &AnswerViolation,
    index: usize,
    calls: &[&ToolCall],
    declared: &[DeclaredToolView<'_>],
    code: String,
    message: String,
) -> Result<Violation, Failure> {
    let names_tool = |call: &ToolCall| {
        found
            .tool
            .as_deref()
            .is_none_or(|tool| ToolKey::new(tool) == call.key())
    };
    match (found.tool_call_id.as_deref(), found.choice) {
        (Some(id), choice) => calls
            .iter()
            .find(|call| {
                call.id.as_deref() == Some(id)
                    && choice.is_none_or(|choice| choice == call.choice)
                    && names_tool(call)
            })
            .map(|call| Violation::on_call(Check::Service, code, call, message))
            .ok_or_else(|| {
                invalid_violation(
                    index,
                    format!(
                        "tool_call_id '{}' is not a call it was sent{}",
                        truncate(&without_control_characters(id), MAX_CODE_CHARS),
                        choice.map_or(String::new(), |choice| format!(" in choice {choice}"))
                    ),
                )
            }),
        (None, Some(choice)) => calls
            .iter()
            .find(|call| call.id.is_none() && call.choice == choice && names_tool(call))
            .map(|call| Violation::on_call(Check::Service, code, call, message))
            .ok_or_else(|| {
                invalid_violation(
                    index,
                    format!("choice {choice} has no call without an id that it was sent"),
                )
            }),
        (None, None) => match found.tool.as_deref() {
            None => Ok(Violation::new(Check::Service, code, message)),
            Some(tool) => {
                let key = ToolKey::new(tool);
                let known = declared
                    .iter()
                    .map(|tool| tool.name)
                    .chain(calls.iter().map(|call| call.name.as_str()))
                    .find(|name| ToolKey::new(name) == key);
                match known {
                    Some(name) => {
                        let mut violation = Violation::new(Check::Service, code, message);
                        violation.tool = Some(name.to_owned());
                        Ok(violation)
                    }
                    None => Err(invalid_violation(
                        index,
                        format!(
                            "tool '{}' is neither declared nor called in what it was sent",
                            truncate(&without_control_characters(tool), MAX_CODE_CHARS)
                        ),
                    )),
                }
            }
        },
    }
}

fn invalid_violation(index: usize, detail: String) -> Failure {
    Failure::new(
        FailureKind::InvalidAnswer,
        format!("violations[{index}]: {detail}"),
    )
}

/// A code is machine-readable: lower-case ASCII letters, digits, `_`, `.` and `-`, short.
fn is_valid_code(code: &str) -> bool {
    code.len() <= MAX_CODE_CHARS
        && code.bytes().all(|byte| {
            byte.is_ascii_lowercase() || byte.is_ascii_digit() || matches!(byte, b'_' | b'.' | b'-')
        })
}

/// `text` without control characters (newlines, escapes, …), which could forge log lines or
/// terminal output where a message is shown.
fn without_control_characters(text: &str) -> String {
    text.chars()
        .filter(|character| !character.is_control())
        .collect()
}

/// The edit type of one stage, and which parts of a patch it can carry.
pub trait StageEdit: Sized {
    /// The edits `patch` asks for, or why the stage cannot make them.
    fn from_patch(patch: &Patch, declared: &[DeclaredToolView<'_>]) -> Result<Vec<Self>, String>;
}

impl StageEdit for RequestEdit {
    fn from_patch(patch: &Patch, declared: &[DeclaredToolView<'_>]) -> Result<Vec<Self>, String> {
        let mut edits = Vec::new();
        if !patch.remove_tools.is_empty() {
            // The shared rule: removing every declared tool drops the tool fields, never
            // forwards `"tools": []`.
            let removed = declared_spellings(&patch.remove_tools, declared);
            let names = declared.iter().map(|tool| tool.name);
            edits.extend(tool_removal::removal(names, removed, OnEmpty::default()));
        }
        for (name, value) in &patch.request_headers {
            let (name, value) = header(name, value)?;
            edits.push(RequestEdit::SetRequestHeader(name, value));
        }
        for (name, value) in &patch.response_headers {
            let (name, value) = header(name, value)?;
            edits.push(RequestEdit::SetResponseHeader(name, value));
        }
        Ok(edits)
    }
}

impl StageEdit for ResponseEdit {
    fn from_patch(patch: &Patch, _declared: &[DeclaredToolView<'_>]) -> Result<Vec<Self>, String> {
        if !patch.remove_tools.is_empty() {
            return Err("patch.remove_tools applies only in pre_request".to_owned());
        }
        if !patch.request_headers.is_empty() {
            return Err("patch.request_headers applies only in pre_request".to_owned());
        }
        patch
            .response_headers
            .iter()
            .map(|(name, value)| {
                header(name, value)
                    .map(|(name, value)| ResponseEdit::SetResponseHeader(name, value))
            })
            .collect()
    }
}

/// A header a patch sets. Connection and framing headers are refused: the gateway frames the
/// bodies it sends, and a service's `content-length` would desync the client's connection.
fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), String> {
    let parsed_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
        format!(
            "patch names an invalid header '{}'",
            truncate(&without_control_characters(name), 64)
        )
    })?;
    if is_connection_or_framing(&parsed_name) {
        return Err(format!(
            "patch sets '{parsed_name}', a connection or framing header no service may set"
        ));
    }
    let parsed_value = HeaderValue::from_str(value)
        .map_err(|_| format!("patch sets header '{parsed_name}' to an invalid value"))?;
    Ok((parsed_name, parsed_value))
}

/// At most `limit` characters, marked with an ellipsis when cut.
pub fn truncate(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The declared tools a service's `remove_tools` names, as the request spells them. A service
/// names a tool by its identity (`delete_user` also means a declared `Delete_User `), but the
/// edit removes declared tools by their exact name, so each name is resolved to every declared
/// spelling with its key. A name no declared tool has is kept as given: removing it is a no-op.
fn declared_spellings(named: &[String], declared: &[DeclaredToolView<'_>]) -> Vec<String> {
    let keys: Vec<ToolKey> = named.iter().map(|name| ToolKey::new(name)).collect();
    let mut spellings: Vec<String> = declared
        .iter()
        .filter(|tool| keys.contains(&ToolKey::new(tool.name)))
        .map(|tool| tool.name.to_owned())
        .collect();
    spellings.extend(
        named
            .iter()
            .zip(&keys)
            .filter(|(_, key)| !declared.iter().any(|tool| ToolKey::new(tool.name) == **key))
            .map(|(name, _)| name.clone()),
    );
    spellings
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_plugin::testing::assert_contains;

    use super::*;

    fn read(value: Value) -> Result<Answer, Failure> {
        Answer::read(value.to_string().as_bytes())
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall::function(Some(id.to_owned()), name, "{}".to_owned())
    }

    #[test]
    fn garbage_and_errors_are_failures_with_their_kind() {
        assert_eq!(
            Answer::read(b"<html>oops</html>").err().map(|f| f.kind),
            Some(FailureKind::InvalidAnswer)
        );
        assert_eq!(
            read(json!({"violations": []})).err().map(|f| f.kind),
            Some(FailureKind::InvalidAnswer)
        );
        assert_eq!(
            read(json!({"decision": "maybe"})).err().map(|f| f.kind),
            Some(FailureKind::InvalidAnswer)
        );
        let failure = read(json!({"error": {"type": "overloaded", "message": "busy"},
            "decision": "allow"}))
        .expect_err("an error wins over a decision");
        assert_eq!(failure.kind, FailureKind::ServiceError);
        assert!(failure.detail.contains("overloaded"), "{}", failure.detail);
        assert!(read(json!({"error": null, "decision": "allow", "extra": 1})).is_ok());
    }

    #[test]
    fn deny_violations_land_on_their_calls() {
        let answer = read(json!({"decision": "deny", "violations": [
            {"code": "secret_in_arguments", "message": "an AWS key", "tool_call_id": "call_2"},
            {"message": "no code given"}]}))
        .expect("an answer");
        assert_eq!(answer.decision(), Decision::Deny);
        let (first, second) = (call("call_1", "search"), call("call_2", "send_email"));
        let found = answer
            .violations("dlp", &[&first, &second], &[])
            .expect("valid violations");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].check, Check::Service);
        assert_eq!(found[0].code, "secret_in_arguments");
        assert_eq!(found[0].tool.as_deref(), Some("send_email"));
        assert_eq!(found[0].choice, Some(0));
        assert_eq!(found[0].message, "an AWS key (service 'dlp')");
        assert_eq!(found[1].code, "service_denied");

        let bare = read(json!({"decision": "deny"})).expect("an answer");
        let found = bare.violations("dlp", &[], &[]).expect("valid");
        assert_eq!(found.len(), 1);
        assert_contains(&found[0].message, "'dlp' denied");
    }

    #[test]
    fn a_violation_naming_what_the_service_was_not_sent_is_an_invalid_answer() {
        let sent = call("call_1", "search");
        let tools = [DeclaredTool::function("search", None)];
        let declared: Vec<DeclaredToolView<'_>> = tools.iter().map(Into::into).collect();
        for violation in [
            json!({"code": "x", "tool_call_id": "call_invented", "tool": "delete_all"}),
            json!({"code": "x", "tool_call_id": "call_1", "choice": 3}),
            json!({"code": "x", "tool_call_id": "call_1", "tool": "other"}),
            json!({"code": "x", "choice": 0}),
            json!({"code": "x", "tool": "delete_all"}),
            json!({"code": "Secret Found"}),
            json!({"code": "a\nforged"}),
        ] {
            let answer =
                read(json!({"decision": "deny", "violations": [violation]})).expect("an answer");
            let outcome = answer.violations("dlp", &[&sent], &declared);
            assert_eq!(
                outcome.err().map(|failure| failure.kind),
                Some(FailureKind::InvalidAnswer),
                "{violation}"
            );
        }
        let by_tool = read(json!({"decision": "deny", "violations": [
            {"code": "risky.tool-v2", "tool": " SEARCH", "message": "line\none\u{1b}[31m"}]}))
        .expect("an answer");
        let found = by_tool
            .violations("dlp", &[], &declared)
            .expect("a declared tool");
        assert_eq!(found[0].tool.as_deref(), Some("search"));
        assert_eq!(found[0].code, "risky.tool-v2");
        assert_eq!(found[0].message, "lineone[31m (service 'dlp')");
    }

    #[test]
    fn connection_and_framing_headers_are_refused_in_patches() {
        for (key, name) in [
            ("response_headers", "content-length"),
            ("response_headers", "Transfer-Encoding"),
            ("response_headers", "connection"),
            ("request_headers", "host"),
            ("request_headers", "upgrade"),
        ] {
            let answer = read(json!({"decision": "modify", "patch": {key: {name: "1"}}}))
                .expect("an answer");
            let failure = answer
                .edits::<RequestEdit>(&[])
                .expect_err("a framing header");
            assert_eq!(failure.kind, FailureKind::InvalidAnswer, "{name}");
            assert!(failure.detail.contains("framing"), "{}", failure.detail);
        }
    }

    #[test]
    fn patches_map_to_edits_where_the_stage_allows_them() {
        let answer = read(json!({"decision": "modify", "patch": {
            "remove_tools": ["delete_user"], "request_headers": {"x-risk": "high"}}}))
        .expect("an answer");
        let edits = answer
            .edits::<RequestEdit>(&[])
            .expect("valid in pre_request");
        assert_eq!(
            edits[0],
            RequestEdit::RemoveDeclaredTools(vec!["delete_user".into()])
        );
        assert!(matches!(&edits[1], RequestEdit::SetRequestHeader(name, _) if name == "x-risk"));
        assert_eq!(
            answer.edits::<ResponseEdit>(&[]).err().map(|f| f.kind),
            Some(FailureKind::InvalidAnswer)
        );

        let headers = read(json!({"decision": "modify",
            "patch": {"response_headers": {"x-reviewed": "yes"}}}))
        .expect("an answer");
        assert_eq!(
            headers.edits::<ResponseEdit>(&[]).map(|e| e.len()).ok(),
            Some(1)
        );
        for patch in [
            json!(null),
            json!({}),
            json!({"arguments": []}),
            json!({"response_headers": {"bad header": "x"}}),
        ] {
            let answer = read(json!({"decision": "modify", "patch": patch}));
            let outcome = answer.and_then(|answer| answer.edits::<ResponseEdit>(&[]));
            assert_eq!(
                outcome.err().map(|f| f.kind),
                Some(FailureKind::InvalidAnswer),
                "{patch}"
            );
        }
    }

    /// The `pre_request` edits of an answer that removes `remove` from a request declaring
    /// the tools named `declared`.
    fn removal_edits(remove: &[&str], declared: &[&str]) -> Vec<RequestEdit> {
        let answer = read(json!({"decision": "modify", "patch": {"remove_tools": remove}}))
            .expect("an answer");
        let tools: Vec<DeclaredTool> = (declared.iter())
            .map(|name| DeclaredTool::function(*name, None))
            .collect();
        let declared: Vec<DeclaredToolView<'_>> = tools.iter().map(Into::into).collect();
        answer
            .edits::<RequestEdit>(&declared)
            .expect("valid in pre_request")
    }

    #[test]
    fn removing_every_declared_tool_drops_the_tool_fields() {
        let edits = removal_edits(&["delete_user", "SEARCH"], &["delete_user", "search"]);
        assert_eq!(edits, [RequestEdit::StripToolFields]);
    }

    #[test]
    fn a_tool_to_remove_is_resolved_to_its_declared_spelling() {
        let edits = removal_edits(
            &["delete_user", "not_declared"],
            &[" Delete_User", "search"],
        );
        assert_eq!(
            edits,
            [RequestEdit::RemoveDeclaredTools(vec![
                " Delete_User".into(),
                "not_declared".into()
            ])]
        );
    }

    #[test]
    fn long_texts_are_cut() {
        assert_eq!(truncate("abcdef", 3), "abc…");
        assert_eq!(truncate("abc", 3), "abc");
    }
}
