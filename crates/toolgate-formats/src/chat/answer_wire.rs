//! The wire structs of a Chat Completions answer, apart from both readers that fill them:
//! serde_json (`message.rs`, for every answer) and the scan's cursor (`scanned.rs`, for the
//! usual answer, filled exactly as serde_json would), so neither reader imports the other.

use serde::Deserialize;

use crate::answer::Noted;
use crate::format::raw_text;

#[derive(Deserialize)]
pub(super) struct ResponseWire<'a> {
    #[serde(borrow)]
    pub(super) choices: Vec<ChoiceWire<'a>>,
    /// The other formats' calls fields, noted.
    #[serde(default)]
    pub(super) output: Noted,
    #[serde(default)]
    pub(super) content: Noted,
    #[serde(default)]
    pub(super) candidates: Noted,
}

#[derive(Deserialize)]
pub(super) struct ChoiceWire<'a> {
    #[serde(default)]
    pub(super) index: Option<u32>,
    #[serde(borrow, default)]
    pub(super) message: Option<MessageWire<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct MessageWire<'a> {
    #[serde(borrow, default)]
    pub(super) tool_calls: Option<Vec<ToolCallWire<'a>>>,
    #[serde(borrow, default)]
    pub(super) function_call: Option<FunctionCallWire<'a>>,
    /// The reasoning summary, as vLLM, DeepSeek and llama.cpp name it.
    #[serde(default)]
    pub(super) reasoning_content: Option<String>,
    /// The reasoning summary, as Ollama and OpenRouter name it.
    #[serde(default)]
    pub(super) reasoning: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct ToolCallWire<'a> {
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(rename = "type", default)]
    pub(super) kind: Option<String>,
    #[serde(borrow, default)]
    pub(super) function: Option<FunctionCallWire<'a>>,
    #[serde(default)]
    pub(super) custom: Option<CustomCallWire>,
}

#[derive(Deserialize)]
pub(super) struct FunctionCallWire<'a> {
    pub(super) name: String,
    /// Borrowed from the body, as written: the text is copied once, into the call, not twice.
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub(super) arguments: Option<&'a str>,
}

#[derive(Deserialize)]
pub(super) struct CustomCallWire {
    pub(super) name: String,
    #[serde(default)]
    pub(super) input: Option<String>,
}
