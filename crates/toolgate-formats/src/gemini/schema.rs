//! A function's `parameters` as JSON Schema. Gemini declares them in its OpenAPI subset: a
//! `type` named in capitals (`OBJECT`), `nullable`, keywords in either spelling (`min_items`).
//! The checks validate against JSON Schema, so the subset is written as the JSON Schema that
//! means the same; `parametersJsonSchema` needs no such reading.

use serde_json::{Map, Value};

use super::camel_case;
use crate::format::{ParseError, ParseErrorKind};

/// The JSON Schema text of an OpenAPI-subset schema.
pub(crate) fn json_schema_text(
    openapi: &serde_json::value::RawValue,
) -> Result<String, ParseError> {
    // A key repeated verbatim counts once, its last value, as JSON readers take it; the same
    // keyword in both spellings is refused below.
    let schema: Value = serde_json::from_str(openapi.get())?;
    Ok(json_schema(&schema)?.to_string())
}

/// The schemas a keyword holds: one (`items`), a list (`anyOf`), or a map of them
/// (`properties`).
enum Holds {
    One,
    List,
    Map,
    Nothing,
}

fn holds(keyword: &str) -> Holds {
    match keyword {
        "items" => Holds::One,
        "anyOf" => Holds::List,
        "properties" => Holds::Map,
        _ => Holds::Nothing,
    }
}

fn json_schema(schema: &Value) -> Result<Value, ParseError> {
    let Some(fields) = schema.as_object() else {
        // `true`, `false` or a wrong type: the validator says what it makes of it.
        return Ok(schema.clone());
    };
    let mut out = Map::new();
    let mut nullable = false;
    let mut seen: Vec<String> = Vec::with_capacity(fields.len());
    for (key, value) in fields {
        let keyword = camel_case(key).into_owned();
        if seen.contains(&keyword) {
            return Err(ParseError::with_kind(
                ParseErrorKind::Ambiguous,
                format!("the schema keyword '{keyword}' is written twice"),
            ));
        }
        seen.push(keyword.clone());
        let value = match (keyword.as_str(), holds(&keyword)) {
            ("nullable", _) => {
                nullable = value == &Value::Bool(true);
                continue;
            }
            // Presentation only.
            ("propertyOrdering", _) => continue,
            ("type", _) => match value.as_str().map(str::to_ascii_lowercase).as_deref() {
                Some("type_unspecified") => continue,
                Some(name) => Value::from(name),
                None => value.clone(),
            },
            (_, Holds::One) => json_schema(value)?,
            (_, Holds::List) => match value.as_array() {
                Some(list) => Value::Array(list.iter().map(json_schema).collect::<Result<_, _>>()?),
                None => value.clone(),
            },
            (_, Holds::Map) => match value.as_object() {
                // The property names are the caller's, never respelled.
                Some(map) => Value::Object(
                    map.iter()
                        .map(|(name, schema)| Ok((name.clone(), json_schema(schema)?)))
                        .collect::<Result<_, ParseError>>()?,
                ),
                None => value.clone(),
            },
            (_, Holds::Nothing) => value.clone(),
        };
        out.insert(keyword, value);
    }
    if nullable {
        match out.get("type").cloned() {
            Some(Value::String(name)) => {
                out.insert(
                    "type".into(),
                    Value::Array(vec![Value::from(name), Value::from("null")]),
                );
            }
            Some(_) => {}
            None if out.contains_key("anyOf") => {
                if let Some(Value::Array(list)) = out.get_mut("anyOf") {
                    list.push(serde_json::json!({"type": "null"}));
                }
            }
            None => {}
        }
        if let Some(Value::Array(values)) = out.get_mut("enum") {
            values.push(Value::Null);
        }
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn converted(schema: Value) -> Result<Value, ParseError> {
        let raw = serde_json::value::RawValue::from_string(schema.to_string()).expect("json");
        json_schema_text(&raw).map(|text| serde_json::from_str(&text).expect("json"))
    }

    #[test]
    fn the_openapi_subset_reads_as_the_json_schema_it_means() {
        let schema = json!({
            "type": "OBJECT",
            "properties": {
                "city": {"type": "STRING", "min_length": 2, "nullable": true},
                "unit": {"type": "STRING", "enum": ["C", "F"], "nullable": true},
                "days": {"type": "ARRAY", "items": {"type": "INTEGER", "minimum": 1}, "max_items": 7},
                "type": {"anyOf": [{"type": "NUMBER"}, {"type": "BOOLEAN"}]},
                "min_items": {"type": "TYPE_UNSPECIFIED"}
            },
            "required": ["city"],
            "propertyOrdering": ["city", "unit"]
        });
        assert_eq!(
            converted(schema).expect("converts"),
            json!({
                "type": "object",
                "properties": {
                    "city": {"type": ["string", "null"], "minLength": 2},
                    "unit": {"type": ["string", "null"], "enum": ["C", "F", null]},
                    "days": {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 7},
                    "type": {"anyOf": [{"type": "number"}, {"type": "boolean"}]},
                    "min_items": {}
                },
                "required": ["city"]
            })
        );
        let twice = json!({"type": "OBJECT", "max_items": 1, "maxItems": 2});
        assert!(converted(twice).expect_err("twice").is_ambiguous());
    }
}
