//! The OpenAI Responses API adapter (`/v1/responses`): tools from `tools[]` (function, custom and
//! built-ins declared by type), calls from the `output[]` items of a response (function, custom
//! and every built-in `*_call` item), the conversation from the request's `input[]` items.
//! The stream assembler reads each streamed item through `parse_response`, so a streamed call
//! and the same call in a complete response are read by the same code.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::answer::{Noted, Reading};
use crate::format::{
    Claim, ParseError, ToolResponse, WireFormat, name_text, read_json, text_or_raw_json,
};
use crate::raw_object::RawObject;
use crate::request_reader::RequestReader;
use crate::tool::{CallOutcome, DeclaredTool, HistoryCall, ToolCall, ToolKind, builtin_tool_name};
use crate::tool_entry::{ToolEntry, without_tools};

impl RequestReader for super::Responses {
    const FORMAT: WireFormat = WireFormat::Responses;
    const HAS_BACKGROUND: bool = true;

    fn complete_tools(declared_tools: &mut Vec<DeclaredTool>) {
        for tool in declared_tools {
            tool.name = reported_name(tool).to_owned();
        }
    }
}

/// The name a declared tool is known by to the checks: built-ins by the tool they belong to.
fn reported_name(tool: &DeclaredTool) -> &str {
    match tool.kind {
        ToolKind::Builtin => builtin_tool_name(&tool.name),
        _ => &tool.name,
    }
}

/// An item's fields, kept raw so a malformed call item is still read as a call (of a tool with
/// no name, which no check lets through) rather than failing. A repeated key counts as its last
/// occurrence, as `JSON.parse` and Python's `json` read it.
struct Fields<'a>(RawObject<'a>);

impl<'a> Fields<'a> {
    fn raw(&self, key: &str) -> Option<&'a RawValue> {
        let found = self.0.0.iter().rev().find(|(name, _)| name == key);
        found.map(|(_, raw)| *raw).filter(|raw| raw.get() != "null")
    }

    fn text(&self, key: &str) -> Option<String> {
        serde_json::from_str(self.raw(key)?.get()).ok()
    }
}

/// What an item of `output[]` or `input[]` is, as far as the checks go.
enum Item<'a> {
    Call {
        call: ToolCall,
        /// For a built-in the provider ran itself (no `call_id`): how it went, from its status.
        ran: Option<CallOutcome>,
        /// An MCP approval request proposes a call; it runs later as an `mcp_call`.
        proposal: bool,
    },
    Reasoning(Vec<String>),
    /// A `*_call_output` item: the result of the call with this id.
    Output {
        call_id: Option<String>,
        failed: bool,
    },
    Message {
        role: Option<String>,
        content: Option<&'a RawValue>,
    },
    Other,
}

/// The fields of a built-in call item that say what it does; the rest (ids, status, results)
/// is bookkeeping.
const BUILTIN_PAYLOAD: &str =
    "action actions queries code container_id operation server_label name arguments input";

fn read_item(raw: &RawValue) -> Result<Item<'_>, ParseError> {
    let item = Fields(serde_json::from_str(raw.get())?);
    let kind = item.text("type").unwrap_or_else(|| "message".to_owned());
    let call_kind = match kind.as_str() {
        "function_call" => ToolKind::Function,
        "custom_tool_call" => ToolKind::Custom,
        "mcp_approval_request" => ToolKind::Builtin,
        kind if kind.ends_with("_call_output") => {
            let failed = item.text("status").as_deref() == Some("failed");
            let call_id = item.text("call_id");
            return Ok(Item::Output { call_id, failed });
        }
        // Every `*_call` is a call, so a built-in added after this was written is still checked.
        kind if kind.ends_with("_call") => ToolKind::Builtin,
        "reasoning" => {
            return Ok(Item::Reasoning(part_texts(
                item.raw("summary"),
                "summary_text",
            )));
        }
        "message" => {
            let (role, content) = (item.text("role"), item.raw("content"));
            return Ok(Item::Message { role, content });
        }
        _ => return Ok(Item::Other),
    };
    let call_id = item.text("call_id");
    let ran = match item.text("status").as_deref() {
        _ if call_kind != ToolKind::Builtin || call_id.is_some() => None,
        _ if item.raw("error").is_some() => Some(CallOutcome::Failed),
        Some("completed") => Some(CallOutcome::Completed),
        Some("failed") => Some(CallOutcome::Failed),
        _ => None,
    };
    let text_of = |key| item.raw(key).map(text_or_raw_json).unwrap_or_default();
    // Names are read leniently (a number is kept as its JSON text), as the Anthropic reader
    // reads them: an SDK does not check the type, so a call must not be checked as nameless
    // while a client runs it by the name it reads.
    let name = || item.raw("name").map(name_text).unwrap_or_default();
    let (name, arguments) = match call_kind {
        ToolKind::Builtin => (
            builtin_tool_name(&kind).to_owned(),
            builtin_arguments(&item),
        ),
        ToolKind::Custom => (name(), text_of("input")),
        _ => (name(), text_of("arguments")),
    };
    let id = call_id.or(item.text("id"));
    let call = ToolCall {
        choice: 0,
        id,
        name,
        kind: call_kind,
        arguments,
    };
    let proposal = kind == "mcp_approval_request";
    Ok(Item::Call {
        call,
        ran,
        proposal,
    })
}

/// The payload fields as compact JSON (keys sorted), so an item reads the same pretty-printed in
/// a body or compact in a stream event; a value too deep to read is kept as the text it was.
fn builtin_arguments(item: &Fields) -> String {
    let mut payload = serde_json::Map::new();
    for key in BUILTIN_PAYLOAD.split_whitespace() {
        if let Some(raw) = item.raw(key) {
            let value = serde_json::from_str(raw.get())
                .unwrap_or_else(|_| serde_json::Value::String(raw.get().to_owned()));
            payload.insert(key.to_owned(), value);
        }
    }
    serde_json::Value::Object(payload).to_string()
}

#[derive(Deserialize)]
struct TextPartWire {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

/// The non-empty texts of the parts of `kind` in a list of content or summary parts.
fn part_texts(parts: Option<&RawValue>, kind: &str) -> Vec<String> {
    let parts: Vec<TextPartWire> = parts
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or_default();
    parts
        .into_iter()
        .filter(|part| part.kind.as_deref() == Some(kind))
        .filter_map(|part| part.text.filter(|text| !text.is_empty()))
        .collect()
}

#[derive(Deserialize)]
struct ResponseWire<'a> {
    #[serde(borrow)]
    output: Vec<&'a RawValue>,
    /// The other formats' calls fields, noted.
    #[serde(default)]
    choices: Noted,
    #[serde(default)]
    content: Noted,
    #[serde(default)]
    candidates: Noted,
}

pub(crate) fn read_response(body: &[u8]) -> Result<Reading, ParseError> {
    let wire: ResponseWire = read_json(body)?;
    let other_calls_field = wire.choices.0 || wire.content.0 || wire.candidates.0;
    let mut response = ToolResponse::default();
    let mut summary = Vec::new();
    for (position, raw) in wire.output.into_iter().enumerate() {
        let item = read_item(raw)
            .map_err(|error| ParseError::new(format!("output[{position}]: {error}")))?;
        match item {
            Item::Call { call, .. } => response.calls.push(call),
            Item::Reasoning(parts) => summary.extend(parts),
            _ => {}
        }
    }
    response.reasoning = (!summary.is_empty()).then(|| summary.join("\n"));
    Ok(Reading {
        response,
        other_calls_field,
    })
}

/// `input` and its items (none when it is a string: a single user message).
fn input_items(body: &[u8]) -> Option<(&RawValue, Vec<&RawValue>)> {
    let input = Fields(read_json(body).ok()?).raw("input")?;
    Some((input, serde_json::from_str(input.get()).unwrap_or_default()))
}

/// The calls of the conversation so far. A client-run call (one with a `call_id`) is completed
/// by a later `*_call_output` with its id, failed when that output has `status: "failed"` (the
/// API defines no other error flag on outputs); a built-in the provider ran reports its own
/// `status` (`completed`, `failed`, or an `error`). Approval requests are not calls yet.
///
/// An output whose call is not in the request answers a call of a stored response (a client
/// continuing with `previous_response_id` sends only its outputs): it is listed with its id and
/// no name, in the latest turn when the request holds no model turn of its own.
pub(crate) fn history(body: &[u8]) -> Vec<HistoryCall> {
    let mut calls: Vec<HistoryCall> = Vec::new();
    // A model turn is a run of the model's items (calls, reasoning, its messages) between the
    // client's (its messages and call outputs).
    let (mut turns, mut in_model_turn) = (0usize, false);
    let mut orphans = false;
    for raw in input_items(body)
        .map(|(_, items)| items)
        .unwrap_or_default()
    {
        let item = read_item(raw);
        let by_model = match &item {
            Ok(Item::Call { .. } | Item::Reasoning(_)) => Some(true),
            Ok(Item::Message { role, .. }) => Some(role.as_deref() == Some("assistant")),
            Ok(Item::Output { .. }) => Some(false),
            Ok(Item::Other) | Err(_) => None,
        };
        match by_model {
            Some(true) if !in_model_turn => {
                turns += 1;
                in_model_turn = true;
            }
            Some(false) => in_model_turn = false,
            _ => {}
        }
        match item {
            Ok(Item::Call {
                call,
                ran,
                proposal: false,
            }) => calls.push(HistoryCall {
                outcome: ran.unwrap_or(CallOutcome::Pending),
                ..HistoryCall::pending(call, turns.saturating_sub(1))
            }),
            Ok(Item::Output {
                call_id: Some(id),
                failed,
            }) => {
                let outcome = CallOutcome::answered(failed);
                match calls
                    .iter_mut()
                    // The latest call with the id: a client may reuse ids across turns.
                    .rev()
                    .find(|call| call.id.as_deref() == Some(id.as_str()))
                {
                    Some(call) => call.outcome = outcome,
                    None => {
                        orphans = true;
                        calls.push(HistoryCall {
                            id: Some(id),
                            name: String::new(),
                            arguments: String::new(),
                            outcome,
                            turn: turns.saturating_sub(1),
                            latest_turn: false,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    let latest = turns.checked_sub(1).or(orphans.then_some(0));
    crate::tool::mark_latest_turn(&mut calls, latest);
    calls
}

/// A string `input` is the user's text; in a list, the last user message, whose content is a
/// string or `input_text` parts (joined with newlines).
pub(crate) fn latest_user_text(body: &[u8]) -> Option<String> {
    let (input, items) = input_items(body)?;
    if let Ok(text) = serde_json::from_str::<String>(input.get()) {
        return Some(text);
    }
    let content = (items.into_iter())
        .rev()
        .find_map(|raw| match read_item(raw) {
            Ok(Item::Message { role, content }) if role.as_deref() == Some("user") => Some(content),
            _ => None,
        })??;
    if let Ok(text) = serde_json::from_str::<String>(content.get()) {
        return Some(text);
    }
    let texts = part_texts(Some(content), "input_text");
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// Removes tools by the names `parse_request` reported. A `tool_choice` that forces a removed
/// tool is dropped (the upstream would refuse a choice of a tool that is not there), an
/// `allowed_tools` choice loses the removed tools, and no choice is kept once no tool is left.
pub(crate) fn remove_tools(body: &[u8], removed: &[&str]) -> Result<Option<Bytes>, ParseError> {
    let object = Fields(read_json(body)?);
    let Some(tools) = object.raw("tools") else {
        return Ok(None);
    };
    let Some(kept) = without_declared(tools, removed)? else {
        return Ok(None);
    };
    let choice = match object.raw("tool_choice") {
        Some(_) if kept == "[]" => Some(None),
        Some(choice) => edited_tool_choice(choice, removed)?,
        None => None,
    };
    let mut replacements = vec![("tools", Some(kept))];
    replacements.extend(choice.map(|choice| ("tool_choice", choice)));
    Ok(Some(Bytes::from(object.0.write(&replacements))))
}

/// `without_tools`, by reported names: removing `web_search` removes `web_search_preview`.
fn without_declared(entries: &RawValue, removed: &[&str]) -> Result<Option<String>, ParseError> {
    let parsed: Vec<ToolEntry> = serde_json::from_str(entries.get())?;
    let mut aliases = Vec::new();
    for entry in parsed {
        let entry_name = entry.name().map(str::to_owned);
        if let (Some(entry_name), Ok(tool)) = (entry_name, entry.declared_tool(&Bytes::new()))
            && removed.contains(&reported_name(&tool))
        {
            aliases.push(entry_name);
        }
    }
    let mut names = removed.to_vec();
    names.extend(aliases.iter().map(String::as_str));
    without_tools(entries, &names)
}

/// The new `tool_choice` (`Some(None)`: drop it), or `None` when it stays as it is.
fn edited_tool_choice(
    choice: &RawValue,
    removed: &[&str],
) -> Result<Option<Option<String>>, ParseError> {
    // "auto", "required" and "none" force no particular tool.
    let Ok(choice) = serde_json::from_str(choice.get()).map(Fields) else {
        return Ok(None);
    };
    let forced = match (choice.text("type"), choice.raw("tools")) {
        (Some(kind), Some(tools)) if kind == "allowed_tools" => {
            return Ok(match without_declared(tools, removed)? {
                Some(kept) if kept == "[]" => Some(None),
                Some(kept) => {
                    let written = choice.0.write(&[("tools", Some(kept))]);
                    Some(Some(String::from_utf8_lossy(&written).into_owned()))
                }
                None => None,
            });
        }
        (Some(kind), _) if kind == "function" || kind == "custom" => choice.text("name"),
        (Some(kind), _) => Some(builtin_tool_name(&kind).to_owned()),
        (None, _) => None,
    };
    Ok(forced
        .filter(|forced| removed.contains(&forced.as_str()))
        .map(|_| None))
}

/// `input` without `messages` is only the Responses API's.
pub(crate) fn claims(body: &[u8]) -> Claim {
    #[derive(Deserialize)]
    struct Shape<'a> {
        #[serde(borrow, default)]
        input: Option<&'a RawValue>,
        #[serde(borrow, default)]
        messages: Option<&'a RawValue>,
    }
    match read_json::<Shape>(body) {
        Ok(Shape {
            input: Some(_),
            messages: None,
        }) => Claim::Sure,
        _ => Claim::No,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edits::Edit;
    use crate::testing::{call_lines, request, request_error};

    #[test]
    fn builtin_types_and_call_items_meet_at_one_name() {
        let names = "web_search web_search_2025_08_26 web_search_preview web_search_call \
            web_search_preview_2025_03_11 computer_use_preview computer_call file_search_call \
            code_interpreter_call image_generation_call local_shell_call shell_call \
            apply_patch_call mcp_call mcp_approval_request tool_search_call x_2025_3_11 é_call";
        let read: Vec<&str> = names.split_whitespace().map(builtin_tool_name).collect();
        let expected = "web_search web_search web_search web_search web_search computer computer \
            file_search code_interpreter image_generation local_shell shell apply_patch mcp mcp \
            tool_search x_2025_3_11 é";
        assert_eq!(read.join(" "), expected);
    }

    #[test]
    fn declared_tools_are_function_custom_and_builtins_by_type() {
        let parsed = request(
            WireFormat::Responses,
            r#"{"model":"gpt-4.1","input":"hi","stream":true,"tools":[
                {"type":"function","name":"get_weather","parameters":{"type":"object"},"strict":true},
                {"type":"custom","name":"run_sql","description":"SQL"},
                {"type":"web_search_preview","search_context_size":"low"},
                {"type":"computer_use_preview","display_width":1024,"display_height":768},
                {"type":"mcp","server_label":"deepwiki","server_url":"https://mcp.deepwiki.com/mcp"}]}"#,
        );
        let tools: Vec<String> = (parsed.declared_tools.iter())
            .map(|t| format!("{} {:?} {}", t.name, t.kind, t.schema_text().unwrap_or("-")))
            .collect();
        let expected = [
            r#"get_weather Function {"type":"object"}"#,
            "run_sql Custom -",
            "web_search Builtin -",
            "computer Builtin -",
            "mcp Builtin -",
        ];
        assert_eq!(tools, expected);
        assert!(parsed.stream);
        assert_eq!(parsed.model.as_deref(), Some("gpt-4.1"));
        let bare = request(WireFormat::Responses, r#"{"input":"hi","tools":null}"#);
        assert!(!bare.declares_tools() && !bare.stream && bare.model.is_none());
        request_error(WireFormat::Responses, r#"{"tools":[{"type":"function"}]}"#);
    }

    #[test]
    fn every_call_item_kind_is_read_in_output_order() {
        let response = WireFormat::Responses.parse_response(
            br#"{"id":"resp_1","object":"response","output":[
              {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"First."},{"type":"summary_text","text":""}]},
              {"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Hi"}]},
              {"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
              {"type":"function_call","id":"fc_2","call_id":"call_2","name":"lenient","arguments":{"x":1}},
              {"type":"custom_tool_call","id":"ctc_1","call_id":"call_3","name":"run_sql","input":"select 1"},
              {"type":"web_search_call","id":"ws_1","status":"completed","action":{"type": "search", "query":"q"}},
              {"type":"file_search_call","id":"fs_1","status":"completed","queries":["a"],"results":null},
              {"type":"code_interpreter_call","id":"ci_1","code":"1+1","container_id":"cntr_1","outputs":[]},
              {"type":"computer_call","id":"cu_1","call_id":"call_4","action":{"type":"click","x":1},"pending_safety_checks":[]},
              {"type":"image_generation_call","id":"ig_1","status":"completed","result":"iVBOR"},
              {"type":"local_shell_call","id":"ls_1","call_id":"call_5","action":{"type":"exec","command":["ls"]}},
              {"type":"shell_call","id":"sh_1","call_id":"call_6","action":{"commands":["pwd"]}},
              {"type":"apply_patch_call","id":"ap_1","call_id":"call_7","operation":{"type":"delete_file","path":"a"}},
              {"type":"mcp_call","id":"mcp_1","server_label":"wiki","name":"ask","arguments":"{}","output":"ok"},
              {"type":"mcp_approval_request","id":"mcpr_1","server_label":"wiki","name":"ask","arguments":"{}"},
              {"type":"mcp_list_tools","id":"mcpl_1","server_label":"wiki","tools":[]},
              {"type":"shell_call_output","id":"sho_1","call_id":"call_6","output":[]},
              {"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"Second."}]},
              {"type":"future_tool_call","id":"ft_1","status":"completed"},
              {"type":"function_call","id":"fc_3","call_id":7,"name":["not","a","name"]},
              {"type":"message","type":"function_call","call_id":"call_8","name":"last_key_wins"}]}"#,
        )
        .expect("response parses");
        assert_eq!(response.reasoning.as_deref(), Some("First.\nSecond."));
        let expected = [
            r#"call_1 get_weather Function {"city":"Paris"}"#,
            r#"call_2 lenient Function {"x":1}"#,
            "call_3 run_sql Custom select 1",
            r#"ws_1 web_search Builtin {"action":{"query":"q","type":"search"}}"#,
            r#"fs_1 file_search Builtin {"queries":["a"]}"#,
            r#"ci_1 code_interpreter Builtin {"code":"1+1","container_id":"cntr_1"}"#,
            r#"call_4 computer Builtin {"action":{"type":"click","x":1}}"#,
            "ig_1 image_generation Builtin {}",
            r#"call_5 local_shell Builtin {"action":{"command":["ls"],"type":"exec"}}"#,
            r#"call_6 shell Builtin {"action":{"commands":["pwd"]}}"#,
            r#"call_7 apply_patch Builtin {"operation":{"path":"a","type":"delete_file"}}"#,
            r#"mcp_1 mcp Builtin {"arguments":"{}","name":"ask","server_label":"wiki"}"#,
            r#"mcpr_1 mcp Builtin {"arguments":"{}","name":"ask","server_label":"wiki"}"#,
            "ft_1 future_tool Builtin {}",
            // A name that is not a string is its JSON text, as a client reads it: no tool has it.
            r#"fc_3 ["not","a","name"] Function "#,
            "call_8 last_key_wins Function ",
        ];
        assert_eq!(call_lines(&response.calls), expected);
        assert!(response.calls.iter().all(|call| call.choice == 0));
        for not_a_response in [
            &br#"{"choices":[]}"#[..],
            br#"{"output":[1]}"#,
            b"{\"output\":[",
        ] {
            assert!(
                WireFormat::Responses
                    .parse_response(not_a_response)
                    .is_err()
            );
        }
    }

    #[test]
    fn the_latest_user_text_is_a_string_input_or_the_last_user_message() {
        assert_eq!(
            latest_user_text(br#"{"input":"plain"}"#).as_deref(),
            Some("plain")
        );
        let items = br#"{"input":[
            {"role":"user","content":"first"},
            {"type":"message","role":"assistant","content":[{"type":"output_text","text":"x"}]},
            {"type":"message","role":"user","content":[{"type":"input_text","text":"a"},
              {"type":"input_image","image_url":"u"},{"type":"input_text","text":"b"}]},
            {"type":"function_call_output","call_id":"c","output":"done"}]}"#;
        assert_eq!(latest_user_text(items).as_deref(), Some("a\nb"));
        assert_eq!(
            latest_user_text(br#"{"input":[{"role":"system","content":"s"}]}"#),
            None
        );
        assert_eq!(latest_user_text(br#"{"model":"m"}"#), None);
    }

    #[test]
    fn the_history_pairs_calls_with_their_outputs() {
        let body = br#"{"input":[
            {"role":"user","content":"go"},
            {"type":"function_call","id":"fc_1","call_id":"c1","name":"lookup","arguments":"{}","status":"completed"},
            {"type":"custom_tool_call","call_id":"c2","name":"run_sql","input":"drop"},
            {"type":"function_call","call_id":"c3","name":"send","arguments":"{\"to\":1}"},
            {"type":"function_call_output","call_id":"c1","output":"found"},
            {"type":"custom_tool_call_output","call_id":"c2","output":"denied","status":"failed"},
            {"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search"}},
            {"type":"mcp_call","id":"mcp_1","server_label":"s","name":"n","arguments":"{}","error":"boom"},
            {"type":"mcp_approval_request","id":"mcpr_1","server_label":"s","name":"n","arguments":"{}"},
            {"type":"item_reference","id":"msg_0"}]}"#;
        let calls: Vec<String> = (history(body).iter())
            .map(|c| format!("{:?} {} {:?} {}", c.id, c.name, c.outcome, c.arguments))
            .collect();
        let expected = [
            r#"Some("c1") lookup Completed {}"#,
            r#"Some("c2") run_sql Failed drop"#,
            r#"Some("c3") send Pending {"to":1}"#,
            r#"Some("ws_1") web_search Completed {"action":{"type":"search"}}"#,
            r#"Some("mcp_1") mcp Failed {"arguments":"{}","name":"n","server_label":"s"}"#,
        ];
        assert_eq!(calls, expected);
        assert!(history(br#"{"input":"just text"}"#).is_empty());
        assert!(history(b"not json").is_empty());
    }

    #[test]
    fn outputs_of_a_stored_responses_calls_are_the_latest_turn_with_no_name() {
        let continuation = br#"{"previous_response_id":"resp_1","input":[
            {"type":"function_call_output","call_id":"call_a","output":"done"},
            {"type":"function_call_output","call_id":"call_b","output":"no","status":"failed"}]}"#;
        let calls: Vec<String> = (history(continuation).iter())
            .map(|c| {
                format!(
                    "{:?} '{}' {:?} {} {}",
                    c.id, c.name, c.outcome, c.turn, c.latest_turn
                )
            })
            .collect();
        assert_eq!(
            calls,
            [
                r#"Some("call_a") '' Completed 0 true"#,
                r#"Some("call_b") '' Failed 0 true"#
            ]
        );
    }

    fn edit(body: &str, names: &[&str]) -> Option<String> {
        let names = names.iter().map(|name| name.to_string()).collect();
        WireFormat::Responses
            .apply_request_edits(body.as_bytes(), &[Edit::RemoveDeclaredTools(names)])
            .expect("edits apply")
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    }

    #[test]
    fn removing_tools_rewrites_only_tools_and_a_choice_that_forced_them() {
        let body = r#"{"model":"m", "tools":[{"type":"function","name":"keep"},{"type":"function","name":"drop"},{"type":"web_search_preview"}],"tool_choice":{"type":"function","name":"drop"},"top_p":0.50}"#;
        let dropped = r#"{"model":"m","tools":[{"type":"function","name":"keep"},{"type":"web_search_preview"}],"top_p":0.50}"#;
        assert_eq!(edit(body, &["drop"]).as_deref(), Some(dropped));
        // A built-in is removed by the name the checks know it by; the choice stays.
        let no_search = r#"{"model":"m","tools":[{"type":"function","name":"keep"},{"type":"function","name":"drop"}],"tool_choice":{"type":"function","name":"drop"},"top_p":0.50}"#;
        assert_eq!(edit(body, &["web_search"]).as_deref(), Some(no_search));
        assert_eq!(
            edit(body, &["absent"]),
            None,
            "nothing removed: the original bytes"
        );
        assert_eq!(edit(r#"{"input":"x"}"#, &["drop"]), None);
        assert_eq!(
            WireFormat::Responses
                .apply_request_edits(body.as_bytes(), &[])
                .expect("no edit"),
            None
        );
    }

    #[test]
    fn a_choice_is_narrowed_or_dropped_with_the_tools_it_names() {
        let cases = [
            (
                r#"{"tools":[{"type":"function","name":"a"},{"type":"function","name":"b"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"a"},{"type":"function","name":"b"}]}}"#,
                r#"{"tools":[{"type":"function","name":"a"}],"tool_choice":{"type":"allowed_tools","mode":"required","tools":[{"type":"function","name":"a"}]}}"#,
            ),
            (
                r#"{"tools":[{"type":"function","name":"a"},{"type":"web_search_preview_2025_03_11"}],"tool_choice":{"type":"web_search_preview"}}"#,
                r#"{"tools":[{"type":"function","name":"a"}]}"#,
            ),
            (
                r#"{"tools":[{"type":"function","name":"a"},{"type":"custom","name":"b"}],"tool_choice":"auto"}"#,
                r#"{"tools":[{"type":"function","name":"a"}],"tool_choice":"auto"}"#,
            ),
            (
                r#"{"tools":[{"type":"function","name":"b"}],"tool_choice":"required"}"#,
                r#"{"tools":[]}"#,
            ),
        ];
        for (body, edited) in cases {
            assert_eq!(
                edit(body, &["b", "web_search"]).as_deref(),
                Some(edited),
                "{body}"
            );
        }
    }
}
