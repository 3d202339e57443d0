//! What the format folders' unit tests share: a request read whole, tools and calls as
//! comparable lines, an argument edit, the retry request for one blocked call, and the golden
//! fixtures, so each folder's tests state only what its format does differently.

use bytes::Bytes;
use serde_json::Value;

use crate::edits::Edit;
use crate::format::{ParseError, ToolRequest, WireFormat};
use crate::on_block::CallFeedback;
use crate::tool::{DeclaredTool, ToolCall};

/// `body` read as a request of `format`; a test's body is written to parse.
pub(crate) fn request(format: WireFormat, body: &str) -> ToolRequest {
    format
        .parse_request(Bytes::from(body.to_owned()))
        .expect("request parses")
}

/// The error of reading `body` as a request of `format`; a test's body is written to fail.
pub(crate) fn request_error(format: WireFormat, body: &str) -> ParseError {
    format
        .parse_request(Bytes::from(body.to_owned()))
        .expect_err("request is refused")
}

/// `name kind schema`, one line per declared tool (the schema as `Some(text)` or `None`).
pub(crate) fn declared_lines(tools: &[DeclaredTool]) -> Vec<String> {
    let line =
        |tool: &DeclaredTool| format!("{} {:?} {:?}", tool.name, tool.kind, tool.schema_text());
    tools.iter().map(line).collect()
}

/// `id name kind arguments`, one line per call; a call without an id has an empty one.
pub(crate) fn call_lines(calls: &[ToolCall]) -> Vec<String> {
    let line = |call: &ToolCall| {
        let id = call.id.as_deref().unwrap_or_default();
        format!("{id} {} {:?} {}", call.name, call.kind, call.arguments)
    };
    calls.iter().map(line).collect()
}

/// The edit that gives new `arguments` to the call `call_id` of choice 0 (with no id: to the
/// one call without one).
pub(crate) fn replace_arguments(call_id: Option<&str>, arguments: &str) -> Vec<Edit> {
    vec![Edit::ReplaceArguments {
        choice: 0,
        call_id: call_id.map(str::to_owned),
        arguments: arguments.to_owned(),
    }]
}

/// `format`'s retry request after `call` was blocked with `result`, as JSON.
pub(crate) fn retried(format: WireFormat, body: &[u8], call: &ToolCall, result: &str) -> Value {
    let feedback = [CallFeedback {
        call,
        result: result.to_owned(),
    }];
    let retry = format.adapter().retry_request(body, &feedback);
    serde_json::from_slice(&retry.expect("rewrites")).expect("json")
}

/// One recorded exchange of a format's golden fixtures: its name, the verdict
/// `verdicts.json` gives it, its request as read, and its answer's body.
pub(crate) struct Fixture {
    pub(crate) name: String,
    pub(crate) verdict: Value,
    pub(crate) request: ToolRequest,
    pub(crate) response: Vec<u8>,
}

/// The golden fixtures of `fixtures/FOLDER/` (at least eight), each request a body `format`
/// claims as its own and reads.
pub(crate) fn fixtures(folder: &str, format: WireFormat) -> Vec<Fixture> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(folder);
    let read = |name: String| std::fs::read(dir.join(&name)).expect(&name);
    let verdicts: Value =
        serde_json::from_slice(&read("verdicts.json".into())).expect("verdicts.json");
    let verdicts = verdicts.as_object().expect("an object");
    assert!(verdicts.len() >= 8);
    let fixture = |(name, verdict): (&String, &Value)| {
        let body = Bytes::from(read(format!("{name}.request.json")));
        assert_eq!(WireFormat::from_body(&body), Some(format), "{name}");
        Fixture {
            name: name.clone(),
            verdict: verdict.clone(),
            request: format.parse_request(body).expect(name),
            response: read(format!("{name}.response.json")),
        }
    };
    verdicts.iter().map(fixture).collect()
}
