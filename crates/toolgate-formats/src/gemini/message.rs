//! The Gemini request and answer: declared tools from `tools[]` (each entry's
//! `functionDeclarations`, and the built-in tools by their field), the calls of every
//! candidate's parts, the reasoning from its `thought` parts, and the conversation's calls and
//! their `functionResponse`s from `contents[]`.

use bytes::Bytes;
use serde_json::value::RawValue;

use super::{Fields, candidate_choice, candidate_parts, part_call, schema};
use crate::answer::Reading;
use crate::format::{Claim, ParseError, ToolRequest, ToolResponse, WireFormat};
use crate::tool::{CallOutcome, DeclaredTool, HistoryCall, ToolKind};

/// A body as text: Google's API reads only UTF-8 JSON.
fn text_of(body: &[u8]) -> Result<&str, ParseError> {
    std::str::from_utf8(body).map_err(|_| {
        ParseError::with_kind(
            crate::format::ParseErrorKind::Syntax,
            "invalid JSON body: not UTF-8",
        )
    })
}

/// The declared tools of one `tools[]` entry: its function declarations, and a built-in tool
/// for every other field (`googleSearch`, `codeExecution`, `urlContext`, …, named so).
fn entry_tools(entry: &Fields<'_>, tools: &mut Vec<DeclaredTool>) -> Result<(), ParseError> {
    for name in entry.names() {
        if name != "functionDeclarations" {
            tools.push(DeclaredTool {
                name: name.to_owned(),
                kind: ToolKind::Builtin,
                parameters: None,
            });
        }
    }
    for (index, declaration) in entry.objects("functionDeclarations")?.iter().enumerate() {
        let name = declaration
            .get("name")
            .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
            .ok_or_else(|| ParseError::new(format!("functionDeclarations[{index}] has no name")))?;
        let parameters = match (
            declaration.get("parametersJsonSchema"),
            declaration.get("parameters"),
        ) {
            (Some(_), Some(_)) => {
                return Err(ParseError::with_kind(
                    crate::format::ParseErrorKind::Ambiguous,
                    format!(
                        "the function '{name}' declares both parameters and parametersJsonSchema"
                    ),
                ));
            }
            (Some(json_schema), None) => Some(json_schema.get().into()),
            (None, Some(openapi)) => Some(schema::json_schema_text(openapi)?.into()),
            (None, None) => None,
        };
        tools.push(DeclaredTool {
            name,
            kind: ToolKind::Function,
            parameters,
        });
    }
    Ok(())
}

/// Reads the declared tools (the stream flag and the model are in the path:
/// [`Adapter::read_target`](crate::adapter::Adapter::read_target)).
pub(crate) fn parse_request(body: Bytes) -> Result<ToolRequest, ParseError> {
    let request = Fields::read(text_of(&body)?)?;
    let mut declared_tools = Vec::new();
    for (index, entry) in request.objects("tools")?.iter().enumerate() {
        entry_tools(entry, &mut declared_tools).map_err(|error| {
            ParseError::with_kind(error.kind(), format!("tools[{index}]: {error}"))
        })?;
    }
    let directives = request
        .get(crate::directives::DIRECTIVES_FIELD)
        .map(RawValue::to_owned);
    let model = request
        .get("model")
        .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok());
    Ok(ToolRequest {
        format: Some(WireFormat::Gemini),
        declared_tools: declared_tools.into(),
        stream: false,
        background: false,
        model,
        directives,
        body,
    })
}

/// The calls of every candidate, the reasoning of its `thought` parts, and whether the answer
/// also has another format's calls field.
pub(crate) fn read_response(body: &[u8]) -> Result<Reading, ParseError> {
    let answer = Fields::read(text_of(body)?)?;
    let other_calls_field = (WireFormat::ALL.iter())
        .map(|format| format.calls_field())
        .any(|field| field != "candidates" && answer.has(field));
    let mut response = ToolResponse::default();
    let mut thoughts = Vec::new();
    for (position, candidate) in answer.objects("candidates")?.iter().enumerate() {
        let choice = candidate_choice(candidate, position);
        for part in candidate_parts(candidate)? {
            response.calls.extend(part_call(&part, choice)?);
            if part.is_true("thought")
                && let Some(text) = part.text("text").filter(|text| !text.is_empty())
            {
                thoughts.push(text);
            }
        }
    }
    response.reasoning = (!thoughts.is_empty()).then(|| thoughts.join("\n"));
    Ok(Reading {
        response,
        other_calls_field,
    })
}

/// `contents` (or `tools` with `functionDeclarations`) is only Gemini's.
pub(crate) fn claims(body: &[u8]) -> Claim {
    let Ok(request) = text_of(body).and_then(Fields::read) else {
        return Claim::No;
    };
    let declares = request.objects("tools").is_ok_and(|tools| {
        tools
            .iter()
            .any(|tool| tool.get("functionDeclarations").is_some())
    });
    if request.get("contents").is_some() || declares {
        Claim::Sure
    } else {
        Claim::No
    }
}

/// Removes function declarations by name (and built-in tools by their field), an entry left
/// empty with them, and the names from `toolConfig`'s `allowedFunctionNames`; the whole
/// `toolConfig` goes once no function is left, as Gemini refuses a calling mode without
/// functions. `None` when nothing changed.
pub(crate) fn remove_tools(body: &[u8], removed: &[&str]) -> Result<Option<Bytes>, ParseError> {
    let object: crate::raw_object::RawObject = crate::format::read_json(body)?;
    let Some((tools_key, tools)) = (object.0.iter())
        .find(|(key, raw)| super::camel_case(key) == "tools" && raw.get() != "null")
    else {
        return Ok(None);
    };
    let mut entries: Vec<serde_json::Value> = serde_json::from_str(tools.get())
        .map_err(|_| ParseError::new("'tools' is not a list of objects"))?;
    let mut changed = false;
    let mut functions_left = 0;
    for entry in &mut entries {
        let Some(entry) = entry.as_object_mut() else {
            continue;
        };
        let before = entry.len();
        entry.retain(|key, _| {
            super::camel_case(key) == "functionDeclarations"
                || !removed.contains(&&*super::camel_case(key))
        });
        changed |= entry.len() != before;
        for (key, declarations) in entry.iter_mut() {
            if super::camel_case(key) != "functionDeclarations" {
                continue;
            }
            if let Some(list) = declarations.as_array_mut() {
                let before = list.len();
                list.retain(|declaration| {
                    let name = declaration.get("name").and_then(serde_json::Value::as_str);
                    !name.is_some_and(|name| removed.contains(&name))
                });
                changed |= list.len() != before;
                functions_left += list.len();
            }
        }
    }
    if !changed {
        return Ok(None);
    }
    entries.retain(|entry| {
        let empty_list = |value: &serde_json::Value| value.as_array().is_some_and(Vec::is_empty);
        entry
            .as_object()
            .is_none_or(|fields| fields.values().any(|value| !empty_list(value)))
    });
    let mut replacements: Vec<(&str, Option<String>)> = vec![(
        tools_key.as_str(),
        Some(serde_json::Value::Array(entries).to_string()),
    )];
    for (key, config) in &object.0 {
        if super::camel_case(key) != "toolConfig" {
            continue;
        }
        let edited = if functions_left == 0 {
            None
        } else {
            Some(without_allowed(config.get(), removed)?)
        };
        replacements.push((key.as_str(), edited));
    }
    Ok(Some(Bytes::from(object.write(&replacements))))
}

/// A `toolConfig` without the removed names in its `allowedFunctionNames`; a list left empty
/// goes with its mode, which would otherwise force a call of a function no longer there.
fn without_allowed(config: &str, removed: &[&str]) -> Result<String, ParseError> {
    let mut config: serde_json::Value = serde_json::from_str(config)?;
    let Some(calling) = config.as_object_mut().and_then(|config| {
        config
            .iter_mut()
            .find(|(key, _)| super::camel_case(key) == "functionCallingConfig")
            .map(|(_, calling)| calling)
    }) else {
        return Ok(config.to_string());
    };
    if let Some(calling) = calling.as_object_mut() {
        let mut emptied = false;
        for (key, names) in calling.iter_mut() {
            if super::camel_case(key) != "allowedFunctionNames" {
                continue;
            }
            if let Some(list) = names.as_array_mut() {
                let before = list.len();
                list.retain(|name| !name.as_str().is_some_and(|name| removed.contains(&name)));
                emptied |= before > 0 && list.is_empty();
            }
        }
        if emptied {
            calling.clear();
        }
    }
    Ok(config.to_string())
}

/// The conversation's turns: `(role, parts)`.
fn turns(body: &[u8]) -> Option<Vec<(Option<String>, Vec<Fields<'_>>)>> {
    let request = Fields::read(text_of(body).ok()?).ok()?;
    let contents = request.objects("contents").ok()?;
    Some(
        contents
            .iter()
            .map(|content| {
                let role = content.text("role");
                let parts = content.objects("parts").unwrap_or_default();
                (role, parts)
            })
            .collect(),
    )
}

/// The text of the latest user turn that has some: a turn that only answers calls
/// (`functionResponse` parts) is the client speaking, not the user.
pub(crate) fn latest_user_text(body: &[u8]) -> Option<String> {
    let turns = turns(body)?;
    for (role, parts) in turns.iter().rev() {
        if role.as_deref().is_some_and(|role| role != "user") {
            continue;
        }
        let texts: Vec<String> = parts
            .iter()
            .filter(|part| !part.is_true("thought"))
            .filter_map(|part| part.text("text"))
            .collect();
        if !texts.is_empty() {
            return Some(texts.join("\n"));
        }
    }
    None
}

/// The calls of the conversation so far: a `model` turn's `functionCall` parts, settled by a
/// later `functionResponse` with the call's id (or, without ids, the earliest unanswered call of
/// the same name), failed when its `response` holds an `error`.
pub(crate) fn history(body: &[u8]) -> Vec<HistoryCall> {
    let Some(turns) = turns(body) else {
        return Vec::new();
    };
    let mut calls: Vec<HistoryCall> = Vec::new();
    let mut model_turns: usize = 0;
    for (role, parts) in &turns {
        let from_model = role.as_deref() == Some("model");
        let turn = model_turns;
        if from_model {
            model_turns += 1;
        }
        for part in parts {
            if from_model {
                if let Ok(Some(call)) = part_call(part, 0)
                    && call.kind == ToolKind::Function
                {
                    calls.push(HistoryCall::pending(call, turn));
                }
                continue;
            }
            let Ok(Some(result)) = part.object("functionResponse") else {
                continue;
            };
            let id = result.text("id");
            let name = result.text("name");
            let failed = result
                .object("response")
                .ok()
                .flatten()
                .is_some_and(|response| response.get("error").is_some());
            let answered = calls.iter_mut().find(|call| {
                call.outcome == CallOutcome::Pending
                    && match &id {
                        Some(id) => call.id.as_deref() == Some(id),
                        None => call.id.is_none() && Some(&call.name) == name.as_ref(),
                    }
            });
            if let Some(call) = answered {
                call.outcome = CallOutcome::answered(failed);
            }
        }
    }
    crate::tool::mark_latest_turn(&mut calls, model_turns.checked_sub(1));
    calls
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{call_lines, declared_lines, fixtures, request, request_error};
    use crate::tool::ToolCall;

    /// [`call_lines`] with each call's candidate first.
    fn summary(calls: &[ToolCall]) -> Vec<String> {
        let lines = call_lines(calls).into_iter();
        (calls.iter().zip(lines))
            .map(|(call, line)| format!("{} {line}", call.choice))
            .collect()
    }

    #[test]
    fn declarations_in_either_spelling_and_builtins_by_their_field_are_declared() {
        let parsed = request(
            WireFormat::Gemini,
            r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[
                {"functionDeclarations":[
                    {"name":"get_weather","description":"d","parameters":{"type":"OBJECT",
                     "properties":{"city":{"type":"STRING"}},"required":["city"]}},
                    {"name":"lookup","parametersJsonSchema":{"type":"object"}},
                    {"name":"ping"}]},
                {"function_declarations":[{"name":"snake","parameters_json_schema":{"type":"string"}}]},
                {"google_search":{}},{"codeExecution":{}},{"urlContext":{}}],
              "toolgate":{"group":"g"}}"#,
        );
        let tools = declared_lines(&parsed.declared_tools);
        let expected = [
            r#"get_weather Function Some("{\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"],\"type\":\"object\"}")"#,
            r#"lookup Function Some("{\"type\":\"object\"}")"#,
            "ping Function None",
            r#"snake Function Some("{\"type\":\"string\"}")"#,
            "googleSearch Builtin None",
            "codeExecution Builtin None",
            "urlContext Builtin None",
        ];
        assert_eq!(tools, expected);
        assert!(parsed.directives.is_some());
        let both = r#"{"tools":[{"functionDeclarations":[{"name":"f","parameters":{},"parametersJsonSchema":{}}]}]}"#;
        let twice =
            r#"{"tools":[{"functionDeclarations":[],"function_declarations":[{"name":"f"}]}]}"#;
        for body in [both, twice] {
            let error = request_error(WireFormat::Gemini, body);
            assert!(error.is_ambiguous(), "{error}");
        }
    }

    #[test]
    fn every_candidate_and_both_spellings_of_a_call_are_read() {
        let response = read_response(
            br#"{"candidates":[
                {"content":{"role":"model","parts":[
                    {"text":"Thinking it over.","thought":true},
                    {"text":"Checking."},
                    {"functionCall":{"name":"get_weather","args":{ "city" : "Paris" },"id":"c1"}},
                    {"function_call":{"name":"lookup"}},
                    {"executableCode":{"language":"PYTHON","code":"print(1)"}}]},
                 "finishReason":"STOP","index":0},
                {"content":{"parts":[{"functionCall":{"name":"other","args":{}}}]},"index":1}],
              "usageMetadata":{"promptTokenCount":1}}"#,
        )
        .expect("reads");
        assert_eq!(
            summary(&response.response.calls),
            [
                r#"0 c1 get_weather Function {"city":"Paris"}"#,
                "0  lookup Function {}",
                r#"0  codeExecution Builtin {"language":"PYTHON","code":"print(1)"}"#,
                "1  other Function {}",
            ]
        );
        assert_eq!(
            response.response.reasoning.as_deref(),
            Some("Thinking it over.")
        );
        assert!(!response.other_calls_field);
        let both = br#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a"},"function_call":{"name":"b"}}]}}]}"#;
        assert!(
            read_response(both)
                .err()
                .is_some_and(|error| error.is_ambiguous())
        );
        let pieces = br#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a","partialArgs":[],"willContinue":true}}]}}]}"#;
        assert!(read_response(pieces).is_err());
        let foreign = br#"{"candidates":[],"choices":[]}"#;
        assert!(read_response(foreign).expect("reads").other_calls_field);
    }

    #[test]
    fn the_history_pairs_calls_with_their_responses_by_id_or_name() {
        let body = br#"{"contents":[
            {"role":"user","parts":[{"text":"go"}]},
            {"role":"model","parts":[{"functionCall":{"name":"lookup","args":{"q":1},"id":"a"}},
                                     {"functionCall":{"name":"send","args":{}}},
                                     {"functionCall":{"name":"pending"}}]},
            {"role":"user","parts":[{"functionResponse":{"name":"lookup","id":"a","response":{"ok":1}}},
                                    {"function_response":{"name":"send","response":{"error":"down"}}}]},
            {"role":"user","parts":[{"text":"and now?"}]}]}"#;
        let calls = history(body);
        let seen: Vec<String> = calls
            .iter()
            .map(|call| format!("{:?} {} {:?}", call.id, call.name, call.outcome))
            .collect();
        assert_eq!(
            seen,
            [
                r#"Some("a") lookup Completed"#,
                "None send Failed",
                "None pending Pending"
            ]
        );
        assert_eq!(latest_user_text(body).as_deref(), Some("and now?"));
    }

    #[test]
    fn the_fixture_requests_declare_what_their_verdicts_say() {
        for fixture in fixtures("gemini", WireFormat::Gemini) {
            let (name, verdict, request) = (&fixture.name, &fixture.verdict, &fixture.request);
            let response = read_response(&fixture.response).expect(name);
            let undeclared = (response.response.calls.iter())
                .filter(|call| request.declared_tool_for(call).is_none())
                .count();
            assert_eq!(undeclared > 0, verdict["check"] == "membership", "{name}");
            assert!(
                response.response.has_calls() || verdict["verdict"] == "allowed",
                "{name}"
            );
        }
    }

    #[test]
    fn removing_a_function_edits_its_entry_and_the_allowed_names() {
        let body = r#"{"contents":[],"tools":[{"functionDeclarations":[{"name":"a"},{"name":"b"}]},{"googleSearch":{}}],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["a","b"]}},"x":1}"#;
        let edited = remove_tools(body.as_bytes(), &["a"])
            .expect("edits")
            .expect("changed");
        assert_eq!(
            std::str::from_utf8(&edited).expect("utf-8"),
            r#"{"contents":[],"tools":[{"functionDeclarations":[{"name":"b"}]},{"googleSearch":{}}],"toolConfig":{"functionCallingConfig":{"allowedFunctionNames":["b"],"mode":"ANY"}},"x":1}"#
        );
        let edited = remove_tools(body.as_bytes(), &["a", "b", "googleSearch"])
            .expect("edits")
            .expect("changed");
        assert_eq!(
            std::str::from_utf8(&edited).expect("utf-8"),
            r#"{"contents":[],"tools":[],"x":1}"#
        );
        assert_eq!(remove_tools(body.as_bytes(), &["zzz"]), Ok(None));
    }
}
