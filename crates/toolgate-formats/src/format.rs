//! Wire-format adapters: the one place where request and response bodies are parsed into
//! declared tools and tool calls, and where edits are written back in the body's own format.
//!
//! Parsing types only what the checks use (tools, calls, the stream flag, the reasoning summary)
//! and skips the rest, so the cost is one scan of the body. Edits rewrite only the fields they
//! touch; every other top-level field keeps its original bytes.

use std::sync::Arc;

use bytes::Bytes;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::directives::{DIRECTIVES_FIELD, Directives};
use crate::edits::Edit;
use crate::raw_object::RawObject;
use crate::tool::{DeclaredTool, HistoryCall, ToolCall};

/// The API shape of an LLM exchange. Everything a format means to toolgate is its adapter (the
/// crate's `Adapter` trait), in the format's own folder; one registry maps a `WireFormat` to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WireFormat {
    /// OpenAI `/v1/chat/completions` (and every server that speaks it).
    ChatCompletions,
    /// OpenAI `/v1/responses`.
    Responses,
    /// Anthropic `/v1/messages`.
    AnthropicMessages,
    /// Google Gemini `models/{model}:generateContent` (and `:streamGenerateContent`).
    Gemini,
}

/// toolgate's own error, before a format shapes it for its clients (each format's adapter
/// does, so that their SDKs raise the right exception).
#[derive(Debug, Clone, Copy)]
pub struct ErrorFacts<'a> {
    /// The answer's status (Anthropic's error type follows it).
    pub status: u16,
    /// The OpenAI-style error type (`tool_call_blocked`, `invalid_request_error`, …).
    pub error_type: &'a str,
    /// toolgate's code for what happened (`unparsable_response`, …).
    pub code: &'a str,
    /// What a person reads.
    pub message: &'a str,
    /// The exchange's id, as `x-request-id` and the audit line say it.
    pub request_id: &'a str,
    /// The violations, as JSON; `None` when there are none.
    pub violations: Option<&'a serde_json::Value>,
}

impl ErrorFacts<'_> {
    /// Adds the violations, when there are, to a format's error object: every format carries
    /// them there under the same key, where toolgate's clients look for them.
    pub(crate) fn add_violations(&self, error: &mut serde_json::Value) {
        if let Some(violations) = self.violations {
            error["violations"] = violations.clone();
        }
    }
}

/// Where a format's API answers generations (where a model's calls come back): the path
/// segments after `/v1` that lead there, and those right after them that lead elsewhere.
#[derive(Debug, Clone, Copy)]
pub struct GenerationEndpoint {
    /// The segments after `/v1` (`["chat", "completions"]`); what follows them is the
    /// endpoint's too (a stored completion, a response by id, its cancel).
    pub segments: &'static [&'static str],
    /// Segments right after `segments` that answer no call (token counts, batches).
    pub except: &'static [&'static str],
    /// The endpoint's paths as the API documents them (`{id}` for a stored answer), checked on
    /// every configuration even without a route of their own.
    pub documented: &'static [&'static str],
}

impl GenerationEndpoint {
    /// Whether one of `endpoints` is at `path`: the path has a `/v1` segment (a prefix before
    /// it is a provider's base URL, `/openai/v1/…`), then an endpoint's segments, and not one
    /// of its exceptions right after them. Letters compare in either case, as the router
    /// compares them; read without a copy, as every exchange asks.
    pub(crate) fn any_serves(endpoints: &[GenerationEndpoint], path: &str) -> bool {
        // Split as bytes: `str::split`'s searcher costs more to set up than these few short
        // segments take to walk, and every answer read asks.
        let mut segments =
            (path.as_bytes().split(|byte| *byte == b'/')).filter(|segment| !segment.is_empty());
        if !segments.any(|segment| segment.eq_ignore_ascii_case(b"v1")) {
            return false;
        }
        // Every endpoint is told apart within the three segments after `/v1`.
        let after_version = [segments.next(), segments.next(), segments.next()];
        endpoints.iter().any(|endpoint| {
            let count = endpoint.segments.len();
            let leads_there = (endpoint.segments.iter().enumerate()).all(|(index, word)| {
                (after_version.get(index).copied().flatten())
                    .is_some_and(|segment| segment.eq_ignore_ascii_case(word.as_bytes()))
            });
            let elsewhere = (after_version.get(count).copied().flatten()).is_some_and(|next| {
                (endpoint.except.iter()).any(|word| next.eq_ignore_ascii_case(word.as_bytes()))
            });
            count > 0 && leads_there && !elsewhere
        })
    }
}

/// Whether a path ends with `suffix` (`/chat/completions`), a trailing `/` aside. Letters in
/// either case: a router that matched `/V1/Chat/Completions` to a route must read its body in
/// the format the upstream serves there.
pub(crate) fn path_ends_with(path: &str, suffix: &str) -> bool {
    let path = path.trim_end_matches('/').as_bytes();
    let suffix = suffix.as_bytes();
    path.len() >= suffix.len() && path[path.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

/// A call's arguments from the JSON text of an object a format carries them as (Anthropic's
/// `input`, Gemini's `args`): valid JSON loses its insignificant whitespace (keys, order,
/// numbers and escapes kept), so compact streamed fragments and a pretty-printed body give the
/// same text; anything else stays as it is, for the arguments check to flag.
pub(crate) fn compact_json_text(input: &str) -> String {
    if serde_json::from_str::<serde::de::IgnoredAny>(input).is_err() {
        return input.to_owned();
    }
    let mut compact = String::with_capacity(input.len());
    let (mut in_string, mut escaped) = (false, false);
    for ch in input.chars() {
        if in_string {
            compact.push(ch);
            match ch {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if !matches!(ch, ' ' | '\t' | '\n' | '\r') {
            in_string = ch == '"';
            compact.push(ch);
        }
    }
    compact
}

/// How surely a request body has a format's shape, when its path names no format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Only this format's requests look so.
    Sure,
    /// This format's, unless another is sure of it (a `messages` array alone).
    Likely,
    /// Not this format's.
    No,
}

/// How a format's API takes the caller's key, which an upstream that names no `auth` is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// `authorization: Bearer KEY`.
    Bearer,
    /// The key alone in this header (Anthropic's `x-api-key`).
    Named(&'static str),
}

/// What the checks need from a request.
#[derive(Debug, Clone)]
pub struct ToolRequest {
    /// The wire format the body was read in; `None` for a request built without a body (an MCP
    /// `tools/list` or `tools/call`, whose JSON-RPC the MCP SDK reads).
    pub format: Option<WireFormat>,
    /// The tools the request declares. Shared with the declared-tools cache, which hands the
    /// same reading to every request that sends the same array (agents send it every turn).
    pub declared_tools: Arc<[DeclaredTool]>,
    /// The client asked for a streamed answer.
    pub stream: bool,
    /// The client asked for a background response (Responses `background: true`), whose answer
    /// it fetches later by id rather than in this exchange.
    pub background: bool,
    /// The model the request asks for, when it names one.
    pub model: Option<String>,
    /// The top-level `toolgate` object, verbatim: the client's group, state and agent. Read
    /// with [`ToolRequest::directives`]; the gateway removes it before forwarding.
    pub directives: Option<Box<RawValue>>,
    /// The original body, kept so rarely needed parts (the conversation) are parsed on demand.
    pub(crate) body: Bytes,
}

impl ToolRequest {
    /// A request that arrived in no LLM wire format: an MCP `tools/list` or `tools/call`, whose
    /// declared tools are the backend tools the caller is offered. It has no body, so no user
    /// text and no history.
    pub fn from_declared_tools(declared_tools: Vec<DeclaredTool>) -> Self {
        ToolRequest {
            format: None,
            declared_tools: declared_tools.into(),
            stream: false,
            background: false,
            model: None,
            directives: None,
            body: Bytes::new(),
        }
    }

    /// Removes declared tools by name (the body-less counterpart of an edit applied by an
    /// adapter); true when one was removed.
    pub fn remove_declared_tools(&mut self, names: &[String]) -> bool {
        let before = self.declared_tools.len();
        self.declared_tools = (self.declared_tools.iter())
            .filter(|tool| !names.contains(&tool.name))
            .cloned()
            .collect();
        self.declared_tools.len() != before
    }

    /// Whether the request declares any tool.
    pub fn declares_tools(&self) -> bool {
        !self.declared_tools.is_empty()
    }

    /// The declared tool with this name, if any (names are exact and case-sensitive).
    pub fn declared_tool(&self, name: &str) -> Option<&DeclaredTool> {
        self.declared_tools.iter().find(|tool| tool.name == name)
    }

    /// The declared tool `call` would reach: its name, and a kind the call dispatches to
    /// ([`ToolKind::dispatches_to`](crate::ToolKind::dispatches_to)). A name declared twice with
    /// different kinds is found under the kind the call has.
    pub fn declared_tool_for(&self, call: &ToolCall) -> Option<&DeclaredTool> {
        self.declared_tools
            .iter()
            .find(|tool| tool.name == call.name && call.kind.dispatches_to(tool.kind))
    }

    /// The text of the latest user turn, for the judge. Parsed only when asked.
    pub fn user_request(&self) -> Option<String> {
        self.format?.adapter().latest_user_text(&self.body)
    }

    /// The tool calls of the conversation so far, in order, each with whether its result came
    /// back. Parsed only when asked.
    pub fn history(&self) -> Vec<HistoryCall> {
        self.format
            .map(|format| format.adapter().history(&self.body))
            .unwrap_or_default()
    }

    /// The request's bytes, as the client sent them (or as edited).
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The client's `toolgate` object, read strictly: a wrong type or an unknown key is an
    /// error to report, never a directive to ignore.
    pub fn directives(&self) -> Result<Option<Directives>, String> {
        self.directives
            .as_deref()
            .map(Directives::parse)
            .transpose()
    }
}

/// Removes the top-level `toolgate` object from a request body; `None` when there is none, so
/// a body without it keeps its bytes.
pub fn without_directives(body: &[u8]) -> Result<Option<Bytes>, ParseError> {
    let object: RawObject = read_json(body)?;
    if !object.0.iter().any(|(key, _)| key == DIRECTIVES_FIELD) {
        return Ok(None);
    }
    Ok(Some(Bytes::from(object.write(&[(DIRECTIVES_FIELD, None)]))))
}

/// What the checks need from a response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolResponse {
    /// Every call of every choice, in order.
    pub calls: Vec<ToolCall>,
    /// The model's reasoning summary, when it gave one.
    pub reasoning: Option<String>,
}

impl ToolResponse {
    /// An answer that arrived in no LLM wire format: the calls an MCP client asked for.
    pub fn from_calls(calls: Vec<ToolCall>) -> Self {
        ToolResponse {
            calls,
            reasoning: None,
        }
    }

    /// Whether the answer carries any call.
    pub fn has_calls(&self) -> bool {
        !self.calls.is_empty()
    }
}

/// A body that is not in the expected format: the message says what was wrong, the kind says
/// whether it is merely foreign (passed through, per seed 001) or ambiguous (refused).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    kind: ParseErrorKind,
    message: String,
}

/// Why a body could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// Not JSON: a syntax error, invalid UTF-8, nesting deeper than 128 levels, or cut short.
    Syntax,
    /// JSON, but not this format's shape.
    Shape,
    /// A key the checks read appears twice in one object. Parsers disagree on which one wins,
    /// so what toolgate checked might not be what the other side reads: never passed through.
    Ambiguous,
    /// An answer the strict readers refuse, from which a forgiving client could still read a
    /// call (a wrong type where an SDK does not check types, invalid UTF-8, a call in an event
    /// of no known shape): never passed through on a guarded route.
    Unreadable,
}

impl ParseError {
    /// A body that is JSON but not of the expected shape.
    pub fn new(message: impl Into<String>) -> Self {
        ParseError {
            kind: ParseErrorKind::Shape,
            message: message.into(),
        }
    }

    pub(crate) fn with_kind(kind: ParseErrorKind, message: impl Into<String>) -> Self {
        ParseError {
            kind,
            message: message.into(),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ParseErrorKind {
        self.kind
    }

    /// Whether the body repeats a key the checks read (never passed through).
    pub fn is_ambiguous(&self) -> bool {
        self.kind == ParseErrorKind::Ambiguous
    }
}

impl From<serde_json::Error> for ParseError {
    fn from(error: serde_json::Error) -> Self {
        let kind = match error.classify() {
            serde_json::error::Category::Data
                if error.to_string().starts_with("duplicate field") =>
            {
                ParseErrorKind::Ambiguous
            }
            serde_json::error::Category::Data => ParseErrorKind::Shape,
            _ => ParseErrorKind::Syntax,
        };
        ParseError {
            kind,
            message: format!("invalid JSON body: {error}"),
        }
    }
}

/// Reads a body as JSON. A body that is valid UTF-8 (any well-formed one) is read as text, so
/// that serde_json does not check again every string and raw value it borrows; other bytes go
/// through the byte reader, which tolerates them where a value is only skipped, as before.
pub(crate) fn read_json<'a, T: serde::Deserialize<'a>>(body: &'a [u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(body) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(body),
    }
}

/// A JSON value that may be a string holding JSON text (the OpenAI shape of `arguments`) or,
/// from lenient servers, the JSON value itself. Returns the text the model meant.
pub(crate) fn text_or_raw_json(value: &RawValue) -> String {
    text_or_json_text(value.get())
}

/// [`text_or_raw_json`] of a value's text as written.
pub(crate) fn text_or_json_text(written: &str) -> String {
    if let Some(text) = crate::scan::string_text(written) {
        return text;
    }
    match serde_json::from_str::<String>(written) {
        Ok(text) => text,
        Err(_) => written.to_owned(),
    }
}

/// A field read as its JSON value as written, borrowed from the body (`null` as `None`).
pub(crate) fn raw_text<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'de str>, D::Error> {
    let raw: Option<&'de RawValue> = serde::Deserialize::deserialize(deserializer)?;
    Ok(raw.map(RawValue::get))
}

/// A call's name as a client reads it: a JSON string's content; another value (a number, an
/// array), which SDKs do not reject, as its compact JSON, the text `JSON.stringify` gives,
/// however it was written (`["\u0061"]` is `["a"]`).
pub(crate) fn name_text(value: &RawValue) -> String {
    match serde_json::from_str::<serde_json::Value>(value.get()) {
        Ok(serde_json::Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => value.get().to_owned(),
    }
}

/// The names removed by a set of edits.
pub(crate) fn removed_tool_names(edits: &[Edit]) -> Vec<&str> {
    edits
        .iter()
        .filter_map(|edit| match edit {
            Edit::RemoveDeclaredTools(names) => Some(names.iter().map(String::as_str)),
            _ => None,
        })
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(name, turn, latest_turn, outcome)` of each history call of `body` read as `format`.
    fn turns(format: WireFormat, body: &str) -> Vec<(String, usize, bool, crate::CallOutcome)> {
        crate::testing::request(format, body)
            .history()
            .into_iter()
            .map(|call| (call.name, call.turn, call.latest_turn, call.outcome))
            .collect()
    }

    #[test]
    fn every_format_marks_the_model_turn_of_each_call_and_the_latest_one() {
        use crate::CallOutcome::{Completed, Pending};
        // A reused id: the result answers the latest call with it.
        let chat = r#"{"messages":[{"role":"user","content":"go"},
            {"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"a","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c","content":"ok"},
            {"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"b","arguments":"{}"}},
                                              {"id":"d","type":"function","function":{"name":"c","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c","content":"ok"}]}"#;
        let responses = r#"{"model":"m","input":[{"role":"user","content":"go"},
            {"type":"function_call","call_id":"f","name":"a","arguments":"{}"},
            {"type":"function_call_output","call_id":"f","output":"ok"},
            {"type":"reasoning","summary":[]},
            {"type":"function_call","call_id":"f","name":"b","arguments":"{}"},
            {"type":"function_call","call_id":"g","name":"c","arguments":"{}"},
            {"type":"function_call_output","call_id":"f","output":"ok"}]}"#;
        let reused_id = [
            ("a".to_owned(), 0, false, Completed),
            ("b".to_owned(), 1, true, Completed),
            ("c".to_owned(), 1, true, Pending),
        ];
        for (format, body) in [
            (WireFormat::ChatCompletions, chat),
            (WireFormat::Responses, responses),
        ] {
            assert_eq!(turns(format, body), reused_id, "{format:?}");
        }
        let anthropic = r#"{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"go"},
            {"role":"assistant","content":[{"type":"tool_use","id":"t","name":"a","input":{}}]},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]},
            {"role":"assistant","content":"text only"}]}"#;
        assert_eq!(
            turns(WireFormat::AnthropicMessages, anthropic),
            [("a".into(), 0, false, Completed)],
            "the latest turn made no call"
        );
    }

    #[test]
    fn a_body_that_is_not_utf8_is_read_where_its_bad_bytes_are_only_skipped() {
        let tools = br#""tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]"#;
        let mut latin1 = br#"{"messages":[{"role":"user","content":"caf"#.to_vec();
        latin1.push(0xE9);
        latin1.extend_from_slice(br#""}],"#);
        latin1.extend_from_slice(tools);
        latin1.push(b'}');
        let request = WireFormat::ChatCompletions
            .parse_request(Bytes::from(latin1))
            .expect("the bad byte sits in a skipped message");
        let names: Vec<&str> = request
            .declared_tools
            .iter()
            .map(|tool| tool.name.as_str())
            .collect();
        assert_eq!(names, ["get_weather"]);
        assert_eq!(
            request.declared_tools[0].parameters.as_deref(),
            Some(r#"{"type":"object"}"#)
        );

        let mut bad_name = br#"{"tools":[{"type":"function","function":{"name":"get_"#.to_vec();
        bad_name.push(0xE9);
        bad_name.extend_from_slice(br#""}}]}"#);
        assert!(
            WireFormat::ChatCompletions
                .parse_request(Bytes::from(bad_name))
                .is_err(),
            "a tool name must be text"
        );
    }

    #[test]
    fn formats_are_detected_by_path_then_by_body() {
        assert_eq!(
            WireFormat::from_path("/v1/chat/completions"),
            Some(WireFormat::ChatCompletions)
        );
        assert_eq!(
            WireFormat::from_path("/openai/v1/responses"),
            Some(WireFormat::Responses)
        );
        assert_eq!(
            WireFormat::from_path("/v1/messages/"),
            Some(WireFormat::AnthropicMessages)
        );
        assert_eq!(WireFormat::from_path("/v1/models"), None);
        assert_eq!(
            WireFormat::from_body(br#"{"model":"m","input":"hi"}"#),
            Some(WireFormat::Responses)
        );
        assert_eq!(
            WireFormat::from_body(br#"{"model":"m","system":"be brief","messages":[]}"#),
            Some(WireFormat::AnthropicMessages)
        );
        assert_eq!(
            WireFormat::from_body(br#"{"messages":[],"tools":[{"name":"a","input_schema":{}}]}"#),
            Some(WireFormat::AnthropicMessages)
        );
        assert_eq!(
            WireFormat::from_body(br#"{"messages":[]}"#),
            Some(WireFormat::ChatCompletions)
        );
        assert_eq!(WireFormat::from_body(b"[]"), None);
    }

    #[test]
    fn a_duplicated_key_is_ambiguous_not_foreign() {
        let duplicated = WireFormat::ChatCompletions
            .parse_response(br#"{"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","function":{"name":"safe","name":"evil","arguments":"{}"}}]}}]}"#)
            .expect_err("a duplicated name is refused");
        assert!(duplicated.is_ambiguous(), "{duplicated}");
        let foreign = WireFormat::ChatCompletions
            .parse_response(b"{\"data\":[]}")
            .expect_err("not a completion");
        assert_eq!(foreign.kind(), ParseErrorKind::Shape);
        let broken = WireFormat::ChatCompletions
            .parse_response(b"{\"choices\":[")
            .expect_err("cut short");
        assert_eq!(broken.kind(), ParseErrorKind::Syntax);
        let deep = format!("{{\"choices\":[{}", "{\"message\":".repeat(200));
        assert_eq!(
            WireFormat::ChatCompletions
                .parse_response(deep.as_bytes())
                .expect_err("too deep")
                .kind(),
            ParseErrorKind::Syntax
        );
        // Deep nesting in a field nobody reads is skipped without recursion: no stack to exhaust.
        let ignored = format!(
            "{{\"choices\":[],\"x\":{}{}}}",
            "[".repeat(1_000_000),
            "]".repeat(1_000_000)
        );
        assert!(
            WireFormat::ChatCompletions
                .parse_response(ignored.as_bytes())
                .is_ok()
        );
    }

    #[test]
    fn format_names_round_trip() {
        for format in WireFormat::ALL {
            assert_eq!(WireFormat::from_name(format.name()), Some(format));
        }
    }
}
