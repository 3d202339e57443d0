//! Property: no answer carries a tool call past toolgate unchecked. For every generated answer
//! (chat completions, Responses and Anthropic, as a JSON body and as an SSE stream) from which
//! the forgiving reader (`lenient`, the oracle: what `JSON.parse`-based clients and SDKs read)
//! extracts a call with a name, toolgate has either checked a call of that name (it is among
//! the calls `read_answer` or `reassemble` returned) or refused the answer as a whole.
//!
//! The answers are realistic, then damaged the way a hostile or broken upstream could: a key
//! repeated with another value, a value of the wrong type, invalid UTF-8 in a string, keys and
//! strings written with `\u` escapes, a `type` added to a chat chunk, events split, merged or
//! cut off before their end, another format's call event inserted, a format other than the
//! route's, a JSON answer sent as an event stream and a stream sent where JSON was expected
//! (with the lines an SSE client skips in front of it). The oracle (`support/oracle.rs`, shared
//! with the fuzz targets) reads streams with an SSE reader of its own, not toolgate's. A second
//! oracle shares no code with toolgate at all: the official OpenAI and Anthropic Python SDKs
//! read the same answers with their own decoders and stream accumulators
//! (`support/sdk_oracle.rs`), and every property holds for them too.

#[path = "support/oracle.rs"]
mod oracle;
#[path = "support/sdk_oracle.rs"]
mod sdk_oracle;

use std::collections::BTreeSet;

use oracle::{
    body_is_guarded, checked_names, client_reads_body, client_reads_stream, stream_is_guarded,
};
use proptest::prelude::*;
use toolgate_formats::WireFormat;
use toolgate_formats::answer::read_answer;
use toolgate_formats::stream::reassemble;

// ---------------------------------------------------------------------------------------------
// JSON as written on the wire: unlike `serde_json::Value` it keeps repeated keys, escaped keys
// and strings that are not UTF-8.

#[derive(Debug, Clone, PartialEq)]
enum J {
    Null,
    Bool(bool),
    Num(i64),
    /// The string's bytes, which need not be UTF-8.
    Str(Vec<u8>),
    Arr(Vec<J>),
    Obj(Vec<Field>),
}

#[derive(Debug, Clone, PartialEq)]
struct Field {
    key: String,
    /// Written with a `\u` escape for every character: the same key to any JSON reader.
    escaped: bool,
    value: J,
}

fn s(text: &str) -> J {
    J::Str(text.as_bytes().to_vec())
}

fn n(number: i64) -> J {
    J::Num(number)
}

fn obj<'a>(fields: impl IntoIterator<Item = (&'a str, J)>) -> J {
    J::Obj(
        fields
            .into_iter()
            .map(|(key, value)| Field {
                key: key.to_owned(),
                escaped: false,
                value,
            })
            .collect(),
    )
}

fn arr(items: impl IntoIterator<Item = J>) -> J {
    J::Arr(items.into_iter().collect())
}

fn from_value(value: &serde_json::Value) -> J {
    use serde_json::Value;
    match value {
        Value::Null => J::Null,
        Value::Bool(flag) => J::Bool(*flag),
        Value::Number(number) => J::Num(number.as_i64().unwrap_or(0)),
        Value::String(text) => s(text),
        Value::Array(items) => arr(items.iter().map(from_value)),
        Value::Object(map) => obj(map
            .iter()
            .map(|(key, value)| (key.as_str(), from_value(value)))),
    }
}

/// Writes compact JSON; `escape_all` writes every key and string character as `\uXXXX`.
fn write(value: &J, escape_all: bool, out: &mut Vec<u8>) {
    match value {
        J::Null => out.extend_from_slice(b"null"),
        J::Bool(flag) => out.extend_from_slice(if *flag { b"true" } else { b"false" }),
        J::Num(number) => out.extend_from_slice(number.to_string().as_bytes()),
        J::Str(bytes) => write_string(bytes, escape_all, out),
        J::Arr(items) => {
            out.push(b'[');
            for (position, item) in items.iter().enumerate() {
                if position > 0 {
                    out.push(b',');
                }
                write(item, escape_all, out);
            }
            out.push(b']');
        }
        J::Obj(fields) => {
            out.push(b'{');
            for (position, field) in fields.iter().enumerate() {
                if position > 0 {
                    out.push(b',');
                }
                write_string(field.key.as_bytes(), escape_all || field.escaped, out);
                out.push(b':');
                write(&field.value, escape_all, out);
            }
            out.push(b'}');
        }
    }
}

fn write_string(bytes: &[u8], escape: bool, out: &mut Vec<u8>) {
    out.push(b'"');
    match std::str::from_utf8(bytes) {
        Ok(text) if escape => {
            for unit in text.encode_utf16() {
                out.extend_from_slice(format!("\\u{unit:04x}").as_bytes());
            }
        }
        // Bytes that are not UTF-8 go as they are, escaped or not: they are the point.
        _ => {
            for &byte in bytes {
                match byte {
                    b'"' => out.extend_from_slice(b"\\\""),
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    0..=0x1f => out.extend_from_slice(format!("\\u{byte:04x}").as_bytes()),
                    _ => out.push(byte),
                }
            }
        }
    }
    out.push(b'"');
}

fn to_bytes(value: &J, escape_all: bool) -> Vec<u8> {
    let mut out = Vec::new();
    write(value, escape_all, &mut out);
    out
}

/// The paths (field or element positions) of every object in `value`, outermost first.
fn object_paths(value: &J) -> Vec<Vec<usize>> {
    let mut paths = Vec::new();
    collect_paths(
        value,
        &mut Vec::new(),
        &mut |node| matches!(node, J::Obj(_)),
        &mut paths,
    );
    paths
}

/// The paths of every string under a key that names or carries a call, or of every string when
/// there is none.
fn string_paths(value: &J) -> Vec<Vec<usize>> {
    let mut all = Vec::new();
    collect_paths(
        value,
        &mut Vec::new(),
        &mut |node| matches!(node, J::Str(_)),
        &mut all,
    );
    let carrying: Vec<Vec<usize>> = all
        .iter()
        .filter(|path| {
            let key = parent_key(value, path);
            matches!(
                key.as_deref(),
                Some("name" | "arguments" | "input" | "partial_json" | "delta" | "type")
            )
        })
        .cloned()
        .collect();
    if carrying.is_empty() { all } else { carrying }
}

fn collect_paths(
    value: &J,
    path: &mut Vec<usize>,
    wanted: &mut impl FnMut(&J) -> bool,
    out: &mut Vec<Vec<usize>>,
) {
    if wanted(value) {
        out.push(path.clone());
    }
    let children: Vec<&J> = match value {
        J::Arr(items) => items.iter().collect(),
        J::Obj(fields) => fields.iter().map(|field| &field.value).collect(),
        _ => Vec::new(),
    };
    for (position, child) in children.into_iter().enumerate() {
        path.push(position);
        collect_paths(child, path, wanted, out);
        path.pop();
    }
}

fn parent_key(value: &J, path: &[usize]) -> Option<String> {
    let (last, parent) = path.split_last()?;
    match node(value, parent) {
        J::Obj(fields) => fields.get(*last).map(|field| field.key.clone()),
        _ => None,
    }
}

fn node<'a>(value: &'a J, path: &[usize]) -> &'a J {
    path.iter().fold(value, |node, &position| match node {
        J::Arr(items) => &items[position],
        J::Obj(fields) => &fields[position].value,
        _ => unreachable!("paths lead through containers"),
    })
}

fn node_mut<'a>(value: &'a mut J, path: &[usize]) -> &'a mut J {
    path.iter().fold(value, |node, &position| match node {
        J::Arr(items) => &mut items[position],
        J::Obj(fields) => &mut fields[position].value,
        _ => unreachable!("paths lead through containers"),
    })
}

// ---------------------------------------------------------------------------------------------
// Answers: a plan of parts (text, reasoning, calls of some kind), written in each format as a
// complete JSON body or as the events its API streams.

#[derive(Debug, Clone, Copy)]
enum Part {
    Text,
    Thinking,
    /// `kind` picks the call's kind in the format; `pieces` is how many fragments its
    /// arguments stream in; `split_name` streams a chat name in two fragments (some servers do)
    /// and adds `name` to a Responses `…arguments.done`.
    Call {
        kind: u8,
        pieces: u8,
        split_name: bool,
    },
}

#[derive(Debug, Clone)]
struct Plan {
    format: WireFormat,
    /// Chat's choices; the other formats have one list of parts, the concatenation.
    choices: Vec<Vec<Part>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum CallKind {
    Function,
    Custom,
    Legacy,
    /// A Responses built-in call item of this type.
    Builtin(&'static str),
    Mcp,
    ToolUse,
    ServerToolUse,
    /// A Gemini `functionCall` part, in lowerCamelCase or (`snake`) in snake_case.
    FunctionCallPart {
        snake: bool,
    },
    /// A Gemini `executableCode` part, run by the provider.
    ExecutableCode,
}

#[derive(Debug, Clone)]
struct Call {
    kind: CallKind,
    id: String,
    name: String,
    arguments: String,
    pieces: usize,
    split_name: bool,
}

#[derive(Debug, Clone)]
enum Item {
    Text(&'static str),
    Thinking(&'static str),
    Call(Call),
}

const NAMES: [&str; 5] = [
    "get_weather",
    "send_email",
    "delete_files",
    "run_sql",
    "transfer_funds",
];
const ARGUMENTS: [&str; 4] = [
    r#"{"city":"Paris","unit":"celsius"}"#,
    r#"{"path":"/","recursive":true}"#,
    "{}",
    r#"{"to":["a@b.c"],"amount":-5,"note":"x \"y\""}"#,
];
const BUILTINS: [&str; 6] = [
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
    "local_shell_call",
    "computer_call",
];

/// Gives every part its content; every call a name of its own, so a call toolgate missed is
/// never hidden by another call of the same name.
fn items(plan: &Plan) -> Vec<Vec<Item>> {
    let mut counter = 0;
    let mut call = |kind: CallKind, seed: u8, pieces: u8, split_name: bool| {
        counter += 1;
        let name = match kind {
            CallKind::Builtin(item_type) => item_type.trim_end_matches("_call").to_owned(),
            CallKind::ServerToolUse => "web_search".to_owned(),
            CallKind::ExecutableCode => "codeExecution".to_owned(),
            _ => format!("{}_{counter}", NAMES[usize::from(seed) % NAMES.len()]),
        };
        let arguments = match kind {
            CallKind::Custom => "SELECT name FROM users;".to_owned(),
            CallKind::ExecutableCode => r#"{"language":"PYTHON","code":"print(1)"}"#.to_owned(),
            _ => ARGUMENTS[usize::from(seed / 5) % ARGUMENTS.len()].to_owned(),
        };
        Item::Call(Call {
            kind,
            id: format!("call_{counter}"),
            name,
            arguments,
            pieces: usize::from(pieces.max(1)),
            split_name,
        })
    };
    let plain = |part: Part| match part {
        Part::Text => Some(Item::Text("Let me check that.")),
        Part::Thinking => Some(Item::Thinking("The user wants the weather.")),
        Part::Call { .. } => None,
    };
    match plan.format {
        WireFormat::ChatCompletions => (plan.choices.iter())
            .map(|parts| {
                let (mut tools, mut legacy) = (0, false);
                let mut items = Vec::new();
                for &part in parts {
                    let Part::Call {
                        kind,
                        pieces,
                        split_name,
                    } = part
                    else {
                        items.extend(plain(part));
                        continue;
                    };
                    let kind = match kind % 3 {
                        2 if !legacy => CallKind::Legacy,
                        1 => CallKind::Custom,
                        _ => CallKind::Function,
                    };
                    match kind {
                        CallKind::Legacy => legacy = true,
                        _ if tools == 3 => continue,
                        _ => tools += 1,
                    }
                    items.push(call(kind, part_seed(part), pieces, split_name));
                }
                items
            })
            .collect(),
        format => {
            let parts = plan.choices.iter().flatten().take(5);
            let items = parts
                .map(|&part| match part {
                    Part::Call {
                        kind,
                        pieces,
                        split_name,
                    } => {
                        let kind = match (format, kind % 4) {
                            (WireFormat::Responses, 0) => CallKind::Function,
                            (WireFormat::Responses, 1) => CallKind::Custom,
                            (WireFormat::Responses, 2) => {
                                CallKind::Builtin(BUILTINS[usize::from(kind / 4) % BUILTINS.len()])
                            }
                            (WireFormat::Responses, _) => CallKind::Mcp,
                            (WireFormat::Gemini, 3) => CallKind::ExecutableCode,
                            (WireFormat::Gemini, kind) => {
                                CallKind::FunctionCallPart { snake: kind == 2 }
                            }
                            (_, 3) => CallKind::ServerToolUse,
                            _ => CallKind::ToolUse,
                        };
                        call(kind, part_seed(part), pieces, split_name)
                    }
                    _ => plain(part).unwrap_or(Item::Text("")),
                })
                .collect();
            vec![items]
        }
    }
}

fn part_seed(part: Part) -> u8 {
    match part {
        Part::Call { kind, .. } => kind.rotate_right(2),
        _ => 0,
    }
}

/// `text` in `pieces` fragments (at character boundaries), as a model streams it.
fn pieces(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(pieces.max(1)).max(1);
    let mut out: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
    if out.is_empty() {
        out.push(String::new());
    }
    out
}

fn arguments_value(call: &Call) -> J {
    serde_json::from_str(&call.arguments).map_or_else(|_| s(&call.arguments), |v| from_value(&v))
}

fn usage() -> J {
    obj([("input_tokens", n(12)), ("output_tokens", n(7))])
}

// --- Chat completions

fn chat_calls(items: &[Item]) -> (Vec<J>, Option<J>) {
    let mut tool_calls = Vec::new();
    let mut legacy = None;
    for item in items {
        let Item::Call(call) = item else { continue };
        match call.kind {
            CallKind::Legacy => {
                legacy = Some(obj([
                    ("name", s(&call.name)),
                    ("arguments", s(&call.arguments)),
                ]));
            }
            CallKind::Custom => tool_calls.push(obj([
                ("id", s(&call.id)),
                ("type", s("custom")),
                (
                    "custom",
                    obj([("name", s(&call.name)), ("input", s(&call.arguments))]),
                ),
            ])),
            _ => tool_calls.push(obj([
                ("id", s(&call.id)),
                ("type", s("function")),
                (
                    "function",
                    obj([("name", s(&call.name)), ("arguments", s(&call.arguments))]),
                ),
            ])),
        }
    }
    (tool_calls, legacy)
}

fn chat_json(choices: &[Vec<Item>]) -> J {
    let choices = choices.iter().enumerate().map(|(index, items)| {
        let text = items.iter().find_map(|item| match item {
            Item::Text(text) => Some(s(text)),
            _ => None,
        });
        let (tool_calls, legacy) = chat_calls(items);
        let mut message = vec![
            ("role", s("assistant")),
            ("content", text.unwrap_or(J::Null)),
            ("refusal", J::Null),
        ];
        if items.iter().any(|item| matches!(item, Item::Thinking(_))) {
            message.push(("reasoning_content", s("The user wants the weather.")));
        }
        let finish = match tool_calls.is_empty() && legacy.is_none() {
            true => "stop",
            false => "tool_calls",
        };
        if !tool_calls.is_empty() {
            message.push(("tool_calls", J::Arr(tool_calls)));
        }
        message.extend(legacy.map(|legacy| ("function_call", legacy)));
        obj([
            ("index", n(index as i64)),
            ("message", obj(message)),
            ("logprobs", J::Null),
            ("finish_reason", s(finish)),
        ])
    });
    obj([
        ("id", s("chatcmpl-1")),
        ("object", s("chat.completion")),
        ("created", n(1_735_689_600)),
        ("model", s("gpt-4.1")),
        ("choices", arr(choices)),
        ("usage", usage()),
    ])
}

fn chat_chunk(choice: usize, delta: J, finish: J) -> Event {
    Event::json(
        None,
        obj([
            ("id", s("chatcmpl-1")),
            ("object", s("chat.completion.chunk")),
            ("created", n(1_735_689_600)),
            ("model", s("gpt-4.1")),
            (
                "choices",
                arr([obj([
                    ("index", n(choice as i64)),
                    ("delta", delta),
                    ("logprobs", J::Null),
                    ("finish_reason", finish),
                ])]),
            ),
        ]),
    )
}

fn chat_stream(choices: &[Vec<Item>]) -> Vec<Event> {
    let mut events = Vec::new();
    for (choice, items) in choices.iter().enumerate() {
        let role = obj([("role", s("assistant")), ("content", s(""))]);
        events.push(chat_chunk(choice, role, J::Null));
        let mut index = 0;
        let mut any_call = false;
        for item in items {
            let call = match item {
                Item::Text(text) => {
                    for piece in pieces(text, 2) {
                        events.push(chat_chunk(choice, obj([("content", s(&piece))]), J::Null));
                    }
                    continue;
                }
                Item::Thinking(text) => {
                    let delta = obj([("reasoning_content", s(text))]);
                    events.push(chat_chunk(choice, delta, J::Null));
                    continue;
                }
                Item::Call(call) => call,
            };
            any_call = true;
            let names = match call.split_name {
                true => pieces(&call.name, 2),
                false => vec![call.name.clone()],
            };
            let (part, text_key) = match call.kind {
                CallKind::Custom => ("custom", "input"),
                _ => ("function", "arguments"),
            };
            let mut fragments: Vec<J> = Vec::new();
            for (position, name) in names.iter().enumerate() {
                let body = obj([("name", s(name)), (text_key, s(""))]);
                fragments.push(match position {
                    0 => body,
                    _ => obj([("name", s(name))]),
                });
            }
            for piece in pieces(&call.arguments, call.pieces) {
                fragments.push(obj([(text_key, s(&piece))]));
            }
            for (position, fragment) in fragments.into_iter().enumerate() {
                let delta = match call.kind {
                    CallKind::Legacy => obj([("function_call", fragment)]),
                    _ => {
                        let mut fields = vec![("index", n(index))];
                        if position == 0 {
                            fields.push(("id", s(&call.id)));
                            fields.push(("type", s(part)));
                        }
                        fields.push((part, fragment));
                        obj([("tool_calls", arr([obj(fields)]))])
                    }
                };
                events.push(chat_chunk(choice, delta, J::Null));
            }
            if call.kind != CallKind::Legacy {
                index += 1;
            }
        }
        let finish = if any_call { "tool_calls" } else { "stop" };
        events.push(chat_chunk(choice, obj([]), s(finish)));
    }
    events.push(Event::json(
        None,
        obj([
            ("id", s("chatcmpl-1")),
            ("object", s("chat.completion.chunk")),
            ("choices", arr([])),
            ("usage", usage()),
        ]),
    ));
    events.push(Event::text(None, b"[DONE]"));
    events
}

// --- Responses

fn responses_item(position: usize, item: &Item, complete: bool) -> J {
    let status = s(if complete { "completed" } else { "in_progress" });
    let text_if = |text: &str| s(if complete { text } else { "" });
    match item {
        Item::Text(text) => {
            let content = complete.then(|| {
                obj([
                    ("type", s("output_text")),
                    ("text", s(text)),
                    ("annotations", arr([])),
                ])
            });
            obj([
                ("id", s(&format!("msg_{position}"))),
                ("type", s("message")),
                ("status", status),
                ("role", s("assistant")),
                ("content", arr(content)),
            ])
        }
        Item::Thinking(text) => {
            let summary = complete.then(|| obj([("type", s("summary_text")), ("text", s(text))]));
            obj([
                ("id", s(&format!("rs_{position}"))),
                ("type", s("reasoning")),
                ("summary", arr(summary)),
            ])
        }
        Item::Call(call) => match call.kind {
            CallKind::Builtin(item_type) => obj([
                ("id", s(&format!("bi_{position}"))),
                ("type", s(item_type)),
                ("status", status),
                (
                    "action",
                    obj([("type", s("search")), ("query", s("rust release"))]),
                ),
            ]),
            CallKind::Custom => obj([
                ("id", s(&format!("ctc_{position}"))),
                ("type", s("custom_tool_call")),
                ("status", status),
                ("call_id", s(&call.id)),
                ("name", s(&call.name)),
                ("input", text_if(&call.arguments)),
            ]),
            CallKind::Mcp => obj([
                ("id", s(&format!("mcp_{position}"))),
                ("type", s("mcp_call")),
                ("server_label", s("files")),
                ("name", s(&call.name)),
                ("arguments", text_if(&call.arguments)),
            ]),
            _ => obj([
                ("id", s(&format!("fc_{position}"))),
                ("type", s("function_call")),
                ("status", status),
                ("arguments", text_if(&call.arguments)),
                ("call_id", s(&call.id)),
                ("name", s(&call.name)),
            ]),
        },
    }
}

fn response_object(items: &[Item], complete: bool) -> J {
    let output = match complete {
        true => (items.iter().enumerate())
            .map(|(position, item)| responses_item(position, item, true))
            .collect(),
        false => Vec::new(),
    };
    obj([
        ("id", s("resp_1")),
        ("object", s("response")),
        ("created_at", n(1_756_801_902)),
        (
            "status",
            s(if complete { "completed" } else { "in_progress" }),
        ),
        ("model", s("gpt-4.1")),
        ("output", J::Arr(output)),
        ("usage", if complete { usage() } else { J::Null }),
    ])
}

fn responses_stream(items: &[Item]) -> Vec<Event> {
    let mut events = Vec::new();
    let mut push = |kind: &str, fields: Vec<(&str, J)>| {
        let sequence = events.len() as i64;
        let mut all = vec![("type", s(kind)), ("sequence_number", n(sequence))];
        all.extend(fields);
        events.push(Event::json(Some(kind), obj(all)));
    };
    push(
        "response.created",
        vec![("response", response_object(items, false))],
    );
    push(
        "response.in_progress",
        vec![("response", response_object(items, false))],
    );
    for (position, item) in items.iter().enumerate() {
        let at = || ("output_index", n(position as i64));
        let added = responses_item(position, item, false);
        let id = match &added {
            J::Obj(fields) => fields[0].value.clone(),
            _ => J::Null,
        };
        let item_id = || ("item_id", id.clone());
        push("response.output_item.added", vec![at(), ("item", added)]);
        match item {
            Item::Text(text) => {
                let part = |text: &str| obj([("type", s("output_text")), ("text", s(text))]);
                let content = || ("content_index", n(0));
                push(
                    "response.content_part.added",
                    vec![item_id(), at(), content(), ("part", part(""))],
                );
                for piece in pieces(text, 2) {
                    push(
                        "response.output_text.delta",
                        vec![item_id(), at(), content(), ("delta", s(&piece))],
                    );
                }
                push(
                    "response.output_text.done",
                    vec![item_id(), at(), content(), ("text", s(text))],
                );
                push(
                    "response.content_part.done",
                    vec![item_id(), at(), content(), ("part", part(text))],
                );
            }
            Item::Thinking(text) => {
                let part = |text: &str| obj([("type", s("summary_text")), ("text", s(text))]);
                let summary = || ("summary_index", n(0));
                push(
                    "response.reasoning_summary_part.added",
                    vec![item_id(), at(), summary(), ("part", part(""))],
                );
                push(
                    "response.reasoning_summary_text.delta",
                    vec![item_id(), at(), summary(), ("delta", s(text))],
                );
                push(
                    "response.reasoning_summary_text.done",
                    vec![item_id(), at(), summary(), ("text", s(text))],
                );
                push(
                    "response.reasoning_summary_part.done",
                    vec![item_id(), at(), summary(), ("part", part(text))],
                );
            }
            Item::Call(call) => {
                let (prefix, text_key) = match call.kind {
                    CallKind::Custom => ("response.custom_tool_call_input", "input"),
                    CallKind::Mcp => ("response.mcp_call_arguments", "arguments"),
                    CallKind::Builtin(item_type) => {
                        for stage in ["in_progress", "searching", "completed"] {
                            push(
                                &format!("response.{item_type}.{stage}"),
                                vec![at(), item_id()],
                            );
                        }
                        ("", "")
                    }
                    _ => ("response.function_call_arguments", "arguments"),
                };
                if !prefix.is_empty() {
                    for piece in pieces(&call.arguments, call.pieces) {
                        push(
                            &format!("{prefix}.delta"),
                            vec![item_id(), at(), ("delta", s(&piece))],
                        );
                    }
                    let mut done = vec![item_id(), at(), (text_key, s(&call.arguments))];
                    if call.split_name && call.kind == CallKind::Function {
                        done.push(("name", s(&call.name)));
                    }
                    push(&format!("{prefix}.done"), done);
                }
            }
        }
        push(
            "response.output_item.done",
            vec![at(), ("item", responses_item(position, item, true))],
        );
    }
    push(
        "response.completed",
        vec![("response", response_object(items, true))],
    );
    events
}

// --- Anthropic messages

fn anthropic_block(position: usize, item: &Item, complete: bool) -> Vec<J> {
    let text_if = |text: &str| s(if complete { text } else { "" });
    match item {
        Item::Text(text) => vec![obj([("type", s("text")), ("text", text_if(text))])],
        Item::Thinking(text) => vec![obj([
            ("type", s("thinking")),
            ("thinking", text_if(text)),
            ("signature", text_if("c2ln")),
        ])],
        Item::Call(call) => {
            let server = call.kind == CallKind::ServerToolUse;
            let id = match server {
                true => format!("srvtoolu_{position}"),
                false => format!("toolu_{position}"),
            };
            let input = match complete {
                true => arguments_value(call),
                false => obj([]),
            };
            let kind = if server {
                "server_tool_use"
            } else {
                "tool_use"
            };
            let mut blocks = vec![obj([
                ("type", s(kind)),
                ("id", s(&id)),
                ("name", s(&call.name)),
                ("input", input),
            ])];
            if server {
                blocks.push(obj([
                    ("type", s("web_search_tool_result")),
                    ("tool_use_id", s(&id)),
                    ("content", arr([])),
                ]));
            }
            blocks
        }
    }
}

fn anthropic_message(content: Vec<J>, complete: bool) -> J {
    obj([
        ("id", s("msg_01")),
        ("type", s("message")),
        ("role", s("assistant")),
        ("model", s("claude-sonnet-4-5")),
        ("content", J::Arr(content)),
        (
            "stop_reason",
            if complete { s("tool_use") } else { J::Null },
        ),
        ("stop_sequence", J::Null),
        ("usage", usage()),
    ])
}

fn anthropic_json(items: &[Item]) -> J {
    let content = (items.iter().enumerate())
        .flat_map(|(position, item)| anthropic_block(position, item, true))
        .collect();
    anthropic_message(content, true)
}

fn anthropic_stream(items: &[Item]) -> Vec<Event> {
    let mut events = Vec::new();
    let mut push = |kind: &str, fields: Vec<(&str, J)>| {
        let mut all = vec![("type", s(kind))];
        all.extend(fields);
        events.push(Event::json(Some(kind), obj(all)));
    };
    push(
        "message_start",
        vec![("message", anthropic_message(Vec::new(), false))],
    );
    let mut index = 0;
    for (position, item) in items.iter().enumerate() {
        let starts = anthropic_block(position, item, false);
        let result = starts.get(1).cloned();
        let at = |index: i64| ("index", n(index));
        push(
            "content_block_start",
            vec![at(index), ("content_block", starts[0].clone())],
        );
        if position == 0 {
            push("ping", Vec::new());
        }
        let deltas: Vec<J> = match item {
            Item::Text(text) => (pieces(text, 2).iter())
                .map(|piece| obj([("type", s("text_delta")), ("text", s(piece))]))
                .collect(),
            Item::Thinking(text) => vec![
                obj([("type", s("thinking_delta")), ("thinking", s(text))]),
                obj([("type", s("signature_delta")), ("signature", s("c2ln"))]),
            ],
            Item::Call(call) => (pieces(&call.arguments, call.pieces).iter())
                .map(|piece| obj([("type", s("input_json_delta")), ("partial_json", s(piece))]))
                .collect(),
        };
        for delta in deltas {
            push("content_block_delta", vec![at(index), ("delta", delta)]);
        }
        push("content_block_stop", vec![at(index)]);
        index += 1;
        if let Some(result) = result {
            push(
                "content_block_start",
                vec![at(index), ("content_block", result)],
            );
            push("content_block_stop", vec![at(index)]);
            index += 1;
        }
    }
    push(
        "message_delta",
        vec![
            (
                "delta",
                obj([("stop_reason", s("tool_use")), ("stop_sequence", J::Null)]),
            ),
            ("usage", obj([("output_tokens", n(9))])),
        ],
    );
    push("message_stop", Vec::new());
    events
}

// --- Gemini

fn gemini_part(item: &Item) -> J {
    match item {
        Item::Text(text) => obj([("text", s(text))]),
        Item::Thinking(text) => obj([("text", s(text)), ("thought", J::Bool(true))]),
        Item::Call(call) => match call.kind {
            CallKind::ExecutableCode => obj([("executableCode", arguments_value(call))]),
            CallKind::FunctionCallPart { snake } => obj([(
                if snake {
                    "function_call"
                } else {
                    "functionCall"
                },
                obj([
                    ("name", s(&call.name)),
                    ("args", arguments_value(call)),
                    ("id", s(&call.id)),
                ]),
            )]),
            _ => unreachable!("a Gemini plan makes Gemini calls"),
        },
    }
}

fn gemini_chunk(parts: Vec<J>, finished: bool) -> J {
    let mut candidate = vec![
        (
            "content",
            obj([("role", s("model")), ("parts", J::Arr(parts))]),
        ),
        ("index", n(0)),
    ];
    if finished {
        candidate.push(("finishReason", s("STOP")));
    }
    let mut fields = vec![
        ("candidates", arr([obj(candidate)])),
        ("modelVersion", s("gemini-2.5-flash")),
    ];
    if finished {
        fields.push((
            "usageMetadata",
            obj([("promptTokenCount", n(12)), ("candidatesTokenCount", n(7))]),
        ));
    }
    obj(fields)
}

fn gemini_json(items: &[Item]) -> J {
    gemini_chunk(items.iter().map(gemini_part).collect(), true)
}

/// One chunk per part (text in two), then a finishing chunk: each chunk a whole answer.
fn gemini_stream(items: &[Item]) -> Vec<Event> {
    let mut events = Vec::new();
    for item in items {
        let parts = match item {
            Item::Text(text) => pieces(text, 2)
                .iter()
                .map(|piece| obj([("text", s(piece))]))
                .collect(),
            _ => vec![gemini_part(item)],
        };
        for part in parts {
            events.push(Event::json(None, gemini_chunk(vec![part], false)));
        }
    }
    events.push(Event::json(None, gemini_chunk(Vec::new(), true)));
    events
}

fn answer_json(plan: &Plan) -> J {
    let items = items(plan);
    match plan.format {
        WireFormat::ChatCompletions => chat_json(&items),
        WireFormat::Responses => response_object(&items[0], true),
        WireFormat::Gemini => gemini_json(&items[0]),
        WireFormat::AnthropicMessages => anthropic_json(&items[0]),
    }
}

fn answer_stream(plan: &Plan) -> Vec<Event> {
    let items = items(plan);
    match plan.format {
        WireFormat::ChatCompletions => chat_stream(&items),
        WireFormat::Responses => responses_stream(&items[0]),
        WireFormat::Gemini => gemini_stream(&items[0]),
        WireFormat::AnthropicMessages => anthropic_stream(&items[0]),
    }
}

// ---------------------------------------------------------------------------------------------
// Events, and the damage done to answers.

#[derive(Debug, Clone)]
struct Event {
    name: Option<String>,
    data: Data,
}

#[derive(Debug, Clone)]
enum Data {
    Json {
        value: J,
        escape_all: bool,
    },
    /// `data:` lines as written (after a split or a merge).
    Lines(Vec<Vec<u8>>),
}

impl Event {
    fn json(name: Option<&str>, value: J) -> Self {
        Event {
            name: name.map(str::to_owned),
            data: Data::Json {
                value,
                escape_all: false,
            },
        }
    }

    fn text(name: Option<&str>, text: &[u8]) -> Self {
        Event {
            name: name.map(str::to_owned),
            data: Data::Lines(vec![text.to_vec()]),
        }
    }

    fn lines(&self) -> Vec<Vec<u8>> {
        match &self.data {
            Data::Json { value, escape_all } => vec![to_bytes(value, *escape_all)],
            Data::Lines(lines) => lines.clone(),
        }
    }
}

fn write_events(events: &[Event]) -> Vec<u8> {
    let mut out = Vec::new();
    for event in events {
        if let Some(name) = &event.name {
            out.extend_from_slice(format!("event: {name}\n").as_bytes());
        }
        for line in event.lines() {
            out.extend_from_slice(b"data: ");
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
        out.push(b'\n');
    }
    out
}

/// One change to an answer. Selectors are taken modulo what there is to choose from.
#[derive(Debug, Clone)]
enum Mutation {
    /// Repeats a key of some object with another value, before or after the original.
    Duplicate {
        event: usize,
        object: usize,
        key: usize,
        before: bool,
        variant: u8,
    },
    /// Gives a value the wrong type: an index as a string, an id or a name as a number, a
    /// name as an array, a list as a lone object.
    Confuse {
        event: usize,
        object: usize,
        key: usize,
        variant: u8,
    },
    /// Puts bytes that are not UTF-8 into a string (a name or arguments first).
    BadUtf8 {
        event: usize,
        string: usize,
        at: usize,
        variant: u8,
    },
    /// Writes one key with `\u` escapes.
    EscapeKey {
        event: usize,
        object: usize,
        key: usize,
    },
    /// Writes every key and string of an event (or of all of them) with `\u` escapes.
    EscapeAll { event: usize, every: bool },
    /// Adds a `type` to a chat chunk (or to any event's top level).
    AddType { event: usize, variant: u8 },
    /// Cuts an event's data in two: two events, or two `data:` lines of one.
    Split {
        event: usize,
        at: usize,
        in_lines: bool,
    },
    /// Joins an event's data lines with the next event's.
    Merge { event: usize },
    /// Inserts a call event of some format.
    Foreign { at: usize, which: u8 },
    /// Ends the stream early, before its terminal event.
    CutOff { keep: usize },
}

const TYPE_SWAPS: [(&str, &str); 14] = [
    ("function", "custom"),
    ("custom", "function"),
    ("function_call", "custom_tool_call"),
    ("custom_tool_call", "message"),
    ("message", "function_call"),
    ("tool_use", "server_tool_use"),
    ("server_tool_use", "text"),
    ("text", "tool_use"),
    ("input_json_delta", "text_delta"),
    ("text_delta", "input_json_delta"),
    ("content_block_start", "message_start"),
    ("content_block_delta", "content_block_start"),
    ("response.output_item.added", "response.output_item.done"),
    ("response.output_item.done", "response.completed"),
];

/// Another value for the same key: another name, a confusable type, another shape.
fn other_value(value: &J, variant: u8) -> J {
    match value {
        J::Str(bytes) => {
            let text = String::from_utf8_lossy(bytes);
            let swap = TYPE_SWAPS.iter().find(|(from, _)| *from == text);
            match (variant % 4, swap) {
                (0, Some((_, to))) => s(to),
                (0 | 1, _) => s(&format!("evil_{variant}")),
                (2, _) => s(""),
                _ => J::Null,
            }
        }
        J::Num(number) => match variant % 3 {
            0 => n(number + 1),
            1 => s(&(number + 1).to_string()),
            _ => J::Null,
        },
        J::Arr(items) => match (variant % 3, items.first()) {
            (0, _) => arr([]),
            (1, Some(first)) => arr([other_value(first, variant / 3)]),
            _ => J::Null,
        },
        J::Obj(fields) => match variant % 3 {
            0 => obj([]),
            1 => {
                // The same object with one of its values changed: a different call, same shape.
                let mut fields = fields.clone();
                let count = fields.len().max(1);
                if let Some(field) = fields.get_mut(usize::from(variant / 3) % count) {
                    field.value = other_value(&field.value, variant / 3);
                }
                J::Obj(fields)
            }
            _ => J::Null,
        },
        J::Null | J::Bool(_) => match variant % 2 {
            0 => s(&format!("evil_{variant}")),
            _ => obj([]),
        },
    }
}

/// The same content with the wrong type.
fn confused(value: &J, variant: u8) -> J {
    match value {
        J::Str(bytes) => match variant % 4 {
            0 => n(42),
            1 => arr([J::Str(bytes.clone())]),
            2 => obj([("name", J::Str(bytes.clone()))]),
            _ => J::Bool(true),
        },
        J::Num(number) => match variant % 3 {
            0 => s(&number.to_string()),
            1 => s(&format!(" {number} ")),
            _ => n(-1 - number),
        },
        J::Arr(items) => match (variant % 2, items.first()) {
            (0, Some(first)) => first.clone(),
            _ => s(""),
        },
        J::Obj(_) => match variant % 2 {
            0 => arr([value.clone()]),
            _ => J::Str(to_bytes(value, false)),
        },
        J::Null | J::Bool(_) => n(0),
    }
}

const BAD_BYTES: [&[u8]; 4] = [b"\xFF", b"\xC0\xAF", b"\xE2\x82", b"\xED\xA0\x80"];

fn foreign_event(which: u8) -> Event {
    let name = format!("foreign_{which}");
    let function_call = obj([
        ("id", s("fc_foreign")),
        ("type", s("function_call")),
        ("call_id", s("call_foreign")),
        ("name", s(&name)),
        ("arguments", s("{}")),
    ]);
    let tool_use = obj([
        ("type", s("tool_use")),
        ("id", s("toolu_foreign")),
        ("name", s(&name)),
        ("input", obj([])),
    ]);
    let chat_call = obj([
        ("index", n(7)),
        ("id", s("call_foreign")),
        ("type", s("function")),
        (
            "function",
            obj([("name", s(&name)), ("arguments", s("{}"))]),
        ),
    ]);
    let gemini_call = obj([(
        "candidates",
        arr([obj([(
            "content",
            obj([(
                "parts",
                arr([obj([(
                    "functionCall",
                    obj([("name", s(&name)), ("args", obj([]))]),
                )])]),
            )]),
        )])]),
    )]);
    if which % 8 == 7 {
        return Event::json(None, gemini_call);
    }
    let (event, value) = match which % 8 {
        0 => (
            "response.output_item.added",
            obj([
                ("type", s("response.output_item.added")),
                ("output_index", n(7)),
                ("item", function_call),
            ]),
        ),
        1 => (
            "response.output_item.done",
            obj([
                ("type", s("response.output_item.done")),
                ("output_index", n(7)),
                ("item", function_call),
            ]),
        ),
        2 => (
            "response.completed",
            obj([
                ("type", s("response.completed")),
                ("response", obj([("output", arr([function_call]))])),
            ]),
        ),
        3 => (
            "content_block_start",
            obj([
                ("type", s("content_block_start")),
                ("index", n(7)),
                ("content_block", tool_use),
            ]),
        ),
        4 => (
            "message_start",
            obj([
                ("type", s("message_start")),
                ("message", anthropic_message(vec![tool_use], false)),
            ]),
        ),
        5 => (
            "",
            obj([(
                "choices",
                arr([obj([
                    ("index", n(0)),
                    ("delta", obj([("tool_calls", arr([chat_call]))])),
                ])]),
            )]),
        ),
        _ => (
            "",
            obj([(
                "choices",
                arr([obj([
                    ("index", n(3)),
                    (
                        "delta",
                        obj([(
                            "function_call",
                            obj([("name", s(&name)), ("arguments", s("{}"))]),
                        )]),
                    ),
                ])]),
            )]),
        ),
    };
    Event::json(Some(event).filter(|event| !event.is_empty()), value)
}

/// The JSON of the event a selector picks, if there is one to pick.
fn pick_json(events: &mut [Event], selector: usize) -> Option<(&mut J, &mut bool)> {
    let json: Vec<usize> = (0..events.len())
        .filter(|&position| matches!(events[position].data, Data::Json { .. }))
        .collect();
    let position = *json.get(selector % json.len().max(1))?;
    match &mut events[position].data {
        Data::Json { value, escape_all } => Some((value, escape_all)),
        Data::Lines(_) => None,
    }
}

/// The object a selector picks in `value`, and the key position in it.
fn pick_field(value: &mut J, object: usize, key: usize) -> Option<(&mut Vec<Field>, usize)> {
    let paths = object_paths(value);
    let path = paths.get(object % paths.len().max(1))?;
    match node_mut(value, path) {
        J::Obj(fields) if !fields.is_empty() => {
            let key = key % fields.len();
            Some((fields, key))
        }
        _ => None,
    }
}

fn apply(events: &mut Vec<Event>, mutation: &Mutation) {
    match *mutation {
        Mutation::Duplicate {
            event,
            object,
            key,
            before,
            variant,
        } => {
            let Some((value, _)) = pick_json(events, event) else {
                return;
            };
            if let Some((fields, key)) = pick_field(value, object, key) {
                let mut repeated = fields[key].clone();
                repeated.value = other_value(&repeated.value, variant);
                fields.insert(if before { key } else { key + 1 }, repeated);
            }
        }
        Mutation::Confuse {
            event,
            object,
            key,
            variant,
        } => {
            let Some((value, _)) = pick_json(events, event) else {
                return;
            };
            if let Some((fields, key)) = pick_field(value, object, key) {
                fields[key].value = confused(&fields[key].value, variant);
            }
        }
        Mutation::BadUtf8 {
            event,
            string,
            at,
            variant,
        } => {
            let Some((value, _)) = pick_json(events, event) else {
                return;
            };
            let paths = string_paths(value);
            let Some(path) = paths.get(string % paths.len().max(1)) else {
                return;
            };
            if let J::Str(bytes) = node_mut(value, path) {
                let at = at % (bytes.len() + 1);
                let bad = BAD_BYTES[usize::from(variant) % BAD_BYTES.len()];
                bytes.splice(at..at, bad.iter().copied());
            }
        }
        Mutation::EscapeKey { event, object, key } => {
            let Some((value, _)) = pick_json(events, event) else {
                return;
            };
            if let Some((fields, key)) = pick_field(value, object, key) {
                fields[key].escaped = true;
            }
        }
        Mutation::EscapeAll { event, every } => match every {
            true => {
                for event in events.iter_mut() {
                    if let Data::Json { escape_all, .. } = &mut event.data {
                        *escape_all = true;
                    }
                }
            }
            false => {
                if let Some((_, escape_all)) = pick_json(events, event) {
                    *escape_all = true;
                }
            }
        },
        Mutation::AddType { event, variant } => {
            let chat_chunk = |event: &Event| match &event.data {
                Data::Json {
                    value: J::Obj(fields),
                    ..
                } => fields.iter().any(|field| field.key == "choices"),
                _ => false,
            };
            let chunks: Vec<usize> = (0..events.len())
                .filter(|&position| chat_chunk(&events[position]))
                .collect();
            let Some(&position) = chunks.get(event % chunks.len().max(1)) else {
                return;
            };
            let kinds = [
                "chat.completion.chunk",
                "message",
                "response.output_text.delta",
                "content_block_delta",
            ];
            if let Data::Json {
                value: J::Obj(fields),
                ..
            } = &mut events[position].data
            {
                fields.push(Field {
                    key: "type".to_owned(),
                    escaped: false,
                    value: s(kinds[usize::from(variant) % kinds.len()]),
                });
            }
        }
        Mutation::Split {
            event,
            at,
            in_lines,
        } => {
            if events.is_empty() {
                return;
            }
            let position = event % events.len();
            let data = events[position].lines().join(&b'\n');
            let at = at % (data.len() + 1);
            let (head, tail) = (data[..at].to_vec(), data[at..].to_vec());
            let name = events[position].name.clone();
            match in_lines {
                true => events[position].data = Data::Lines(vec![head, tail]),
                false => {
                    events[position].data = Data::Lines(vec![head]);
                    events.insert(
                        position + 1,
                        Event {
                            name,
                            data: Data::Lines(vec![tail]),
                        },
                    );
                }
            }
        }
        Mutation::Merge { event } => {
            if events.len() < 2 {
                return;
            }
            let position = event % (events.len() - 1);
            let next = events.remove(position + 1);
            let mut lines = events[position].lines();
            lines.extend(next.lines());
            events[position].data = Data::Lines(lines);
        }
        Mutation::Foreign { at, which } => {
            let at = at % (events.len() + 1);
            events.insert(at, foreign_event(which));
        }
        Mutation::CutOff { keep } => {
            if !events.is_empty() {
                events.truncate(keep % events.len());
            }
        }
    }
}

/// What is written before a body: nothing, or what an SSE client skips (a byte-order mark,
/// blank lines, a comment, fields it ignores).
const PREFIXES: [&[u8]; 8] = [
    b"",
    b"\xEF\xBB\xBF",
    b"\n\n",
    b": keep-alive\n\n",
    b"id: 1\n",
    b"retry: 3000\n\n",
    b"x-request-id: 42\n\n",
    b"\r\n",
];

/// The stream relay's verdict on a stream delivered in chunks cut at `cuts`.
fn stream_is_guarded_cut(hint: WireFormat, stream: &[u8], cuts: &[usize]) -> Result<(), String> {
    let mut positions: Vec<usize> = cuts.iter().map(|cut| cut % (stream.len() + 1)).collect();
    positions.sort_unstable();
    positions.dedup();
    let mut chunks = Vec::new();
    let mut start = 0;
    for position in positions.into_iter().chain([stream.len()]) {
        chunks.push(&stream[start..position]);
        start = position;
    }
    stream_is_guarded(hint, stream, chunks)
}

// ---------------------------------------------------------------------------------------------
// Strategies.

fn format() -> impl Strategy<Value = WireFormat> {
    prop::sample::select(WireFormat::ALL.to_vec())
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        1 => Just(Part::Text),
        1 => Just(Part::Thinking),
        4 => (any::<u8>(), 1u8..=3, any::<bool>()).prop_map(|(kind, pieces, split_name)| {
            Part::Call { kind, pieces, split_name }
        }),
    ]
}

fn plan() -> impl Strategy<Value = Plan> {
    let choices = prop::collection::vec(prop::collection::vec(part(), 0..=4), 0..=3);
    (format(), choices).prop_map(|(format, choices)| Plan { format, choices })
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>;
    prop_oneof![
        4 => (at(), at(), at(), any::<bool>(), any::<u8>()).prop_map(
            |(event, object, key, before, variant)| Mutation::Duplicate { event, object, key, before, variant }
        ),
        3 => (at(), at(), at(), any::<u8>()).prop_map(|(event, object, key, variant)| {
            Mutation::Confuse { event, object, key, variant }
        }),
        2 => (at(), at(), at(), any::<u8>()).prop_map(|(event, string, at, variant)| {
            Mutation::BadUtf8 { event, string, at, variant }
        }),
        1 => (at(), at(), at()).prop_map(|(event, object, key)| Mutation::EscapeKey { event, object, key }),
        1 => (at(), any::<bool>()).prop_map(|(event, every)| Mutation::EscapeAll { event, every }),
        1 => (at(), any::<u8>()).prop_map(|(event, variant)| Mutation::AddType { event, variant }),
        2 => (at(), at(), any::<bool>()).prop_map(|(event, at, in_lines)| {
            Mutation::Split { event, at, in_lines }
        }),
        1 => at().prop_map(|event| Mutation::Merge { event }),
        2 => (at(), any::<u8>()).prop_map(|(at, which)| Mutation::Foreign { at, which }),
        1 => at().prop_map(|keep| Mutation::CutOff { keep }),
    ]
}

/// A complete answer's body after its mutations. `framing`: 0-2 the JSON itself, 3 in a list, 4 as one
/// SSE event, 5 as one SSE event followed by `[DONE]`. Event mutations do not apply to a body.
fn json_body(plan: &Plan, mutations: &[Mutation], framing: u8) -> Vec<u8> {
    let mut events = vec![Event::json(None, answer_json(plan))];
    for mutation in mutations {
        if !matches!(
            mutation,
            Mutation::Split { .. }
                | Mutation::Merge { .. }
                | Mutation::Foreign { .. }
                | Mutation::CutOff { .. }
        ) {
            apply(&mut events, mutation);
        }
    }
    match framing {
        0..=2 => events[0].lines().concat(),
        // A list of answers, as Gemini's `streamGenerateContent` without `alt=sse` writes them.
        3 => [&b"["[..], &events[0].lines().concat(), b"]"].concat(),
        4 => write_events(&events),
        _ => {
            events.push(Event::text(None, b"[DONE]"));
            write_events(&events)
        }
    }
}

fn stream_body(plan: &Plan, mutations: &[Mutation], prefix: u8) -> Vec<u8> {
    let mut events = answer_stream(plan);
    for mutation in mutations {
        apply(&mut events, mutation);
    }
    let mut body = PREFIXES[usize::from(prefix) % PREFIXES.len()].to_vec();
    body.extend(write_events(&events));
    body
}

/// 512 cases per property (a few seconds in a debug build); `PROPTEST_CASES` sets more for a
/// longer hunt by hand.
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok();
    ProptestConfig::with_cases(cases.and_then(|cases| cases.parse().ok()).unwrap_or(512))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_call_in_a_json_answer_is_checked_or_the_answer_refused(
        plan in plan(),
        mutations in prop::collection::vec(mutation(), 0..=3),
        hint in format(),
        framing in 0u8..6,
    ) {
        let body = json_body(&plan, &mutations, framing);
        let verdict = body_is_guarded(hint, &body);
        prop_assert!(verdict.is_ok(), "{}\n{:?} body:\n{}", verdict.unwrap_err(), hint,
            String::from_utf8_lossy(&body));
    }

    #[test]
    fn every_call_in_a_stream_is_checked_or_the_stream_refused(
        plan in plan(),
        mutations in prop::collection::vec(mutation(), 0..=4),
        hint in format(),
        as_body in any::<bool>(),
        prefix in any::<u8>(),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let stream = stream_body(&plan, &mutations, prefix);
        let verdict = match as_body {
            true => body_is_guarded(hint, &stream),
            false => stream_is_guarded_cut(hint, &stream, &cuts),
        };
        prop_assert!(verdict.is_ok(), "{}\n{:?} {} stream:\n{}", verdict.unwrap_err(), hint,
            if as_body { "body" } else { "relay" }, String::from_utf8_lossy(&stream));
    }
}

// ---------------------------------------------------------------------------------------------
// No third kind of answer: the same answers in the encodings a JSON reader detects (UTF-16 and
// UTF-32 in both byte orders, with and without a byte-order mark, UTF-8 behind one), and text
// that is no JSON, are checked or refused, as a whole body and through the stream relay.

/// Writes UTF-8 text in another encoding: 0 as it is, 1 behind a UTF-8 byte-order mark, 2-5
/// UTF-16 LE/BE without and with a mark... 6-9 UTF-32 LE/BE likewise.
fn encoded(text: &[u8], encoding: u8) -> Vec<u8> {
    let text = String::from_utf8_lossy(text);
    let bom = matches!(encoding, 4 | 5 | 8 | 9);
    let chars = bom.then_some('\u{feff}').into_iter().chain(text.chars());
    match encoding {
        0 => text.into_owned().into_bytes(),
        1 => [&b"\xEF\xBB\xBF"[..], text.as_bytes()].concat(),
        2 | 4 => chars
            .flat_map(|c| c.encode_utf16(&mut [0; 2]).to_vec())
            .flat_map(u16::to_le_bytes)
            .collect(),
        3 | 5 => chars
            .flat_map(|c| c.encode_utf16(&mut [0; 2]).to_vec())
            .flat_map(u16::to_be_bytes)
            .collect(),
        6 | 8 => chars.flat_map(|c| u32::from(c).to_le_bytes()).collect(),
        _ => chars.flat_map(|c| u32::from(c).to_be_bytes()).collect(),
    }
}

/// Bodies that are not JSON at all, some with a call's fields in them.
const NOT_JSON: [&[u8]; 5] = [
    b"plain text",
    b"<html><body>{\"tool_calls\": []}</body></html>",
    b"{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"x\",\"arguments\":\"{}\"}}]}}]} trailing",
    b"{\"content\":[{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"x\",\"input\":{}}], \"n\": NaN}",
    b"\x00\x01\x02binary",
];

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_call_in_an_answer_in_any_encoding_is_checked_or_refused(
        plan in plan(),
        hint in format(),
        streamed in any::<bool>(),
        through_relay in any::<bool>(),
        encoding in 0u8..10,
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let text = match streamed {
            true => stream_body(&plan, &[], 0),
            false => json_body(&plan, &[], 0),
        };
        let body = encoded(&text, encoding);
        let verdict = match through_relay {
            false => body_is_guarded(hint, &body),
            true => stream_is_guarded_cut(hint, &body, &cuts),
        };
        prop_assert!(verdict.is_ok(), "{}\n{:?} encoding {} body:\n{:?}", verdict.unwrap_err(),
            hint, encoding, String::from_utf8_lossy(&body));
        // Only UTF-8 is read; anything else with a call in it is refused, never guessed at.
        if encoding >= 2 && !client_reads_body(&body).is_empty() {
            prop_assert!(read_answer(hint, &body).is_err(), "encoding {} read", encoding);
        }
    }

    #[test]
    fn a_body_that_is_not_json_is_refused_in_any_encoding(
        which in 0..NOT_JSON.len(),
        hint in format(),
        encoding in 0u8..10,
    ) {
        let body = encoded(NOT_JSON[which], encoding);
        prop_assert!(read_answer(hint, &body).is_err(), "{:?}", String::from_utf8_lossy(&body));
    }
}

#[test]
fn the_encodings_a_json_reader_detects_are_the_oracles_too() {
    let answer = br#"{"choices":[{"message":{"tool_calls":[{"id":"a","type":"function","function":{"name":"x","arguments":"{}"}}]}}]}"#;
    for encoding in 0..10 {
        let body = encoded(answer, encoding);
        assert_eq!(
            client_reads_body(&body),
            BTreeSet::from(["x".to_owned()]),
            "encoding {encoding}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The generators themselves: unmutated answers carry their calls, and toolgate reads them all.

#[test]
fn clean_answers_carry_calls_that_toolgate_reads() {
    let call = |kind| Part::Call {
        kind,
        pieces: 2,
        split_name: true,
    };
    for format in WireFormat::ALL {
        let plan = Plan {
            format,
            choices: vec![
                vec![Part::Thinking, Part::Text, call(0), call(1), call(2)],
                vec![call(3)],
            ],
        };
        let body = json_body(&plan, &[], 0);
        let stream = stream_body(&plan, &[], 0);
        let client = client_reads_body(&body);
        assert!(client.len() >= 2, "{format:?}: {client:?}");
        assert_eq!(client_reads_stream(&stream), client, "{format:?}");
        let read = read_answer(format, &body).expect("a clean answer is read");
        let checked: BTreeSet<String> = checked_names(read.calls).into_iter().collect();
        assert_eq!(checked, client, "{format:?}");
        let relayed = reassemble(format, [stream.as_slice()]);
        assert!(
            relayed.refused.is_none(),
            "{format:?}: {:?}",
            relayed.refused
        );
        let streamed: BTreeSet<String> =
            checked_names(relayed.response.calls).into_iter().collect();
        assert_eq!(streamed, client, "{format:?}");
    }
}

proptest! {
    #![proptest_config(config())]

    /// The converse: a guard that refused everything would pass the properties above, so a
    /// valid, well-formed answer must pass, whole and streamed, with exactly the calls a client
    /// would run — the same names, as many times, with the same arguments.
    #[test]
    fn a_clean_answer_passes_with_exactly_the_calls_a_client_runs(
        plan in plan(),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let format = plan.format;
        let body = json_body(&plan, &[], 0);
        let read = read_answer(format, &body);
        prop_assert!(read.is_ok(), "{:?} refused: {:?}\n{}", format, read.err(),
            String::from_utf8_lossy(&body));
        let read = read.unwrap_or_default();
        prop_assert_eq!(oracle::checked_runs(&read.calls),
            oracle::client_runs_beside(&read.calls, oracle::client_runs(&body, false)),
            "{:?} whole:\n{}", format, String::from_utf8_lossy(&body));

        let stream = stream_body(&plan, &[], 0);
        let mut positions: Vec<usize> = cuts.iter().map(|cut| cut % (stream.len() + 1)).collect();
        positions.sort_unstable();
        positions.dedup();
        let mut chunks = Vec::new();
        let mut start = 0;
        for position in positions.into_iter().chain([stream.len()]) {
            chunks.push(&stream[start..position]);
            start = position;
        }
        let relayed = reassemble(format, chunks);
        prop_assert!(relayed.refused.is_none(), "{:?} stream refused: {:?}", format,
            relayed.refused);
        // Streamed too: the same calls, as many times, with the same arguments as parsed.
        prop_assert_eq!(oracle::checked_runs(&relayed.response.calls),
            oracle::client_runs_beside(&relayed.response.calls, oracle::client_runs(&stream, true)),
            "{:?} streamed:\n{}", format, String::from_utf8_lossy(&stream));
    }
}

// ---------------------------------------------------------------------------------------------
// The same properties with the oracle that is not toolgate's: the official OpenAI and Anthropic
// Python SDKs read each answer (`support/sdk_oracle.rs`). Fewer cases by default: each is a
// round trip to the SDKs' process.

/// 256 cases per property, or `PROPTEST_CASES`.
fn sdk_config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok();
    ProptestConfig::with_cases(cases.and_then(|cases| cases.parse().ok()).unwrap_or(256))
}

/// Every call name an SDK client reads from `bytes`, whether it asked for a stream or not.
fn sdk_names(bytes: &[u8]) -> Option<BTreeSet<String>> {
    let mut names = sdk_oracle::sdk_reads(bytes, false)?.names;
    names.extend(sdk_oracle::sdk_reads(bytes, true)?.names);
    Some(names)
}

/// `Ok` when every name the SDKs read was checked, or the answer refused.
fn sdk_judge(client: BTreeSet<String>, checked: Result<Vec<String>, String>) -> Result<(), String> {
    let Ok(checked) = checked else {
        return Ok(());
    };
    let missed: Vec<&String> = client
        .iter()
        .filter(|name| !checked.contains(name))
        .collect();
    match missed.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "an SDK reads calls {missed:?} toolgate did not check ({checked:?})"
        )),
    }
}

/// The calls toolgate checked that a client runs itself (not a provider's built-ins), as the
/// SDK oracle lists runs.
fn client_side_runs(calls: &[toolgate_formats::ToolCall]) -> Vec<(String, String)> {
    let own: Vec<toolgate_formats::ToolCall> = calls
        .iter()
        .filter(|call| call.kind != toolgate_formats::ToolKind::Builtin)
        .cloned()
        .collect();
    oracle::checked_runs(&own)
}

/// The runs of `client` that `checked` does not hold, as multisets.
fn not_within(client: &[(String, String)], checked: &[(String, String)]) -> Vec<(String, String)> {
    let mut left = checked.to_vec();
    let mut missed = Vec::new();
    for run in client {
        match left.iter().position(|checked| checked == run) {
            Some(position) => {
                left.swap_remove(position);
            }
            None => missed.push(run.clone()),
        }
    }
    missed
}

proptest! {
    #![proptest_config(sdk_config())]

    #[test]
    fn every_call_an_sdk_reads_from_a_json_answer_is_checked_or_refused(
        plan in plan(),
        mutations in prop::collection::vec(mutation(), 0..=3),
        hint in format(),
        framing in 0u8..6,
    ) {
        let body = json_body(&plan, &mutations, framing);
        let Some(client) = sdk_names(&body) else { return Ok(()) };
        let read = read_answer(hint, &body);
        let checked = read.clone()
            .map(|response| checked_names(response.calls))
            .map_err(|error| error.to_string());
        let verdict = sdk_judge(client, checked);
        prop_assert!(verdict.is_ok(), "{}\n{:?} body:\n{}", verdict.unwrap_err(), hint,
            String::from_utf8_lossy(&body));
        // What a client runs was checked with the same arguments, as many times.
        if let (Ok(read), Some(sdk)) = (read, sdk_oracle::sdk_reads(&body, false)) {
            let missed = not_within(&sdk.runs, &client_side_runs(&read.calls));
            prop_assert!(missed.is_empty(), "an SDK client runs {:?}, unchecked as run\n{:?} body:\n{}",
                missed, hint, String::from_utf8_lossy(&body));
        }
    }

    #[test]
    fn every_call_an_sdk_reads_from_a_stream_is_checked_or_refused(
        plan in plan(),
        mutations in prop::collection::vec(mutation(), 0..=4),
        hint in format(),
        prefix in any::<u8>(),
        cuts in prop::collection::vec(any::<usize>(), 0..4),
    ) {
        let stream = stream_body(&plan, &mutations, prefix);
        let Some(client) = sdk_names(&stream) else { return Ok(()) };
        let mut positions: Vec<usize> = cuts.iter().map(|cut| cut % (stream.len() + 1)).collect();
        positions.sort_unstable();
        positions.dedup();
        let mut chunks = Vec::new();
        let mut start = 0;
        for position in positions.into_iter().chain([stream.len()]) {
            chunks.push(&stream[start..position]);
            start = position;
        }
        let relayed = reassemble(hint, chunks);
        let checked = match &relayed.refused {
            Some(error) => Err(error.to_string()),
            None => Ok(checked_names(relayed.response.calls.clone())),
        };
        let verdict = sdk_judge(client, checked);
        prop_assert!(verdict.is_ok(), "{}\n{:?} stream:\n{}", verdict.unwrap_err(), hint,
            String::from_utf8_lossy(&stream));
        if let (None, Some(sdk)) = (&relayed.refused, sdk_oracle::sdk_reads(&stream, true)) {
            let missed = not_within(&sdk.runs, &client_side_runs(&relayed.response.calls));
            prop_assert!(missed.is_empty(), "an SDK client runs {:?}, unchecked as run\n{:?} stream:\n{}",
                missed, hint, String::from_utf8_lossy(&stream));
        }
    }

    /// The converse, by the SDKs: a clean answer passes with exactly the calls their clients
    /// run (name and arguments, as many times), whole and streamed.
    #[test]
    fn a_clean_answer_passes_with_exactly_the_calls_an_sdk_client_runs(plan in plan()) {
        let format = plan.format;
        let body = json_body(&plan, &[], 0);
        let Some(sdk) = sdk_oracle::sdk_reads(&body, false) else { return Ok(()) };
        let read = read_answer(format, &body);
        prop_assert!(read.is_ok(), "{:?} refused: {:?}", format, read.err());
        prop_assert_eq!(client_side_runs(&read.unwrap_or_default().calls), sdk.runs,
            "{:?} whole:\n{}", format, String::from_utf8_lossy(&body));

        let stream = stream_body(&plan, &[], 0);
        let Some(sdk) = sdk_oracle::sdk_reads(&stream, true) else { return Ok(()) };
        let relayed = reassemble(format, [&stream[..]]);
        prop_assert!(relayed.refused.is_none(), "{:?} stream refused: {:?}", format,
            relayed.refused);
        prop_assert_eq!(client_side_runs(&relayed.response.calls), sdk.runs,
            "{:?} streamed:\n{}", format, String::from_utf8_lossy(&stream));
    }
}

/// The SDK oracle reads what the SDKs' clients read, not nothing: the last of repeated keys, a
/// name joined from a stream's fragments, an Anthropic block by its event, a Responses item.
#[test]
fn the_sdk_oracle_reads_calls_as_the_sdks_do() {
    let names = |body: &[u8], stream: bool| {
        sdk_oracle::sdk_reads(body, stream)
            .map(|reading| reading.names.into_iter().collect::<Vec<_>>())
    };
    let Some(repeated) = names(
        br#"{"choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"safe","name":"evil","arguments":"{}"}}]}}]}"#,
        false,
    ) else {
        return;
    };
    assert_eq!(repeated, ["evil"]);
    let chat = sse(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"get_","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"weather","arguments":"{}"}}]}}]}"#,
        "[DONE]",
    ]);
    assert_eq!(names(&chat, true), Some(vec!["get_weather".to_owned()]));
    let anthropic = b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"lookup\",\"input\":{}}}\n\n";
    assert_eq!(names(anthropic, true), Some(vec!["lookup".to_owned()]));
    let responses = sse(&[
        r#"{"type":"response.output_item.added","output_index":0,"sequence_number":1,"item":{"type":"function_call","id":"fc","call_id":"c","name":"search","arguments":""}}"#,
    ]);
    assert_eq!(names(&responses, true), Some(vec!["search".to_owned()]));
}

// ---------------------------------------------------------------------------------------------
// Regressions: the minimal answers the properties found getting past toolgate.

/// `data:` events from their data, one a line.
fn sse(data: &[&str]) -> Vec<u8> {
    data.iter()
        .flat_map(|data| format!("data: {data}\n\n").into_bytes())
        .collect()
}

fn assert_guarded(hint: WireFormat, stream: &[u8]) {
    let text = String::from_utf8_lossy(stream);
    assert!(!client_reads_stream(stream).is_empty(), "{text}");
    stream_is_guarded(hint, stream, [stream])
        .unwrap_or_else(|error| panic!("relay: {error}\n{text}"));
    body_is_guarded(hint, stream).unwrap_or_else(|error| panic!("body: {error}\n{text}"));
}

#[test]
fn a_second_message_start_listing_a_call_is_refused() {
    let stream = sse(&[
        r#"{"type":"message_start","message":{"type":"message","content":[]}}"#,
        r#"{"type":"message_start","message":{"type":"message","content":[{"type":"tool_use","id":"t","name":"evil","input":{}}]}}"#,
        r#"{"type":"message_stop"}"#,
    ]);
    assert_guarded(WireFormat::AnthropicMessages, &stream);
}

#[test]
fn a_responses_call_named_by_a_number_or_an_array_is_checked_by_that_name() {
    for name in ["42", r#"["evil"]"#] {
        let items = [
            format!(r#"{{"type":"custom_tool_call","call_id":"c","name":{name},"input":"x"}}"#),
            format!(r#"{{"type":"function_call","call_id":"d","name":{name},"arguments":"{{}}"}}"#),
        ];
        for item in &items {
            let body = format!(r#"{{"output":[{item}]}}"#);
            let client = client_reads_body(body.as_bytes());
            assert_eq!(client, BTreeSet::from([name.to_owned()]));
            body_is_guarded(WireFormat::Responses, body.as_bytes()).expect("checked");
            let done =
                format!(r#"{{"type":"response.output_item.done","output_index":0,"item":{item}}}"#);
            assert_guarded(WireFormat::Responses, &sse(&[&done]));
        }
    }
}

#[test]
fn a_call_named_by_a_value_written_with_escapes_is_checked_by_the_name_clients_read() {
    let block = r#"{"type":"tool_use","id":"t","name":["\u0065vil"],"input":{}}"#;
    let body = format!(r#"{{"type":"message","content":[{block}]}}"#);
    assert_eq!(
        client_reads_body(body.as_bytes()),
        BTreeSet::from([r#"["evil"]"#.to_owned()])
    );
    body_is_guarded(WireFormat::AnthropicMessages, body.as_bytes()).expect("checked");
    let start = format!(r#"{{"type":"content_block_start","index":0,"content_block":{block}}}"#);
    assert_guarded(WireFormat::AnthropicMessages, &sse(&[&start]));
}

#[test]
fn a_stream_opening_with_a_line_sse_clients_skip_is_still_read_as_a_stream() {
    // No marker of a call is left in the text once a key is escaped: only reading the events
    // finds the call.
    let stream = [
        &b"x-request-id: 42\n\n"[..],
        &sse(&[
            r#"{"choices":[{"delta":{"tool\u005fcalls":[{"index":0,"id":"c","type":"custom","custom":{"name":"evil","input":""}}]}}]}"#,
        ]),
    ]
    .concat();
    assert_guarded(WireFormat::ChatCompletions, &stream);
}

#[test]
fn a_response_object_with_a_repeated_output_is_refused_when_it_lists_a_call() {
    let item = r#"{"type":"function_call","call_id":"c","name":"evil","arguments":"{}"}"#;
    for kind in ["response.created", "response.completed"] {
        let event = format!(r#"{{"type":"{kind}","response":{{"output":[],"output":[{item}]}}}}"#);
        assert_guarded(WireFormat::Responses, &sse(&[&event]));
    }
}

#[test]
fn a_chat_call_that_goes_on_after_its_finish_is_checked_whole() {
    // The finish comes with the call's first fragment (a number, or the usual string): the
    // guard checks what it has then, and must check the whole call again when it grows.
    for finish in ["0", r#""tool_calls""#] {
        let stream = sse(&[
            &format!(
                r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"id":"c","type":"function","function":{{"name":"get_wea","arguments":""}}}}]}},"finish_reason":{finish}}}]}}"#
            ),
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"ther","arguments":"{}"}}]},"finish_reason":null}]}"#,
            "[DONE]",
        ]);
        assert_eq!(
            client_reads_stream(&stream),
            BTreeSet::from(["get_weather".to_owned()])
        );
        assert_guarded(WireFormat::ChatCompletions, &stream);
    }
}

#[test]
fn a_block_whose_type_is_not_utf8_is_refused_when_a_client_could_read_a_call() {
    // The forgiving reader replaces the byte and sees an unknown block; a client whose decoder
    // drops it reads a `server_tool_use`.
    let stream = [
        &br#"data: {"type":"content_block_start","index":0,"content_block":{"type":""#[..],
        b"\xFF",
        br#"server_tool_use","id":"s","name":"web_search","input":{}}}"#,
        b"\n\n",
    ]
    .concat();
    for format in WireFormat::ALL {
        assert!(reassemble(format, [stream.as_slice()]).refused.is_some());
        assert!(read_answer(format, &stream).is_err());
    }
}

#[test]
fn a_responses_item_opened_or_finished_twice_at_one_index_is_checked_in_both_versions() {
    for state in ["added", "done"] {
        let event = |name: &str| {
            format!(
                r#"{{"type":"response.output_item.{state}","output_index":0,"item":{{"id":"fc","type":"function_call","call_id":"c","name":"{name}","arguments":"{{}}"}}}}"#
            )
        };
        let stream = sse(&[&event("first"), &event("second")]);
        assert_guarded(WireFormat::Responses, &stream);
    }
}

#[test]
fn a_responses_item_finished_under_another_name_than_it_was_added_is_checked_in_both() {
    let item = |state: &str, name: &str| {
        format!(
            r#"{{"type":"response.output_item.{state}","output_index":0,"item":{{"id":"fc","type":"function_call","call_id":"c","name":"{name}","arguments":"{{}}"}}}}"#
        )
    };
    let stream = sse(&[&item("added", "first"), &item("done", "second")]);
    assert_guarded(WireFormat::Responses, &stream);
    let mcp = |state: &str, name: &str| {
        format!(
            r#"{{"type":"response.output_item.{state}","output_index":0,"item":{{"id":"m","type":"mcp_call","server_label":"s","name":"{name}","arguments":""}}}}"#
        )
    };
    let stream = sse(&[&mcp("added", "first"), &mcp("done", "second")]);
    assert_guarded(WireFormat::Responses, &stream);
}

#[test]
fn an_opening_message_that_cannot_be_read_is_refused_when_it_lists_a_call() {
    let call =
        |name: &str| format!(r#"{{"type":"tool_use","id":"t","name":"{name}","input":{{}}}}"#);
    let repeated = format!(
        r#"{{"type":"message_start","message":{{"type":"message","content":[],"content":[{}]}}}}"#,
        call("evil")
    );
    let unreadable_block = format!(
        r#"{{"type":"message_start","message":{{"type":"message","content":[{},{}]}}}}"#,
        call("safe"),
        call("evil").replace(r#""name""#, r#""name":"safe","name""#)
    );
    for opening in [repeated, unreadable_block] {
        assert_guarded(WireFormat::AnthropicMessages, &sse(&[&opening]));
    }
}

#[test]
fn an_event_of_an_unknown_type_carrying_a_call_item_is_refused() {
    let item = r#"{"id":"fc","type":"function_call","call_id":"c","name":"evil","arguments":"{}"}"#;
    let events = [
        format!(r#"{{"type":"response.output_item.updated","output_index":0,"item":{item}}}"#),
        format!(r#"{{"type":"response.snapshot","response":{{"output":[{item}]}}}}"#),
    ];
    for event in events {
        assert_guarded(WireFormat::Responses, &sse(&[&event]));
    }
}

#[test]
fn a_block_whose_type_only_ends_in_tool_use_is_no_call() {
    // SDKs tell blocks by their exact type: the oracle reads no call from these, as no client
    // does, and toolgate shows them as the unknown blocks they are.
    for kind in ["{tool_use", "xtool_use"] {
        let block = format!(r#"{{"type":"{kind}","id":"t","name":"evil","input":{{}}}}"#);
        let body = format!(r#"{{"type":"message","content":[{block}]}}"#);
        assert!(client_reads_body(body.as_bytes()).is_empty());
        // toolgate reads no call from it either (or refuses it): never a call it did not check.
        let read =
            toolgate_formats::answer::read_answer(WireFormat::AnthropicMessages, body.as_bytes());
        assert!(
            read.as_ref()
                .map_or(true, |response| response.calls.is_empty()),
            "{kind}: {read:?}"
        );
        body_is_guarded(WireFormat::AnthropicMessages, body.as_bytes())
            .unwrap_or_else(|error| panic!("{kind}: {error}"));
        let start =
            format!(r#"{{"type":"content_block_start","index":0,"content_block":{block}}}"#);
        let stream = sse(&[&start]);
        assert!(client_reads_stream(&stream).is_empty());
        stream_is_guarded(WireFormat::AnthropicMessages, &stream, [&stream[..]])
            .unwrap_or_else(|error| panic!("{kind} streamed: {error}"));
    }
}

#[test]
fn a_chat_fragment_without_index_is_checked_as_either_client_places_it() {
    // By its new id, toolgate's guess opens a second call; a client that falls back to the
    // fragment's position in the list (`index || 0`) appends it to the first.
    let stream = sse(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"delete","arguments":""}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"b","type":"function","function":{"name":"_all","arguments":"{}"}}]}}]}"#,
        "[DONE]",
    ]);
    assert_eq!(
        client_reads_stream(&stream),
        BTreeSet::from(["delete_all".to_owned()])
    );
    assert_guarded(WireFormat::ChatCompletions, &stream);
}
