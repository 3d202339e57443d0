//! Gemini under progressive disclosure: each function declaration is disclosed as a `tools[]`
//! entry of its own (`{"functionDeclarations":[…]}`, the shape the registry appends), the
//! built-in tools stay as declared, a discovery tool declares its schema as
//! `parametersJsonSchema`, and the tool index goes after the request's `systemInstruction`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{Fields, camel_case};
use crate::disclosure::{DiscoveryTool, ToolDefinition, with_field};
use crate::format::ParseError;
use crate::raw_object::RawObject;

pub(crate) fn definitions(body: &[u8]) -> Result<Vec<ToolDefinition>, ParseError> {
    let text =
        std::str::from_utf8(body).map_err(|_| ParseError::new("the request is not UTF-8"))?;
    let request = Fields::read(text)?;
    let mut definitions = Vec::new();
    for entry in request.objects("tools")? {
        for declaration in entry.list("functionDeclarations")? {
            let fields = Fields::read(declaration.get())?;
            let Some(name) = fields.text("name") else {
                continue;
            };
            definitions.push(ToolDefinition {
                name,
                description: fields.text("description"),
                definition: format!(r#"{{"functionDeclarations":[{}]}}"#, declaration.get()),
            });
        }
    }
    Ok(definitions)
}

pub(crate) fn discovery_tool(tool: &DiscoveryTool) -> Value {
    json!({"functionDeclarations": [{
        "name": tool.name,
        "description": tool.description,
        "parametersJsonSchema": tool.parameters,
    }]})
}

/// `systemInstruction` (in either spelling) with a text part after its own; a text
/// instruction when the request has none.
pub(crate) fn add_instructions(body: &[u8], text: &str) -> Result<Bytes, ParseError> {
    let object: RawObject = crate::format::read_json(body)?;
    let present = (object.0.iter())
        .find(|(key, _)| camel_case(key) == "systemInstruction")
        .map(|(key, raw)| (key.clone(), raw.get()));
    let Some((key, current)) = present else {
        let instruction = json!({"parts": [{"text": text}]}).to_string();
        return Ok(with_field(&object, "systemInstruction", instruction));
    };
    let mut instruction: Value = serde_json::from_str(current)?;
    let added = json!({"text": text});
    match &mut instruction {
        Value::String(existing) => {
            instruction = json!({"parts": [{"text": existing}, added]});
        }
        Value::Object(content) => {
            let parts = content
                .iter_mut()
                .find(|(key, _)| camel_case(key) == "parts")
                .map(|(_, parts)| parts);
            match parts {
                Some(Value::Array(parts)) => parts.push(added),
                Some(_) => {
                    return Err(ParseError::new(
                        "the request's systemInstruction has parts that are not a list",
                    ));
                }
                None => {
                    content.insert("parts".to_owned(), json!([added]));
                }
            }
        }
        Value::Null => instruction = json!({"parts": [added]}),
        _ => {
            return Err(ParseError::new(
                "the request's systemInstruction is neither text nor content",
            ));
        }
    }
    Ok(with_field(&object, &key, instruction.to_string()))
}

/// The functions a calling mode of `ANY` limits the model to (`allowedFunctionNames`); other
/// modes force none.
pub(crate) fn forced_tools(body: &[u8]) -> Vec<String> {
    let Some(calling) = std::str::from_utf8(body)
        .ok()
        .and_then(|text| Fields::read(text).ok())
        .and_then(|request| request.object("toolConfig").ok().flatten())
        .and_then(|config| config.object("functionCallingConfig").ok().flatten())
    else {
        return Vec::new();
    };
    if !calling
        .text("mode")
        .is_some_and(|mode| mode.eq_ignore_ascii_case("ANY"))
    {
        return Vec::new();
    }
    let names = calling.list("allowedFunctionNames").unwrap_or_default();
    names
        .iter()
        .filter_map(|name| serde_json::from_str::<String>(name.get()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_are_disclosed_one_entry_each_and_the_index_joins_the_instruction() {
        let body = br#"{"contents":[],"system_instruction":{"parts":[{"text":"Be brief."}]},
            "tools":[{"functionDeclarations":[{"name":"a","description":"Does A."},{"name":"b"}]},{"googleSearch":{}}],
            "toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["b"]}}}"#;
        let found = definitions(body).expect("reads");
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].description.as_deref(), Some("Does A."));
        assert_eq!(
            found[1].definition,
            r#"{"functionDeclarations":[{"name":"b"}]}"#
        );
        assert_eq!(forced_tools(body), ["b"]);
        let shown = add_instructions(body, "Tools: a, b").expect("adds");
        let shown: Value = serde_json::from_slice(&shown).expect("json");
        assert_eq!(
            shown["system_instruction"]["parts"][1]["text"],
            "Tools: a, b"
        );
        let bare = add_instructions(br#"{"contents":[]}"#, "Tools").expect("adds");
        let bare: Value = serde_json::from_slice(&bare).expect("json");
        assert_eq!(bare["systemInstruction"]["parts"][0]["text"], "Tools");
    }
}
