//! Progressive tool disclosure, as the formats write it: the declared tools a request carries
//! (name, description, definition as written), the discovery tools the gateway adds in the
//! format's own shape, and the request the model is shown — the declared tools it has not
//! loaded taken out, the discovery tools added, the tool index added to the system prompt.
//! Each format folder's `disclosure.rs` has its shapes; what to show is the plugin's choice.

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::format::ParseError;
use crate::on_block::array_items;
use crate::raw_object::RawObject;

/// One tool a request declares that the model calls by name (a function or custom tool; a
/// provider's built-in tools are not disclosed, they stay as declared).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolDefinition {
    /// The name as declared.
    pub name: String,
    /// The declared description, if any.
    pub description: Option<String>,
    /// The declared entry exactly as written (JSON text), what loading the tool shows.
    pub definition: String,
}

/// A tool the gateway declares to the model and answers itself.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveryTool {
    /// The name the model calls.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub parameters: Value,
}

/// What the model is shown of one request's tools, on top of the request with every declared
/// tool hidden ([`WireFormat::hide_tools`](crate::format::WireFormat::hide_tools); both edits
/// are the registry's, which asks each format's adapter for its shapes).
#[derive(Debug, Clone, Copy)]
pub struct DisclosedTools<'a> {
    /// Declared tools shown in full: their definitions as the request wrote them.
    pub shown: &'a [&'a str],
    /// Discovery tools added after them.
    pub discovery: &'a [DiscoveryTool],
    /// Text added to the system prompt (the index of the tools).
    pub instructions: &'a str,
}

/// `edited` (the request with tools removed) with the client's `tool_choice` and
/// `parallel_tool_calls` as `original` had them. Removing tools drops a choice once none is
/// left, as an upstream refuses a choice without tools; under disclosure the discovery tools
/// always follow, so the client's choice (`required`, `none`, parallel calls off) stays. A
/// choice forcing a hidden tool cannot be: forced tools are never hidden.
pub(crate) fn with_choice_of(
    original: &[u8],
    mut edited: Bytes,
    choice_fields: &[&str],
) -> Result<Bytes, ParseError> {
    let original: RawObject = crate::format::read_json(original)?;
    for field in choice_fields.iter().copied() {
        let Some((_, value)) = original.0.iter().find(|(key, _)| key == field) else {
            continue;
        };
        let now: RawObject = crate::format::read_json(&edited)?;
        if now.0.iter().all(|(key, _)| key != field) {
            edited = with_field(&now, field, value.get().to_owned());
        }
    }
    Ok(edited)
}

/// The body with `added` (JSON texts) at the end of its `tools` (a `tools` of its own when it
/// has none, as a chat request declaring only legacy `functions`).
pub(crate) fn with_tools_appended(body: &[u8], added: &[String]) -> Result<Bytes, ParseError> {
    let object: RawObject = crate::format::read_json(body)?;
    let current = (object.0.iter())
        .find(|(key, raw)| key == "tools" && raw.get() != "null")
        .map(|(_, raw)| array_items(raw))
        .transpose()?
        .unwrap_or_default();
    let mut items = current;
    items.extend(added.iter().cloned());
    Ok(with_field(
        &object,
        "tools",
        format!("[{}]", items.join(",")),
    ))
}

/// The object with `key` set to `value` (JSON text): in its place when present, else last.
pub(crate) fn with_field(object: &RawObject<'_>, key: &str, value: String) -> Bytes {
    if object.0.iter().any(|(name, _)| name == key) {
        return Bytes::from(object.write(&[(key, Some(value))]));
    }
    let mut written = object.write(&[]);
    written.pop();
    if written.len() > 1 {
        written.push(b',');
    }
    written.extend_from_slice(Value::from(key).to_string().as_bytes());
    written.push(b':');
    written.extend_from_slice(value.as_bytes());
    written.push(b'}');
    Bytes::from(written)
}

/// The request's `tool_choice` (and chat's legacy `function_call`), read, if it has one.
pub(crate) fn tool_choices(body: &[u8]) -> Vec<Value> {
    let Ok(object) = crate::format::read_json::<RawObject>(body) else {
        return Vec::new();
    };
    (object.0.iter())
        .filter(|(key, _)| key == "tool_choice" || key == "function_call")
        .filter_map(|(_, raw)| serde_json::from_str(raw.get()).ok())
        .collect()
}

/// A JSON object's string field, if it has one.
pub(crate) fn text_field(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The items of a request's array field, each as the text it is written as (none when the
/// field is absent or `null`).
pub(crate) fn field_items<'b>(
    object: &RawObject<'b>,
    field: &str,
) -> Result<Vec<&'b RawValue>, ParseError> {
    let Some((_, raw)) = object.0.iter().find(|(key, _)| key == field) else {
        return Ok(Vec::new());
    };
    if raw.get() == "null" {
        return Ok(Vec::new());
    }
    serde_json::from_str(raw.get())
        .map_err(|_| ParseError::new(format!("the request's `{field}` is not an array")))
}

/// A tool entry's name and description, where the shape puts them; other fields are skipped
/// unread, so a large schema costs one scan.
#[derive(Deserialize)]
pub(crate) struct NamedWire<'a> {
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub description: Option<Cow<'a, str>>,
}

/// Each item the shape reader `read` finds a name in, with its definition as written.
pub(crate) fn definitions_of<'b>(
    items: Vec<&'b RawValue>,
    read: impl Fn(&'b str) -> Option<NamedWire<'b>>,
) -> Vec<ToolDefinition> {
    items
        .into_iter()
        .filter_map(|item| {
            let named = read(item.get())?;
            Some(ToolDefinition {
                name: named.name?.into_owned(),
                description: named.description.map(Cow::into_owned),
                definition: item.get().to_owned(),
            })
        })
        .collect()
}

/// The request's `tools` entries of the types `client_tool` accepts (by their `type`, absent
/// or not), each with its `name` and `description`: the definitions of a format whose tools
/// are flat objects.
pub(crate) fn flat_definitions(
    body: &[u8],
    client_tool: impl Fn(Option<&str>) -> bool,
) -> Result<Vec<ToolDefinition>, ParseError> {
    #[derive(Deserialize)]
    struct FlatWire<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        name: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        description: Option<Cow<'a, str>>,
    }
    let object: RawObject = crate::format::read_json(body)?;
    let items = field_items(&object, "tools")?;
    Ok(definitions_of(items, |text| {
        let flat: FlatWire = serde_json::from_str(text).ok()?;
        client_tool(flat.kind.as_deref()).then_some(NamedWire {
            name: flat.name,
            description: flat.description,
        })
    }))
}

/// A system prompt that is a plain string, with `text` after it.
pub(crate) fn appended_text(existing: &str, text: &str) -> String {
    if existing.trim().is_empty() {
        text.to_owned()
    } else {
        format!("{existing}\n\n{text}")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::format::WireFormat;

    use super::*;

    fn lookup() -> DiscoveryTool {
        DiscoveryTool {
            name: "load_tool".into(),
            description: "Loads a tool's full definition.".into(),
            parameters: json!({"type": "object", "properties": {"tool_name": {"type": "string"}},
                "required": ["tool_name"]}),
        }
    }

    /// The request with every tool in `hidden` hidden and those in `shown` (of them) shown again
    /// by their definitions, as a disclosed exchange builds it.
    fn disclosed(
        format: WireFormat,
        body: &[u8],
        hidden: &[&str],
        shown: &[&str],
        discovery: &[DiscoveryTool],
        instructions: &str,
    ) -> Bytes {
        let definitions = format.tool_definitions(body).expect("the tools read");
        let shown: Vec<&str> = (definitions.iter())
            .filter(|tool| shown.contains(&tool.name.as_str()))
            .map(|tool| tool.definition.as_str())
            .collect();
        let hidden_body = format.hide_tools(body, hidden).expect("hidden");
        format
            .disclose(
                &hidden_body,
                &DisclosedTools {
                    shown: &shown,
                    discovery,
                    instructions,
                },
            )
            .expect("the request is disclosed")
    }

    fn tool_names(format: WireFormat, body: &[u8]) -> Vec<String> {
        format
            .parse_request(Bytes::copy_from_slice(body))
            .expect("the disclosed request reads")
            .declared_tools
            .iter()
            .map(|tool| tool.name.clone())
            .collect()
    }

    #[test]
    fn each_format_shows_the_loaded_tools_the_discovery_tools_and_the_index() {
        let requests = [
            (
                WireFormat::ChatCompletions,
                json!({"model": "m", "messages": [{"role": "system", "content": "Be brief."},
                    {"role": "user", "content": "hi"}],
                    "tools": [
                        {"type": "function", "function": {"name": "search", "description": "Finds pages. Fast.", "parameters": {"type": "object"}}},
                        {"type": "function", "function": {"name": "delete", "parameters": {"type": "object"}}}]}),
            ),
            (
                WireFormat::Responses,
                json!({"model": "m", "input": "hi", "instructions": "Be brief.",
                    "tools": [
                        {"type": "function", "name": "search", "description": "Finds pages. Fast.", "parameters": {"type": "object"}},
                        {"type": "function", "name": "delete", "parameters": {"type": "object"}},
                        {"type": "web_search"}]}),
            ),
            (
                WireFormat::AnthropicMessages,
                json!({"model": "m", "max_tokens": 10, "system": "Be brief.",
                    "messages": [{"role": "user", "content": "hi"}],
                    "tools": [
                        {"name": "search", "description": "Finds pages. Fast.", "input_schema": {"type": "object"}},
                        {"name": "delete", "input_schema": {"type": "object"}},
                        {"type": "web_search_20250305", "name": "web_search"}]}),
            ),
        ];
        for (format, request) in requests {
            let body = request.to_string();
            let definitions = format
                .tool_definitions(body.as_bytes())
                .expect("the tools read");
            let names: Vec<&str> = definitions.iter().map(|tool| tool.name.as_str()).collect();
            assert_eq!(
                names,
                ["search", "delete"],
                "{format:?}: built-ins are not disclosed"
            );
            assert_eq!(
                definitions[0].description.as_deref(),
                Some("Finds pages. Fast."),
                "{format:?}"
            );
            assert!(definitions[1].description.is_none(), "{format:?}");
            assert!(
                body.contains(&definitions[0].definition),
                "{format:?}: a definition is the entry as written"
            );
            let shown = disclosed(
                format,
                body.as_bytes(),
                &["search", "delete"],
                &["search"],
                &[lookup()],
                "TOOL INDEX",
            );
            let mut names = tool_names(format, &shown);
            names.retain(|name| name != "web_search");
            assert_eq!(names, ["search", "load_tool"], "{format:?}");
            let text = String::from_utf8(shown.to_vec()).expect("utf-8");
            assert!(text.contains("Be brief."), "{format:?}: {text}");
            assert!(text.contains("TOOL INDEX"), "{format:?}: {text}");
            let value: Value = serde_json::from_slice(&shown).expect("json");
            assert_eq!(value["model"], "m", "{format:?}: other fields are kept");
        }
    }

    #[test]
    fn a_forced_tool_stays_shown_in_every_format() {
        let forcing = [
            (
                WireFormat::ChatCompletions,
                json!({"model": "m", "messages": [],
                    "tool_choice": {"type": "function", "function": {"name": "delete"}},
                    "tools": [{"type": "function", "function": {"name": "delete"}},
                              {"type": "function", "function": {"name": "search"}}]}),
            ),
            (
                WireFormat::Responses,
                json!({"model": "m", "input": "hi",
                    "tool_choice": {"type": "function", "name": "delete"},
                    "tools": [{"type": "function", "name": "delete"},
                              {"type": "function", "name": "search"}]}),
            ),
            (
                WireFormat::AnthropicMessages,
                json!({"model": "m", "max_tokens": 1, "messages": [], "system": "s",
                    "tool_choice": {"type": "tool", "name": "delete"},
                    "tools": [{"name": "delete", "input_schema": {}},
                              {"name": "search", "input_schema": {}}]}),
            ),
        ];
        for (format, request) in forcing {
            let body = request.to_string();
            let shown = disclosed(
                format,
                body.as_bytes(),
                &["delete", "search"],
                &[],
                &[lookup()],
                "",
            );
            assert_eq!(
                tool_names(format, &shown),
                ["delete", "load_tool"],
                "{format:?}"
            );
            let value: Value = serde_json::from_slice(&shown).expect("json");
            assert_eq!(value["tool_choice"], request["tool_choice"], "{format:?}");
        }
    }

    #[test]
    fn hiding_every_tool_keeps_the_clients_choice_in_every_format() {
        let requests = [
            (
                WireFormat::ChatCompletions,
                json!({"model": "m", "messages": [], "tool_choice": "required",
                    "parallel_tool_calls": false,
                    "tools": [{"type": "function", "function": {"name": "search"}}]}),
            ),
            (
                WireFormat::Responses,
                json!({"model": "m", "input": "hi", "tool_choice": "none",
                    "tools": [{"type": "function", "name": "search"}]}),
            ),
            (
                WireFormat::AnthropicMessages,
                json!({"model": "m", "max_tokens": 1, "messages": [], "system": "s",
                    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
                    "tools": [{"name": "search", "input_schema": {}}]}),
            ),
        ];
        for (format, request) in requests {
            let body = request.to_string();
            let shown = disclosed(format, body.as_bytes(), &["search"], &[], &[lookup()], "");
            assert_eq!(tool_names(format, &shown), ["load_tool"], "{format:?}");
            let value: Value = serde_json::from_slice(&shown).expect("json");
            assert_eq!(value["tool_choice"], request["tool_choice"], "{format:?}");
            assert_eq!(
                value["parallel_tool_calls"], request["parallel_tool_calls"],
                "{format:?}"
            );
        }
    }

    #[test]
    fn the_index_goes_where_each_format_keeps_its_system_prompt() {
        let chat = json!({"model": "m", "messages": [{"role": "system", "content": "A"},
            {"role": "user", "content": "hi"}], "tools": []})
        .to_string();
        let shown: Value = serde_json::from_slice(&disclosed(
            WireFormat::ChatCompletions,
            chat.as_bytes(),
            &[],
            &[],
            &[],
            "INDEX",
        ))
        .expect("json");
        assert_eq!(shown["messages"][0]["content"], "A");
        assert_eq!(
            shown["messages"][1],
            json!({"role": "system", "content": "INDEX"})
        );
        assert_eq!(shown["messages"][2]["role"], "user");

        let anthropic = json!({"model": "m", "max_tokens": 1, "messages": [],
            "system": [{"type": "text", "text": "A"}], "tools": []})
        .to_string();
        let shown: Value = serde_json::from_slice(&disclosed(
            WireFormat::AnthropicMessages,
            anthropic.as_bytes(),
            &[],
            &[],
            &[],
            "INDEX",
        ))
        .expect("json");
        assert_eq!(
            shown["system"],
            json!([{"type": "text", "text": "A"}, {"type": "text", "text": "INDEX"}])
        );

        let responses = json!({"model": "m", "input": "hi", "tools": []}).to_string();
        let shown: Value = serde_json::from_slice(&disclosed(
            WireFormat::Responses,
            responses.as_bytes(),
            &[],
            &[],
            &[],
            "INDEX",
        ))
        .expect("json");
        assert_eq!(shown["instructions"], "INDEX");
    }
}
