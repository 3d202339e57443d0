//! One reader for a declared tool in any format's shape, so a body that claims one format but
//! carries another's tool entries is still understood (and checked): chat's nested
//! `{"type":"function","function":{…}}`, the Responses API's flat `{"type":"function","name",
//! "parameters"}`, Anthropic's `{"name","input_schema"}`, custom tools, and built-in tools
//! declared by type.

use bytes::Bytes;
use bytestring::ByteString;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::format::ParseError;
use crate::tool::{DeclaredTool, ToolKind};
use crate::tools_cache::ToolFields;

#[derive(Deserialize)]
pub(crate) struct ToolEntry<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<&'a str>,
    #[serde(borrow, default)]
    name: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<NestedWire<'a>>,
    #[serde(borrow, default)]
    custom: Option<NestedWire<'a>>,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
    #[serde(borrow, default)]
    input_schema: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct NestedWire<'a> {
    name: String,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
}

/// A schema's text as a slice of `body`, the buffer it was read from, so that holding a request
/// holds its schemas without a second copy; a copy when the text lies elsewhere.
pub(crate) fn schema_text(body: &Bytes, schema: &RawValue) -> ByteString {
    let text = schema.get();
    let start = (text.as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
    if start <= body.len() && text.len() <= body.len() - start {
        // The UTF-8 check cannot fail on the bytes of a `&str`; it keeps this free of `unsafe`.
        if let Ok(shared) = ByteString::try_from(body.slice(start..start + text.len())) {
            return shared;
        }
    }
    ByteString::from(text)
}

impl ToolEntry<'_> {
    /// The tool this entry declares; its schema shares `body`'s bytes when it was read from it.
    pub(crate) fn declared_tool(self, body: &Bytes) -> Result<DeclaredTool, ParseError> {
        let schema = |raw: Option<&RawValue>| raw.map(|raw| schema_text(body, raw));
        let name = self.name.map(|name| name.into_owned());
        match (self.kind, self.function, self.custom) {
            (Some("function") | None, Some(function), _) => Ok(DeclaredTool {
                name: function.name,
                kind: ToolKind::Function,
                parameters: schema(function.parameters),
            }),
            (Some("custom"), _, Some(custom)) => Ok(DeclaredTool {
                name: custom.name,
                kind: ToolKind::Custom,
                parameters: None,
            }),
            (Some("function") | None, None, _) if name.is_some() => Ok(DeclaredTool {
                name: name.unwrap_or_default(),
                kind: ToolKind::Function,
                parameters: schema(self.parameters.or(self.input_schema)),
            }),
            // Anthropic marks client tools with `"type": "custom"` and a flat name and schema.
            (Some("custom"), _, None) if name.is_some() => Ok(DeclaredTool {
                name: name.unwrap_or_default(),
                kind: if self.input_schema.is_some() {
                    ToolKind::Function
                } else {
                    ToolKind::Custom
                },
                parameters: schema(self.input_schema.or(self.parameters)),
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

/// The tools of a `tools` array of any shape, read from `body`.
pub(crate) fn declared_tools(
    entries: Vec<ToolEntry<'_>>,
    body: &Bytes,
) -> Result<Vec<DeclaredTool>, ParseError> {
    entries
        .into_iter()
        .enumerate()
        .map(|(index, entry)| {
            entry
                .declared_tool(body)
                .map_err(|error| ParseError::new(format!("tools[{index}]: {error}")))
        })
        .collect()
}

/// The tools of a `tools` array's JSON text (`""`: none declared), their schemas sharing
/// `source`, the buffer the text lies in.
pub(crate) fn declared_tools_of_text(
    source: &Bytes,
    text: &str,
) -> Result<Vec<DeclaredTool>, ParseError> {
    declared_tools(ToolFields::entries(text)?, source)
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
        let body = Bytes::copy_from_slice(json.as_bytes());
        declared_tools(serde_json::from_slice(&body).expect("json"), &body)
            .expect("tools parse")
            .into_iter()
            .map(|tool| {
                let schema = tool.schema_text().map(str::to_owned);
                (tool.name, tool.kind, schema)
            })
            .collect()
    }

    #[test]
    fn a_schema_shares_the_bytes_of_the_body_it_was_read_from() {
        let body = Bytes::from_static(br#"[{"name":"f","input_schema":{"type":"object"}}]"#);
        let tools = declared_tools(serde_json::from_slice(&body).expect("json"), &body)
            .expect("tools parse");
        let schema = tools[0].parameters.as_ref().expect("a schema");
        assert_eq!(&**schema, r#"{"type":"object"}"#);
        assert!(
            body.as_ptr_range().contains(&schema.as_ptr()),
            "not a slice of the body"
        );

        // Text that is not inside the given body is copied, never sliced out of range.
        let elsewhere: &RawValue = serde_json::from_str(r#"{"type":"string"}"#).expect("json");
        let copied = schema_text(&body, elsewhere);
        assert_eq!(&*copied, r#"{"type":"string"}"#);
        assert!(!body.as_ptr_range().contains(&copied.as_ptr()));
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
        assert!(declared_tools(entries, &Bytes::new()).is_err());
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
