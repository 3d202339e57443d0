//! One reader for a declared tool in any format's shape, so a body that claims one format but
//! carries another's tool entries is still understood (and checked): chat's nested
//! `{"type":"function","function":{…}}`, the Responses API's flat `{"type":"function","name",
//! "parameters"}`, Anthropic's `{"name","input_schema"}`, custom tools, and built-in tools
//! declared by type.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::ParseError;
use crate::tool::{DeclaredTool, ToolKind};

#[derive(Deserialize)]
pub(crate) struct ToolEntry<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<&'a str>,
    #[serde(borrow, default)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    function: Option<NestedWire>,
    #[serde(default)]
    custom: Option<NestedWire>,
    #[serde(default)]
    parameters: Option<Box<RawValue>>,
    #[serde(default)]
    input_schema: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct NestedWire {
    name: String,
    #[serde(default)]
    parameters: Option<Box<RawValue>>,
}

impl ToolEntry<'_> {
    /// The tool this entry declares.
    pub(crate) fn declared_tool(self) -> Result<DeclaredTool, ParseError> {
        let name = self.name.map(|name| name.into_owned());
        match (self.kind, self.function, self.custom) {
            (Some("function") | None, Some(function), _) => Ok(DeclaredTool {
                name: function.name,
                kind: ToolKind::Function,
                parameters: function.parameters,
            }),
            (Some("custom"), _, Some(custom)) => Ok(DeclaredTool {
                name: custom.name,
                kind: ToolKind::Custom,
                parameters: None,
            }),
            (Some("function") | None, None, _) if name.is_some() => Ok(DeclaredTool {
                name: name.unwrap_or_default(),
                kind: ToolKind::Function,
                parameters: self.parameters.or(self.input_schema),
            }),
            // Anthropic marks client tools with `"type": "custom"` and a flat name and schema.
            (Some("custom"), _, None) if name.is_some() => Ok(DeclaredTool {
                name: name.unwrap_or_default(),
                kind: if self.input_schema.is_some() {
                    ToolKind::Function
                } else {
                    ToolKind::Custom
                },
                parameters: self.input_schema.or(self.parameters),
            }),
            // A provider's own tool: named by its `name` if it has one (Anthropic server tools),
            // else by its type (Responses built-ins such as `web_search`).
            (Some(kind), None, None) if kind != "function" && kind != "custom" => {
                Ok(DeclaredTool {
                    name: name.unwrap_or_else(|| kind.to_owned()),
                    kind: ToolKind::Builtin,
                    parameters: None,
                })
            }
            (kind, _, _) => Err(ParseError::new(format!(
                "a tool entry of type '{}' without a name",
                kind.unwrap_or("function")
            ))),
        }
    }

    /// The name of the tool, for edits that remove tools by name.
    pub(crate) fn name(&self) -> Option<&str> {
        self.function
            .as_ref()
            .or(self.custom.as_ref())
            .map(|nested| nested.name.as_str())
            .or(self.name.as_deref())
            .or(self
                .kind
                .filter(|kind| !matches!(*kind, "function" | "custom")))
    }
}

/// The tools of a `tools` array of any shape, read with the body that holds it.
pub(crate) fn declared_tools(entries: Vec<ToolEntry<'_>>) -> Result<Vec<DeclaredTool>, ParseError> {
    entries
        .into_iter()
        .enumerate()
        .map(|(index, entry)| {
            entry
                .declared_tool()
                .map_err(|error| ParseError::new(format!("tools[{index}]: {error}")))
        })
        .collect()
}

/// Returns `tools` without the entries named in `removed`, or `None` when nothing was removed.
pub(crate) fn without_tools(
    entries: &RawValue,
    removed: &[&str],
) -> Result<Option<String>, ParseError> {
    let raw: Vec<&RawValue> = serde_json::from_str(entries.get())?;
    let mut kept = Vec::with_capacity(raw.len());
    for entry in &raw {
        let parsed: ToolEntry = serde_json::from_str(entry.get())?;
        if !parsed.name().is_some_and(|name| removed.contains(&name)) {
            kept.push(entry.get());
        }
    }
    Ok((kept.len() != raw.len()).then(|| format!("[{}]", kept.join(","))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Vec<(String, ToolKind, Option<String>)> {
        declared_tools(serde_json::from_str(json).expect("json"))
            .expect("tools parse")
            .into_iter()
            .map(|tool| {
                let schema = tool.schema_text().map(str::to_owned);
                (tool.name, tool.kind, schema)
            })
            .collect()
    }

    #[test]
    fn every_format_shape_of_a_tool_is_read() {
        let tools = read(
            r#"[{"type":"function","function":{"name":"chat_fn","parameters":{"type":"object"}}},
                {"type":"function","name":"responses_fn","parameters":{"type":"string"},"strict":true},
                {"name":"anthropic_fn","input_schema":{"type":"number"}},
                {"type":"custom","custom":{"name":"chat_custom"}},
                {"type":"custom","name":"responses_custom"},
                {"type":"web_search"},
                {"type":"web_search_20250305","name":"web_search","max_uses":3}]"#,
        );
        let expected = [
            ("chat_fn", ToolKind::Function, Some(r#"{"type":"object"}"#)),
            (
                "responses_fn",
                ToolKind::Function,
                Some(r#"{"type":"string"}"#),
            ),
            (
                "anthropic_fn",
                ToolKind::Function,
                Some(r#"{"type":"number"}"#),
            ),
            ("chat_custom", ToolKind::Custom, None),
            ("responses_custom", ToolKind::Custom, None),
            ("web_search", ToolKind::Builtin, None),
            ("web_search", ToolKind::Builtin, None),
        ];
        let expected: Vec<(String, ToolKind, Option<String>)> = expected
            .iter()
            .map(|(name, kind, schema)| (name.to_string(), *kind, schema.map(str::to_owned)))
            .collect();
        assert_eq!(tools, expected);
    }

    #[test]
    fn an_entry_without_a_name_is_an_error() {
        let entries = serde_json::from_str(r#"[{"type":"function"}]"#).expect("json");
        assert!(declared_tools(entries).is_err());
    }

    #[test]
    fn removal_keeps_other_entries_byte_for_byte() {
        let raw: Box<RawValue> =
            serde_json::from_str(r#"[{"name":"a", "input_schema" : {}},{"type":"function","name":"b"},{"type":"web_search"}]"#)
                .expect("json");
        assert_eq!(
            without_tools(&raw, &["b", "web_search"])
                .expect("edits")
                .as_deref(),
            Some(r#"[{"name":"a", "input_schema" : {}}]"#)
        );
        assert_eq!(without_tools(&raw, &["zzz"]).expect("edits"), None);
    }
}
