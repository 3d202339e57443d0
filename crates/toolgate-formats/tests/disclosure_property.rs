//! Property: what progressive disclosure shows the model is exactly what was asked, in every
//! format. For generated requests (any number of function tools with or without descriptions,
//! provider built-ins, a forced or free `tool_choice`, a system prompt or none) and any choice
//! of loaded tools, the request with every tool hidden and the loaded ones shown again by their
//! definitions, read back by toolgate's own request reader, declares a forced tool where it was,
//! the loaded tools in declared order, then the discovery tools, and the built-ins as they were; its index text is in the system prompt; every other field keeps its
//! bytes. A tool the model was not given must not be declared, or disclosure would widen.

use proptest::prelude::*;
use serde_json::{Value, json};
use toolgate_formats::WireFormat;
use toolgate_formats::disclosure::{DisclosedTools, DiscoveryTool};

fn discovery() -> Vec<DiscoveryTool> {
    ["list_tools", "load_tool"]
        .iter()
        .map(|name| DiscoveryTool {
            name: (*name).into(),
            description: format!("{name} does discovery."),
            parameters: json!({"type": "object"}),
        })
        .collect()
}

/// One generated request: the names of its function tools, which have a description, whether a
/// built-in is declared, the forced tool (an index into the names), and a system prompt.
#[derive(Debug, Clone)]
struct Generated {
    names: Vec<String>,
    described: Vec<bool>,
    loaded: Vec<bool>,
    builtin: bool,
    forced: Option<usize>,
    /// Without a forced tool, a choice that forces none (`required`, Anthropic's `any`).
    required: bool,
    system: Option<String>,
}

fn generated() -> impl Strategy<Value = Generated> {
    (1usize..12)
        .prop_flat_map(|count| {
            (
                proptest::collection::btree_set("[a-z][a-z0-9_]{0,12}", count),
                proptest::collection::vec(any::<bool>(), count),
                proptest::collection::vec(any::<bool>(), count),
                any::<bool>(),
                proptest::option::of(0..count),
                proptest::option::of("[A-Za-z .]{0,30}"),
                any::<bool>(),
            )
        })
        .prop_map(
            |(names, described, loaded, builtin, forced, system, required)| {
                let names: Vec<String> = names.into_iter().collect();
                let forced = forced.filter(|index| *index < names.len());
                Generated {
                    described: described[..names.len()].to_vec(),
                    loaded: loaded[..names.len()].to_vec(),
                    names,
                    builtin,
                    forced,
                    system,
                    required,
                }
            },
        )
}

fn request(format: WireFormat, request: &Generated) -> Value {
    let description = |index: usize| {
        request.described[index].then(|| format!("Tool {index} does a thing. Then more."))
    };
    let mut tools: Vec<Value> = (request.names.iter().enumerate())
        .map(|(index, name)| match format {
            WireFormat::ChatCompletions => json!({"type": "function", "function":
                {"name": name, "description": description(index), "parameters": {"type": "object"}}}),
            WireFormat::Responses => json!({"type": "function", "name": name,
                "description": description(index), "parameters": {"type": "object"}}),
            WireFormat::Gemini => json!({"functionDeclarations": [{"name": name,
                "description": description(index), "parameters": {"type": "OBJECT"}}]}),
            _ => json!({"name": name, "description": description(index), "input_schema": {"type": "object"}}),
        })
        .collect();
    let forced = request.forced.map(|index| &request.names[index]);
    let mut body = match format {
        WireFormat::ChatCompletions => {
            let mut messages = Vec::new();
            if let Some(system) = &request.system {
                messages.push(json!({"role": "system", "content": system}));
            }
            messages.push(json!({"role": "user", "content": "hi"}));
            let mut body = json!({"model": "m", "messages": messages, "temperature": 0.5});
            if let Some(name) = forced {
                body["tool_choice"] = json!({"type": "function", "function": {"name": name}});
            } else if request.required {
                body["tool_choice"] = json!("required");
            }
            body
        }
        WireFormat::Responses => {
            if request.builtin {
                tools.push(json!({"type": "web_search"}));
            }
            let mut body = json!({"model": "m", "input": "hi", "temperature": 0.5});
            if let Some(system) = &request.system {
                body["instructions"] = json!(system);
            }
            if let Some(name) = forced {
                body["tool_choice"] = json!({"type": "function", "name": name});
            } else if request.required {
                body["tool_choice"] = json!("required");
            }
            body
        }
        WireFormat::Gemini => {
            if request.builtin {
                tools.push(json!({"googleSearch": {}}));
            }
            let mut body = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "model": "m", "temperature": 0.5});
            if let Some(system) = &request.system {
                body["system_instruction"] = json!({"parts": [{"text": system}]});
            }
            if let Some(name) = forced {
                body["toolConfig"] = json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}});
            } else if request.required {
                body["toolConfig"] = json!({"functionCallingConfig": {"mode": "ANY"}});
            }
            body
        }
        _ => {
            if request.builtin {
                tools.push(json!({"type": "web_search_20250305", "name": "web_search"}));
            }
            let mut body = json!({"model": "m", "max_tokens": 5, "temperature": 0.5,
                "messages": [{"role": "user", "content": "hi"}]});
            if let Some(system) = &request.system {
                body["system"] = json!(system);
            }
            if let Some(name) = forced {
                body["tool_choice"] = json!({"type": "tool", "name": name});
            } else if request.required {
                body["tool_choice"] = json!({"type": "any"});
            }
            body
        }
    };
    body["tools"] = Value::Array(tools);
    body
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_model_is_shown_exactly_the_loaded_tools_and_the_discovery_tools(generated in generated()) {
        for format in WireFormat::ALL {
            let body = request(format, &generated).to_string();
            let definitions = format.tool_definitions(body.as_bytes()).expect("the tools read");
            let names: Vec<&str> = definitions.iter().map(|tool| tool.name.as_str()).collect();
            prop_assert_eq!(&names, &generated.names.iter().map(String::as_str).collect::<Vec<_>>());
            // Every declared tool is hidden, and the loaded ones shown again by their
            // definitions, as a disclosed exchange does.
            let all: Vec<&str> = generated.names.iter().map(String::as_str).collect();
            let shown_definitions: Vec<&str> = (definitions.iter().enumerate())
                .filter(|(index, _)| generated.loaded[*index] && Some(*index) != generated.forced)
                .map(|(_, tool)| tool.definition.as_str())
                .collect();
            let tools = discovery();
            let hidden_body = format.hide_tools(body.as_bytes(), &all).expect("hidden");
            let shown = format
                .disclose(&hidden_body, &DisclosedTools { shown: &shown_definitions, discovery: &tools, instructions: "THE INDEX" })
                .expect("disclosed");
            let read = format.parse_request(shown.clone()).expect("the disclosed request reads");
            let declared: Vec<String> = read.declared_tools.iter().map(|tool| tool.name.clone()).collect();
            let mut expected: Vec<String> = generated.forced.map(|index| generated.names[index].clone()).into_iter().collect();
            expected.extend((generated.names.iter().enumerate())
                .filter(|(index, _)| generated.loaded[*index] && Some(*index) != generated.forced)
                .map(|(_, name)| name.clone()));
            expected.extend(tools.iter().map(|tool| tool.name.clone()));
            let declared_functions: Vec<String> = declared
                .iter()
                .filter(|name| !matches!(name.as_str(), "web_search" | "web_search_preview" | "googleSearch"))
                .cloned()
                .collect();
            prop_assert_eq!(&declared_functions, &expected, "{:?}", format);
            let original: Value = serde_json::from_str(&body).expect("json");
            let value: Value = serde_json::from_slice(&shown).expect("json");
            prop_assert_eq!(&value["model"], &original["model"]);
            prop_assert_eq!(&value["temperature"], &original["temperature"]);
            prop_assert_eq!(&value["tool_choice"], &original["tool_choice"], "the client's choice is kept");
            prop_assert_eq!(&value["toolConfig"], &original["toolConfig"], "the client's choice is kept");
            let builtins = |value: &Value| value["tools"].as_array().map_or(0, |tools| {
                tools.iter().filter(|tool| tool["type"].as_str().is_some_and(|kind| kind.starts_with("web_search")) || tool.get("googleSearch").is_some()).count()
            });
            prop_assert_eq!(builtins(&value), builtins(&original), "built-ins go as declared");
            let text = String::from_utf8(shown.to_vec()).expect("utf-8");
            prop_assert!(text.contains("THE INDEX"));
            if let Some(system) = generated.system.as_deref().filter(|system| !system.trim().is_empty()) {
                prop_assert!(text.contains(&serde_json::to_string(system).expect("json")[1..system.len()]), "the client's system prompt is kept");
            }
        }
    }
}
