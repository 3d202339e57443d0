//! The oracle of the no-bypass property, shared by the property test (`tests/no_bypass.rs`) and
//! the fuzz targets (`fuzz/fuzz_targets/`, which include this file by its path): the calls a
//! client could read from an answer, by the forgiving reader (`lenient`) and an SSE reader of
//! its own (not toolgate's, so the two sides share nothing but the bytes), and the verdict that
//! every such call was checked by toolgate or the answer refused.

use std::collections::BTreeSet;

use toolgate_formats::answer::read_answer;
use toolgate_formats::lenient::{LenientCall, calls_in_json, calls_in_stream};
use toolgate_formats::stream::reassemble;
use toolgate_formats::{ToolCall, ToolKind, WireFormat};

/// The `data` of each event, as an SSE client (WHATWG rules) reads it; a last event without
/// its blank line counts too, as some clients flush it.
fn event_data(stream: &[u8]) -> Vec<Vec<u8>> {
    let stream = stream.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(stream);
    let mut events = Vec::new();
    let mut data: Option<Vec<u8>> = None;
    let mut rest = stream;
    loop {
        let end = rest.iter().position(|&byte| byte == b'\n' || byte == b'\r');
        let line = &rest[..end.unwrap_or(rest.len())];
        if line.is_empty() {
            if end.is_some() {
                events.extend(data.take());
            }
        } else if line[0] != b':' {
            let colon = line.iter().position(|&byte| byte == b':');
            let (field, value) = match colon {
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &[][..]),
            };
            if field == b"data" {
                match &mut data {
                    Some(data) => {
                        data.push(b'\n');
                        data.extend_from_slice(value);
                    }
                    None => data = Some(value.to_vec()),
                }
            }
        }
        let Some(end) = end else { break };
        let skip = match (rest[end], rest.get(end + 1)) {
            (b'\r', Some(b'\n')) => 2,
            _ => 1,
        };
        rest = &rest[end + skip..];
    }
    events.extend(data);
    events
}

fn named(calls: impl IntoIterator<Item = LenientCall>) -> BTreeSet<String> {
    calls
        .into_iter()
        .map(|call| call.name)
        .filter(|name| !name.is_empty())
        .collect()
}

/// What a client could read from a body: as one JSON document (in any encoding a JSON reader
/// detects, as Python's `json` and the SDKs on it do), or as an event stream.
pub fn client_reads_body(body: &[u8]) -> BTreeSet<String> {
    let mut names = named(calls_in_documents(body));
    if let Some(decoded) = decoded_as_json_readers_do(body) {
        names.extend(named(calls_in_documents(decoded.as_bytes())));
    }
    names.extend(client_reads_stream(body));
    names
}

/// The calls of a body read as one JSON answer or, when it is a list, as each answer in it (a
/// client of Gemini's `streamGenerateContent` without `alt=sse` reads every chunk of the list).
fn calls_in_documents(body: &[u8]) -> Vec<LenientCall> {
    let text = String::from_utf8_lossy(body);
    match serde_json::from_str::<serde_json::Value>(text.trim()) {
        Ok(serde_json::Value::Array(items)) => (items.iter())
            .flat_map(|item| calls_in_json(item.to_string().as_bytes()).unwrap_or_default())
            .collect(),
        _ => calls_in_json(body).unwrap_or_default(),
    }
}

/// The text of a body whose encoding a JSON reader detects from its first bytes (RFC 8259's
/// and RFC 4627's rule, as Python's `json.loads` on bytes applies it): a byte-order mark, or
/// where the NUL bytes of its first ASCII character fall. `None` when it is plain UTF-8 (read
/// as it is) or does not decode.
pub fn decoded_as_json_readers_do(body: &[u8]) -> Option<String> {
    fn units<const N: usize>(body: &[u8], read: fn([u8; N]) -> u32) -> Vec<u32> {
        body.chunks_exact(N)
            .map(|chunk| read(chunk.try_into().unwrap_or([0; N])))
            .collect()
    }
    fn utf16(units: Vec<u32>) -> Option<String> {
        let units: Vec<u16> = units.into_iter().map(|unit| unit as u16).collect();
        char::decode_utf16(units)
            .collect::<Result<String, _>>()
            .ok()
    }
    fn utf32(units: Vec<u32>) -> Option<String> {
        units.into_iter().map(char::from_u32).collect()
    }
    let le16 = |bytes: [u8; 2]| u32::from(u16::from_le_bytes(bytes));
    let be16 = |bytes: [u8; 2]| u32::from(u16::from_be_bytes(bytes));
    let text = match body {
        [0xEF, 0xBB, 0xBF, rest @ ..] => String::from_utf8(rest.to_vec()).ok(),
        [0xFF, 0xFE, 0, 0, rest @ ..] => utf32(units(rest, u32::from_le_bytes)),
        [0, 0, 0xFE, 0xFF, rest @ ..] => utf32(units(rest, u32::from_be_bytes)),
        [0xFF, 0xFE, rest @ ..] => utf16(units(rest, le16)),
        [0xFE, 0xFF, rest @ ..] => utf16(units(rest, be16)),
        [0, 0, 0, _, ..] => utf32(units(body, u32::from_be_bytes)),
        [0, _, ..] => utf16(units(body, be16)),
        [_, 0, 0, 0, ..] => utf32(units(body, u32::from_le_bytes)),
        [_, 0, ..] => utf16(units(body, le16)),
        _ => None,
    };
    text.map(|text| text.trim_start_matches('\u{feff}').to_owned())
}

/// What a client would run from a clean answer: each call as (name, arguments), the arguments
/// as the JSON value a client parses them into (their text when they are not JSON), sorted —
/// a multiset, so a second call of one name, or one checked with other arguments, shows.
pub fn client_runs(body: &[u8], streamed: bool) -> Vec<(String, String)> {
    let calls = match streamed {
        false => calls_in_documents(body),
        true => {
            let data = event_data(body);
            calls_in_stream(data.iter().map(Vec::as_slice))
        }
    };
    runs(calls.into_iter().map(|call| (call.name, call.arguments)))
}

/// The calls toolgate checked, as [`client_runs`] lists them. A built-in call the provider ran
/// is no call the client runs: its name counts, not its payload (an MCP item is named by the
/// MCP tool its payload names, as [`checked_names`] says).
pub fn checked_runs(calls: &[ToolCall]) -> Vec<(String, String)> {
    runs(calls.iter().map(|call| match call.kind {
        ToolKind::Builtin => {
            let named = (call.name == "mcp")
                .then(|| {
                    let mut values =
                        serde_json::Deserializer::from_str(&call.arguments).into_iter();
                    let payload: Option<serde_json::Value> = values.next().and_then(Result::ok);
                    payload?.get("name")?.as_str().map(str::to_owned)
                })
                .flatten();
            (named.unwrap_or_else(|| call.name.clone()), String::new())
        }
        _ => (call.name.clone(), call.arguments.clone()),
    }))
}

/// [`client_runs`] with the arguments of the calls `checked` holds as provider-run built-ins
/// left out, as [`checked_runs`] leaves theirs.
pub fn client_runs_beside(
    checked: &[ToolCall],
    client: Vec<(String, String)>,
) -> Vec<(String, String)> {
    let builtin: BTreeSet<String> = checked_runs(
        &checked
            .iter()
            .filter(|call| call.kind == ToolKind::Builtin)
            .cloned()
            .collect::<Vec<_>>(),
    )
    .into_iter()
    .map(|(name, _)| name)
    .collect();
    runs(
        client
            .into_iter()
            .map(|(name, arguments)| match builtin.contains(&name) {
                true => (name, String::new()),
                false => (name, arguments),
            }),
    )
}

fn runs(calls: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut runs: Vec<(String, String)> = calls
        .filter(|(name, _)| !name.is_empty())
        .map(|(name, arguments)| {
            let parsed = serde_json::from_str::<serde_json::Value>(&arguments)
                .map_or(arguments, |value| value.to_string());
            (name, parsed)
        })
        .collect();
    runs.sort();
    runs
}

pub fn client_reads_stream(stream: &[u8]) -> BTreeSet<String> {
    let data = event_data(stream);
    named(calls_in_stream(data.iter().map(Vec::as_slice)))
}

/// `Ok` when every call a client reads was checked, or the answer refused.
fn judge(client: BTreeSet<String>, checked: Result<Vec<String>, String>) -> Result<(), String> {
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
            "unchecked calls {missed:?} (toolgate checked {checked:?})"
        )),
    }
}

/// The names a call toolgate checked answers for. A Responses MCP item (`mcp_call`,
/// `mcp_approval_request`) is checked as the built-in `mcp` tool the request declares, with the
/// MCP tool's `name` in its arguments: the oracle names it by that `name`, so both count. (A
/// streamed item's argument deltas follow that payload in the text checked: it is read first.)
pub fn checked_names(calls: Vec<ToolCall>) -> Vec<String> {
    let mut names = Vec::new();
    for call in calls {
        if call.kind == ToolKind::Builtin && call.name == "mcp" {
            let mut values = serde_json::Deserializer::from_str(&call.arguments).into_iter();
            let payload: Option<serde_json::Value> = values.next().and_then(Result::ok);
            match payload.as_ref().and_then(|payload| payload.get("name")) {
                Some(serde_json::Value::String(name)) => names.push(name.clone()),
                Some(other) => names.push(other.to_string()),
                None => {}
            }
        }
        names.push(call.name);
    }
    names
}

/// The gateway's verdict on a complete answer body.
pub fn body_is_guarded(hint: WireFormat, body: &[u8]) -> Result<(), String> {
    let checked = read_answer(hint, body)
        .map(|response| checked_names(response.calls))
        .map_err(|error| error.to_string());
    judge(client_reads_body(body), checked)
}

/// The stream relay's verdict on a stream delivered in `chunks`.
pub fn stream_is_guarded<'a>(
    hint: WireFormat,
    stream: &[u8],
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(), String> {
    let reassembled = reassemble(hint, chunks);
    // Anthropic clients parse a block's input in partial mode: input that is not JSON would be
    // run as another call than the text checked, so it must have been refused.
    if hint == WireFormat::AnthropicMessages && reassembled.refused.is_none() {
        let partial = (reassembled.response.calls.iter())
            .find(|call| serde_json::from_str::<serde_json::Value>(&call.arguments).is_err());
        if let Some(call) = partial {
            return Err(format!(
                "'{}' was checked with input that is not JSON ({:?}), which clients read partially",
                call.name, call.arguments
            ));
        }
    }
    let checked = match reassembled.refused {
        Some(error) => Err(error.to_string()),
        None => Ok(checked_names(reassembled.response.calls)),
    };
    // A client that did not ask for a stream reads a body sent as one with its JSON reader.
    judge(client_reads_body(stream), checked)
}
