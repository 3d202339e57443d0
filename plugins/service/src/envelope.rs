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
                    truncate(&error.kind, MAX_CODE_CHARS),
                    truncate(&error.message, MAX_MESSAGE_CHARS)
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

    /// The service's violations for a deny, each on its call when it names one; a deny without
    /// violations gets one (`service_denied`), so the 403 always says who refused.
    pub fn violations(&self, service: &str, calls: &[&ToolCall]) -> Vec<Violation> {
        let mut violations: Vec<Violation> = self
            .violations
            .iter()
            .take(MAX_VIOLATIONS)
            .map(|found| {
                let code = found
                    .code
                    .as_deref()
                    .filter(|code| !code.is_empty())
                    .map_or_else(
                        || "service_denied".to_owned(),
                        |code| truncate(code, MAX_CODE_CHARS),
                    );
                let message = format!(
                    "{} (service '{service}')",
                    truncate(
                        found.message.as_deref().unwrap_or("denied by the service"),
                        MAX_MESSAGE_CHARS
                    )
                );
                let call = found
                    .tool_call_id
                    .as_deref()
                    .and_then(|id| calls.iter().find(|call| call.id.as_deref() == Some(id)));
                let mut violation = match call {
                    Some(call) => Violation::on_call(Check::Service, code, call, message),
                    None => Violation::new(Check::Service, code, message),
                };
                if call.is_none() {
                    violation.tool_call_id = found.tool_call_id.clone();
                    violation.tool = found.tool.clone();
                    violation.choice = found.choice;
                }
                violation
            })
            .collect();
        if violations.is_empty() {
            violations.push(Violation::new(
                Check::Service,
                "service_denied",
                format!("service '{service}' denied the exchange"),
            ));
        }
        violations
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

/// The edit type of one stage, and which parts of a patch it can carry.
pub trait StageEdit: Sized {
    /// The edits `patch` asks for, or why the stage cannot make them.
    fn from_patch(patch: &Patch, declared: &[DeclaredToolView<'_>]) -> Result<Vec<Self>, String>;
}

impl StageEdit for RequestEdit {
    fn from_patch(patch: &Patch, declared: &[DeclaredToolView<'_>]) -> Result<Vec<Self>, String> {
        let mut edits = Vec::new();
        if !patch.remove_tools.is_empty() {
            edits.push(RequestEdit::RemoveDeclaredTools(declared_spellings(
                &patch.remove_tools,
                declared,
            )));
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

fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), String> {
    let parsed_name = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| format!("patch names an invalid header '{}'", truncate(name, 64)))?;
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

    use super::*;

    fn read(value: Value) -> Result<Answer, Failure> {
        Answer::read(value.to_string().as_bytes())
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            choice: 0,
            id: Some(id.to_owned()),
            name: name.to_owned(),
            kind: ToolKind::Function,
            arguments: "{}".to_owned(),
        }
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
        let found = answer.violations("dlp", &[&first, &second]);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].check, Check::Service);
        assert_eq!(found[0].code, "secret_in_arguments");
        assert_eq!(found[0].tool.as_deref(), Some("send_email"));
        assert_eq!(found[0].choice, Some(0));
        assert_eq!(found[0].message, "an AWS key (service 'dlp')");
        assert_eq!(found[1].code, "service_denied");

        let bare = read(json!({"decision": "deny"})).expect("an answer");
        let found = bare.violations("dlp", &[]);
        assert_eq!(found.len(), 1);
        assert!(
            found[0].message.contains("'dlp' denied"),
            "{}",
            found[0].message
        );
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

    #[test]
    fn a_tool_to_remove_is_resolved_to_its_declared_spelling() {
        let answer = read(json!({"decision": "modify", "patch": {
            "remove_tools": ["delete_user", "not_declared"]}}))
        .expect("an answer");
        let tools = [
            DeclaredTool::function(" Delete_User", None),
            DeclaredTool::function("search", None),
        ];
        let declared: Vec<DeclaredToolView<'_>> = tools.iter().map(Into::into).collect();
        let edits = answer
            .edits::<RequestEdit>(&declared)
            .expect("valid in pre_request");
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
