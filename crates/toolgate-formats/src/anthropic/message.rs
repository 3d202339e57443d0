//! The Anthropic Messages adapter (`/v1/messages`): client and server tools from `tools[]`,
//! calls from a `message`'s `tool_use` and `server_tool_use` blocks, the reasoning from its
//! `thinking` blocks, and the conversation's calls and their results from `messages[]`.

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::PartWire;

use crate::answer::{Noted, Reading};
use crate::format::{Claim, ParseError, ToolResponse, WireFormat, read_json, text_or_raw_json};
use crate::raw_object::RawObject;
use crate::request_reader::RequestReader;
use crate::tool::{CallOutcome, DeclaredTool, HistoryCall, ToolKind};
use crate::tool_entry::without_tools;

/// The names a declared `code_execution` server tool (version 20250825 and later) answers
/// under: it runs as `server_tool_use` calls of its bash and file-editing halves, so declaring
/// it declares them.
const CODE_EXECUTION_PARTS: [&str; 2] = ["bash_code_execution", "text_editor_code_execution"];

impl RequestReader for super::Anthropic {
    const FORMAT: WireFormat = WireFormat::AnthropicMessages;

    fn complete_tools(declared_tools: &mut Vec<DeclaredTool>) {
        let runs_code = declared_tools
            .iter()
            .any(|tool| tool.kind == ToolKind::Builtin && tool.name == "code_execution");
        for part in CODE_EXECUTION_PARTS.into_iter().filter(|_| runs_code) {
            if !declared_tools.iter().any(|tool| tool.name == part) {
                declared_tools.push(DeclaredTool {
                    name: part.to_owned(),
                    kind: ToolKind::Builtin,
                    parameters: None,
                });
            }
        }
    }
}

#[derive(Deserialize)]
struct MessageWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    content: Vec<PartWire<'a>>,
    /// The other formats' calls fields, noted.
    #[serde(default)]
    choices: Noted,
    #[serde(default)]
    output: Noted,
    #[serde(default)]
    candidates: Noted,
}

pub(crate) fn read_response(body: &[u8]) -> Result<Reading, ParseError> {
    let message: MessageWire = read_json(body)?;
    let other_calls_field = message.choices.0 || message.output.0 || message.candidates.0;
    if message.kind != "message" {
        return Err(ParseError::new(format!(
            "an object of type '{}' where an Anthropic message was expected",
            message.kind
        )));
    }
    let calls = message.content.iter().filter_map(PartWire::call).collect();
    let thoughts: Vec<String> = message
        .content
        .into_iter()
        .filter(|block| block.kind.as_deref() == Some("thinking"))
        .filter_map(|block| block.thinking.map(text_or_raw_json))
        .filter(|thought| !thought.is_empty())
        .collect();
    Ok(Reading {
        response: ToolResponse {
            calls,
            reasoning: (!thoughts.is_empty()).then(|| thoughts.join("\n")),
        },
        other_calls_field,
    })
}

#[derive(Deserialize)]
struct ConversationWire<'a> {
    #[serde(borrow, default)]
    messages: Vec<TurnWire<'a>>,
}

#[derive(Deserialize)]
struct TurnWire<'a> {
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    /// A string, or an array of blocks.
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

impl TurnWire<'_> {
    fn blocks(&self) -> Vec<PartWire<'_>> {
        self.content
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or_default()
    }
}

/// The text of the latest user turn that has some: a `user` message whose content is a string,
/// or its `text` blocks joined with newlines. A turn that only returns tool results is the
/// client speaking, not the user, so the search goes on to the turn before.
pub(crate) fn latest_user_text(body: &[u8]) -> Option<String> {
    let conversation: ConversationWire = read_json(body).ok()?;
    let user_turns = conversation.messages.iter().rev();
    for turn in user_turns.filter(|turn| turn.role.as_deref() == Some("user")) {
        let Some(content) = turn.content else {
            continue;
        };
        if let Ok(text) = serde_json::from_str::<String>(content.get()) {
            return Some(text);
        }
        let texts: Vec<String> = turn
            .blocks()
            .into_iter()
            .filter(|block| block.kind.as_deref() == Some("text"))
            .filter_map(|block| block.text.map(text_or_raw_json))
            .collect();
        if !texts.is_empty() {
            return Some(texts.join("\n"));
        }
    }
    None
}

/// The calls of the conversation so far: an assistant turn's `tool_use` and `server_tool_use`
/// blocks, settled by a later `tool_result` (failed when `is_error`) or, for server tools, by
/// the `*_tool_result` block Anthropic adds to the same turn (failed when it holds an error).
pub(crate) fn history(body: &[u8]) -> Vec<HistoryCall> {
    let Ok(conversation) = read_json::<ConversationWire>(body) else {
        return Vec::new();
    };
    let mut calls: Vec<HistoryCall> = Vec::new();
    let mut turns: usize = 0;
    for message in &conversation.messages {
        let assistant = message.role.as_deref() == Some("assistant");
        let turn = turns;
        if assistant {
            turns += 1;
        }
        for block in message.blocks() {
            let kind = block.kind.as_deref().unwrap_or_default();
            let failed = match kind {
                "tool_result" if !assistant => {
                    block.is_error.is_some_and(|raw| raw.get() == "true")
                }
                _ if assistant && kind.ends_with("_tool_result") => holds_error(block.content),
                _ => {
                    if let Some(call) = block.call().filter(|_| assistant) {
                        calls.push(HistoryCall::pending(call, turn));
                    }
                    continue;
                }
            };
            let answered = block.tool_use_id.map(text_or_raw_json);
            if let Some(call) = calls
                .iter_mut()
                // The latest call with the id: a client may reuse ids across turns.
                .rev()
                .find(|call| call.id.is_some() && call.id == answered)
            {
                call.outcome = CallOutcome::answered(failed);
            }
        }
    }
    crate::tool::mark_latest_turn(&mut calls, turns.checked_sub(1));
    calls
}

/// A server tool's result content is an error object (`web_search_tool_result_error`, …).
fn holds_error(content: Option<&RawValue>) -> bool {
    content
        .and_then(|raw| serde_json::from_str::<PartWire>(raw.get()).ok())
        .and_then(|block| block.kind)
        .is_some_and(|kind| kind.ends_with("_error"))
}

#[derive(Deserialize)]
struct ToolChoiceWire<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

/// Removes tools from `tools[]`. A `tool_choice` that forces a removed tool
/// (`{"type":"tool","name":…}`), or any `tool_choice` once no tool is left, is dropped too:
/// Anthropic rejects a choice naming an absent tool, and `any` / `tool` / `none` without tools,
/// and the default it falls back to (`auto`) lets the model answer without the removed tool.
pub(crate) fn remove_tools(body: &[u8], removed: &[&str]) -> Result<Option<Bytes>, ParseError> {
    let object: RawObject = read_json(body)?;
    let field = |name: &str| {
        object
            .0
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, raw)| *raw)
    };
    let Some(tools) = field("tools").filter(|raw| raw.get() != "null") else {
        return Ok(None);
    };
    let Some(kept) = without_tools(tools, removed)? else {
        return Ok(None);
    };
    let drop_choice = field("tool_choice").is_some_and(|raw| {
        let choice = serde_json::from_str::<ToolChoiceWire>(raw.get()).ok();
        let forced = choice.and_then(|choice| match (choice.kind.as_deref(), choice.name) {
            (Some("tool"), Some(name)) => Some(name),
            _ => None,
        });
        kept == "[]" || forced.is_some_and(|name| removed.contains(&name.as_ref()))
    });
    let mut replacements = vec![("tools", Some(kept))];
    if drop_choice {
        replacements.push(("tool_choice", None));
    }
    Ok(Some(Bytes::from(object.write(&replacements))))
}

/// `messages` with a top-level `system`, or tools declared with `input_schema`, is only
/// Anthropic's.
pub(crate) fn claims(body: &[u8]) -> Claim {
    #[derive(Deserialize)]
    struct Shape<'a> {
        #[serde(borrow, default)]
        messages: Option<&'a RawValue>,
        #[serde(borrow, default)]
        system: Option<&'a RawValue>,
        #[serde(borrow, default)]
        tools: Option<&'a RawValue>,
    }
    let Ok(shape) = read_json::<Shape>(body) else {
        return Claim::No;
    };
    let marked = shape.system.is_some()
        || (shape.tools).is_some_and(|tools| tools.get().contains("\"input_schema\""));
    if shape.messages.is_some() && marked {
        Claim::Sure
    } else {
        Claim::No
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edits::Edit;
    use crate::testing::{call_lines, declared_lines, fixtures, request, request_error};
    use crate::tool::ToolCall;

    #[test]
    fn client_tools_have_schemas_and_server_tools_are_builtins_named_by_name() {
        let parsed = request(
            WireFormat::AnthropicMessages,
            r#"{"model":"claude-x","max_tokens":10,"stream":true,"messages":[],"tools":[
                {"name":"get_weather","description":"d","input_schema":{"type":"object"}},
                {"type":"custom","name":"lookup","input_schema":{"required":["q"]}},
                {"type":"web_search_20250305","name":"web_search","max_uses":3},
                {"type":"bash_20250124","name":"bash"},
                {"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},
                {"type":"computer_20250124","name":"computer","display_width_px":1024},
                {"type":"web_fetch_20250910","name":"web_fetch"},
                {"type":"code_execution_20250825","name":"code_execution"}]}"#,
        );
        let tools = declared_lines(&parsed.declared_tools);
        let expected = [
            r#"get_weather Function Some("{\"type\":\"object\"}")"#,
            r#"lookup Function Some("{\"required\":[\"q\"]}")"#,
            "web_search Builtin None",
            "bash Builtin None",
            "str_replace_based_edit_tool Builtin None",
            "computer Builtin None",
            "web_fetch Builtin None",
            "code_execution Builtin None",
            "bash_code_execution Builtin None",
            "text_editor_code_execution Builtin None",
        ];
        assert_eq!(tools, expected);
        assert!(parsed.stream);
        assert_eq!(parsed.model.as_deref(), Some("claude-x"));
        assert!(
            !request(
                WireFormat::AnthropicMessages,
                r#"{"messages":[],"tools":null}"#
            )
            .declares_tools()
        );
        request_error(
            WireFormat::AnthropicMessages,
            r#"{"tools":[{"type":"custom"}]}"#,
        );
    }

    #[test]
    fn every_block_kind_is_read_and_inputs_keep_their_text_without_whitespace() {
        let response = WireFormat::AnthropicMessages
            .parse_response(
                br#"{"id":"msg_1","type":"message","role":"assistant","content":[
                {"type":"thinking","thinking":"First, the city.","signature":"sig"},
                {"type":"redacted_thinking","data":"opaque"},
                {"type":"text","text":"Checking.","citations":null},
                {"type":"server_tool_use","id":"srv_1","name":"web_search","input":{"query":"a"}},
                {"type":"web_search_tool_result","tool_use_id":"srv_1","content":[]},
                {"type":"thinking","thinking":"","signature":"sig"},
                {"type":"thinking","thinking":"Then the unit.","signature":"sig"},
                {"type":"tool_use","id":"toolu_1","name":"get_weather",
                 "input": { "unit" : "celsius",
                            "city": "Par is \"x\"", "n": 1.0e2 }},
                {"type":"tool_use","id":"toolu_2","name":"no_input"},
                {"type":"mcp_tool_use","id":"mcp_1","name":"echo","server_name":"s","input":{}}],
              "stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}"#,
            )
            .expect("response parses");
        let reasoning = response.reasoning.as_deref();
        assert_eq!(reasoning, Some("First, the city.\nThen the unit."));
        let expected = [
            r#"srv_1 web_search Builtin {"query":"a"}"#,
            r#"toolu_1 get_weather Function {"unit":"celsius","city":"Par is \"x\"","n":1.0e2}"#,
            "toolu_2 no_input Function {}",
        ];
        assert_eq!(call_lines(&response.calls), expected);
        assert!(response.calls.iter().all(|call| call.choice == 0));
    }

    #[test]
    fn anything_but_a_message_is_a_parse_error() {
        let bodies = [
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            r#"{"type":"message","content":"text"}"#,
            r#"{"type":"message"}"#,
            r#"{"choices":[{"message":{"content":"hi"}}]}"#,
            "[]",
            "not json",
        ];
        for body in bodies {
            assert!(
                WireFormat::AnthropicMessages
                    .parse_response(body.as_bytes())
                    .is_err(),
                "{body}"
            );
        }
        let empty =
            WireFormat::AnthropicMessages.parse_response(br#"{"type":"message","content":[]}"#);
        assert_eq!(empty, Ok(ToolResponse::default()));
    }

    #[test]
    fn the_latest_user_text_skips_turns_that_only_return_tool_results() {
        let text = |json: &str| latest_user_text(json.as_bytes());
        let plain = r#"{"messages":[{"role":"user","content":"first"},
            {"role":"assistant","content":"x"},{"role":"user","content":"second"}]}"#;
        assert_eq!(text(plain).as_deref(), Some("second"));
        let after_results = r#"{"system":"not this","messages":[
            {"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{}},
                                      {"type":"text","text":"b"}]},
            {"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},
            {"role":"user","content":[{"type":"tool_result","tool_use_id":"t",
                                       "content":[{"type":"text","text":"result"}]}]}]}"#;
        assert_eq!(text(after_results).as_deref(), Some("a\nb"));
        assert_eq!(
            text(r#"{"messages":[{"role":"assistant","content":"hi"}]}"#),
            None
        );
        assert_eq!(text("nope"), None);
    }

    #[test]
    fn the_history_pairs_calls_with_their_results_and_errors() {
        let body = br#"{"messages":[
            {"role":"user","content":"go"},
            {"role":"assistant","content":[
                {"type":"text","text":"On it."},
                {"type":"tool_use","id":"t1","name":"lookup","input":{"q": 1}},
                {"type":"tool_use","id":"t2","name":"send","input":{}},
                {"type":"tool_use","id":"t3","name":"pending","input":{}}]},
            {"role":"user","content":[
                {"type":"tool_result","tool_use_id":"t1","content":"found"},
                {"type":"tool_result","tool_use_id":"t2","is_error":true,"content":"SMTP down"}]},
            {"role":"assistant","content":[
                {"type":"server_tool_use","id":"s1","name":"web_search","input":{"query":"a"}},
                {"type":"web_search_tool_result","tool_use_id":"s1","content":[]},
                {"type":"server_tool_use","id":"s2","name":"web_search","input":{"query":"b"}},
                {"type":"web_search_tool_result","tool_use_id":"s2",
                 "content":{"type":"web_search_tool_result_error","error_code":"unavailable"}}]}]}"#;
        let calls = history(body);
        let seen: Vec<String> = calls
            .iter()
            .map(|call| format!("{:?} {} {:?}", call.id, call.name, call.outcome))
            .collect();
        let expected = [
            r#"Some("t1") lookup Completed"#,
            r#"Some("t2") send Failed"#,
            r#"Some("t3") pending Pending"#,
            r#"Some("s1") web_search Completed"#,
            r#"Some("s2") web_search Failed"#,
        ];
        assert_eq!(seen, expected);
        assert_eq!(calls[0].arguments, r#"{"q":1}"#);
        assert!(history(b"{}").is_empty());
    }

    fn edit(body: &str, names: &[&str]) -> Option<String> {
        let names = names.iter().map(|name| name.to_string()).collect();
        let edited = WireFormat::AnthropicMessages
            .apply_request_edits(body.as_bytes(), &[Edit::RemoveDeclaredTools(names)]);
        let edited = edited.expect("edits apply");
        edited.map(|bytes| String::from_utf8(bytes.to_vec()).expect("utf-8"))
    }

    #[test]
    fn removing_tools_rewrites_only_tools_and_a_choice_that_forces_a_removed_tool() {
        let keep = r#"{"name":"keep","input_schema":{ }}"#;
        let search = r#"{"type":"web_search_20250305","name":"web_search"}"#;
        let choice = r#""tool_choice":{"type":"tool","name":"web_search"}"#;
        let body = format!(r#"{{"model":"m", "tools":[{keep},{search}],{choice},"top_k":5.0}}"#);
        let without_search = format!(r#"{{"model":"m","tools":[{keep}],"top_k":5.0}}"#);
        let without_keep = format!(r#"{{"model":"m","tools":[{search}],{choice},"top_k":5.0}}"#);
        assert_eq!(edit(&body, &["web_search"]), Some(without_search));
        assert_eq!(edit(&body, &["keep"]), Some(without_keep));
        let any = r#"{"tools":[{"name":"a","input_schema":{}}],"tool_choice":{"type":"any"}}"#;
        assert_eq!(
            edit(any, &["a"]).as_deref(),
            Some(r#"{"tools":[]}"#),
            "no tools, no choice"
        );
        assert_eq!(
            edit(&body, &["absent"]),
            None,
            "nothing removed: the original bytes"
        );
        assert_eq!(edit(r#"{"messages":[]}"#, &["a"]), None);
        assert_eq!(
            WireFormat::AnthropicMessages.apply_request_edits(b"not json", &[]),
            Ok(None)
        );
    }

    #[test]
    fn the_fixture_requests_and_verdicts_agree_with_the_messages() {
        for fixture in fixtures("anthropic", WireFormat::AnthropicMessages) {
            let (name, verdict, request) = (&fixture.name, &fixture.verdict, &fixture.request);
            let response = WireFormat::AnthropicMessages
                .parse_response(&fixture.response)
                .expect(name);
            let declared = |call: &&ToolCall| request.declared_tool(&call.name).is_some();
            let undeclared: Vec<&ToolCall> =
                response.calls.iter().filter(|c| !declared(c)).collect();
            for violation in verdict["violations"].as_array().into_iter().flatten() {
                let call = response.calls.iter().find(|call| {
                    call.id.as_deref() == violation["tool_call_id"].as_str()
                        && Some(call.name.as_str()) == violation["tool"].as_str()
                });
                let call = call.unwrap_or_else(|| panic!("{name}: {violation}"));
                let membership = violation["check"] == "membership";
                assert_eq!(membership, undeclared.contains(&call), "{name}");
            }
            if verdict["verdict"] == "allowed" {
                assert!(undeclared.is_empty(), "{name}");
            }
        }
    }
}
