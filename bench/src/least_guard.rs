//! The least guard serde_json and jsonschema make: the floor toolgate's tool_selection is read
//! against, in criterion (the answer's side) and in `loadbench` (the bare hyper hop with this
//! guard in it, row g). It reads the request's declared tools and the answer's calls into
//! structs of its own, checks that each call names a declared tool, and asks a validator,
//! compiled once per schema text, whether the call's arguments are valid. Nothing else: no
//! fail-closed reading of doubtful answers, no other wire format, no diagnostics, no streams.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::value::RawValue;

/// The tools a request declares, borrowed from its body.
#[derive(Deserialize)]
pub struct Declared<'a> {
    #[serde(borrow, default)]
    tools: Vec<Tool<'a>>,
}

#[derive(Deserialize)]
struct Tool<'a> {
    #[serde(borrow)]
    function: Function<'a>,
}

#[derive(Deserialize)]
struct Function<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Answer {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    tool_calls: Vec<Call>,
}

#[derive(Deserialize)]
struct Call {
    function: CalledFunction,
}

#[derive(Deserialize)]
struct CalledFunction {
    name: String,
    arguments: String,
}

impl<'a> Declared<'a> {
    /// The declared tools of a chat request; `None` when the body is not such a request.
    pub fn read(request: &'a [u8]) -> Option<Declared<'a>> {
        serde_json::from_slice(request).ok()
    }

    fn schema_of(&self, name: &str) -> Option<Option<&'a RawValue>> {
        self.tools
            .iter()
            .find(|tool| tool.function.name == name)
            .map(|tool| tool.function.parameters)
    }
}

/// Validators compiled from schema texts, each once.
#[derive(Default)]
pub struct LeastGuard {
    validators: Mutex<HashMap<String, Arc<jsonschema::Validator>>>,
}

impl LeastGuard {
    /// How many of the answer's calls were declared and valid; `None` when one was not (or the
    /// answer is not a chat completion).
    pub fn checked_calls(&self, declared: &Declared, answer: &[u8]) -> Option<usize> {
        let answer: Answer = serde_json::from_slice(answer).ok()?;
        let mut checked = 0;
        for call in answer
            .choices
            .iter()
            .flat_map(|choice| &choice.message.tool_calls)
        {
            let schema = declared.schema_of(&call.function.name)?;
            if let Some(schema) = schema {
                let validator = self.validator(schema.get())?;
                let arguments: serde_json::Value =
                    serde_json::from_str(&call.function.arguments).ok()?;
                if !validator.is_valid(&arguments) {
                    return None;
                }
            }
            checked += 1;
        }
        Some(checked)
    }

    fn validator(&self, schema: &str) -> Option<Arc<jsonschema::Validator>> {
        let mut validators = self.validators.lock().ok()?;
        if let Some(validator) = validators.get(schema) {
            return Some(validator.clone());
        }
        let parsed: serde_json::Value = serde_json::from_str(schema).ok()?;
        let validator = Arc::new(jsonschema::validator_for(&parsed).ok()?);
        validators.insert(schema.to_owned(), validator.clone());
        Some(validator)
    }
}
