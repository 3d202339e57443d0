//! The chat-completions stream assembler: classifies each `chat.completion.chunk` event for the
//! gateway's hold-back logic and rebuilds tool calls keyed by (choice, `tool_calls[].index`),
//! accumulating fragments the way OpenAI's SDKs do (strings concatenated, `type` replaced), so
//! the calls validated are the calls the client will execute.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use crate::format::text_or_raw_json;
use crate::sse::SseEvent;
use crate::stream::{StreamAssembler, StreamStep, event_data, event_object};
use crate::tool::{ToolCall, ToolKind};

#[derive(Deserialize, Default)]
#[serde(default)]
struct ChunkWire<'a> {
    #[serde(borrow)]
    choices: Option<Vec<ChoiceWire<'a>>>,
    /// `null` on every chunk but the last when `stream_options.include_usage` is set.
    usage: Option<IgnoredAny>,
    /// Chat chunks have no `type`: Responses and Anthropic events do, and a client of those
    /// formats reads them by it. Such an event is not chat's to classify.
    #[serde(rename = "type")]
    foreign_type: Option<IgnoredAny>,
    /// Gemini's calls field: a Gemini client reads calls from it.
    candidates: Option<IgnoredAny>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ChoiceWire<'a> {
    index: Option<u32>,
    #[serde(borrow)]
    delta: Option<DeltaWire<'a>>,
    finish_reason: Option<IgnoredAny>,
}

/// Text fields stay raw: only their emptiness matters, except for reasoning.
#[derive(Deserialize)]
struct DeltaWire<'a> {
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    refusal: Option<&'a RawValue>,
    #[serde(borrow, default)]
    reasoning_content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    reasoning: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallDeltaWire<'a>>>,
    #[serde(borrow, default)]
    function_call: Option<FunctionDeltaWire<'a>>,
}

impl DeltaWire<'_> {
    /// Whether a call fragment's arguments (or custom input) are a JSON value other than a
    /// string.
    fn has_fragment_not_text(&self) -> bool {
        let not_text = |raw: Option<&RawValue>| raw.is_some_and(|raw| !raw.get().starts_with('"'));
        let tool_calls = self.tool_calls.iter().flatten().any(|call| {
            not_text(
                call.function
                    .as_ref()
                    .and_then(|function| function.arguments),
            ) || not_text(call.custom.as_ref().and_then(|custom| custom.input))
        });
        tool_calls
            || not_text(
                self.function_call
                    .as_ref()
                    .and_then(|function| function.arguments),
            )
    }
}

#[derive(Deserialize)]
struct ToolCallDeltaWire<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDeltaWire<'a>>,
    #[serde(borrow, default)]
    custom: Option<CustomDeltaWire<'a>>,
}

#[derive(Deserialize)]
struct FunctionDeltaWire<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CustomDeltaWire<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
}

/// Where a call sits in its choice; the derived order puts `tool_calls` before the legacy
/// `function_call`, as `parse_response` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Slot {
    Tool(u32),
    Legacy,
}

/// A call being reassembled. Function and custom parts are kept apart so that the part the
/// call's final `type` selects is the one validated, whatever else a hostile stream sent.
/// It is kept after it is handed out for validation: a fragment that comes later (after its
/// choice's finish) extends it, as the client's accumulator does, and the whole call is checked
/// again, never the late fragment alone as a call of its own.
#[derive(Debug, Default, Clone)]
struct PendingCall {
    id: Option<String>,
    declared: Option<ToolKind>,
    function: Option<NamedText>,
    custom: Option<NamedText>,
    /// It grew since it was last handed out.
    pending: bool,
}

#[derive(Debug, Default, Clone)]
struct NamedText {
    name: String,
    text: String,
}

#[derive(Debug, Default)]
struct ChoiceState {
    finished: bool,
    /// For servers that omit `tool_calls[].index`: the call their next fragment continues,
    /// and the index a new call gets.
    last_tool: Option<u32>,
    next_tool: u32,
}

/// Rebuilds the tool calls of one streamed chat completion.
#[derive(Debug, Default)]
pub struct ChatStreamAssembler {
    calls: BTreeMap<(u32, Slot), PendingCall>,
    /// The calls as a client reads them that puts a fragment without `index` at its position
    /// in the delta's list (`index || 0`), where the guess above does not: kept from the first
    /// fragment the two readings place apart, and its calls checked too where they differ.
    by_position: Option<BTreeMap<(u32, Slot), PendingCall>>,
    choices: BTreeMap<u32, ChoiceState>,
    reasoning: String,
    done: bool,
}

impl ChatStreamAssembler {
    /// An assembler for a stream that has not begun.
    pub fn new() -> Self {
        ChatStreamAssembler::default()
    }

    /// Reads one choice's delta; returns (shows the client something, carries a call fragment).
    fn read_delta(&mut self, choice: u32, delta: DeltaWire<'_>) -> (bool, bool) {
        let reasoning = delta.reasoning_content.filter(|raw| is_nonempty(raw));
        let reasoning = reasoning.or(delta.reasoning.filter(|raw| is_nonempty(raw)));
        if let (0, Some(raw)) = (choice, reasoning) {
            self.reasoning.push_str(&text_or_raw_json(raw));
        }
        let visible = reasoning.is_some()
            || delta.content.is_some_and(is_nonempty)
            || delta.refusal.is_some_and(is_nonempty);
        let mut fragment = false;
        for (position, call) in delta.tool_calls.into_iter().flatten().enumerate() {
            fragment = true;
            self.read_tool_fragment(choice, position, call);
        }
        if let Some(function) = delta.function_call {
            fragment = true;
            let key = (choice, Slot::Legacy);
            for calls in [Some(&mut self.calls), self.by_position.as_mut()]
                .into_iter()
                .flatten()
            {
                let pending = calls.entry(key).or_default();
                pending.pending = true;
                let part = pending.function.get_or_insert_default();
                append_part(part, function.name.as_deref(), function.arguments);
            }
        }
        (visible, fragment)
    }

    fn read_tool_fragment(&mut self, choice: u32, position: usize, call: ToolCallDeltaWire<'_>) {
        let id = call.id.as_deref().filter(|id| !id.is_empty());
        let index = call.index.unwrap_or_else(|| self.guess_index(choice, id));
        let state = self.choices.entry(choice).or_default();
        state.last_tool = Some(index);
        state.next_tool = state.next_tool.max(index.saturating_add(1));
        let at_position = call
            .index
            .unwrap_or_else(|| u32::try_from(position).unwrap_or(u32::MAX));
        if at_position != index && self.by_position.is_none() {
            self.by_position = Some(self.calls.clone());
        }
        let pending = self.calls.entry((choice, Slot::Tool(index))).or_default();
        apply_fragment(pending, id, &call);
        if let Some(by_position) = &mut self.by_position {
            let pending = by_position.entry((choice, Slot::Tool(at_position)));
            apply_fragment(pending.or_default(), id, &call);
        }
    }

    /// The call a fragment without `index` belongs to: the pending call with its id, else a new
    /// call when it brings an id, else the call the previous fragment continued.
    fn guess_index(&self, choice: u32, id: Option<&str>) -> u32 {
        let state = self.choices.get(&choice);
        let next = state.map_or(0, |state| state.next_tool);
        let pending_index = |(&(_, slot), _): (&(u32, Slot), &PendingCall)| match slot {
            Slot::Tool(index) => Some(index),
            Slot::Legacy => None,
        };
        let in_choice = self
            .calls
            .range((choice, Slot::Tool(0))..(choice, Slot::Legacy));
        match id {
            Some(id) => in_choice
                .filter(|(_, call)| call.id.as_deref() == Some(id))
                .find_map(pending_index)
                .unwrap_or(next),
            None => state
                .and_then(|state| state.last_tool)
                .filter(|&last| self.calls.contains_key(&(choice, Slot::Tool(last))))
                .unwrap_or(next),
        }
    }
}

fn is_nonempty(raw: &RawValue) -> bool {
    raw.get() != "\"\""
}

/// Adds a fragment to the call it belongs to, as the client's accumulator does.
fn apply_fragment(pending: &mut PendingCall, id: Option<&str>, call: &ToolCallDeltaWire<'_>) {
    pending.pending = true;
    if pending.id.is_none() {
        pending.id = id.map(str::to_owned);
    }
    if let Some(kind) = &call.kind {
        pending.declared = Some(match kind.as_ref() {
            "custom" => ToolKind::Custom,
            _ => ToolKind::Function,
        });
    }
    if let Some(function) = &call.function {
        let part = pending.function.get_or_insert_default();
        append_part(part, function.name.as_deref(), function.arguments);
    }
    if let Some(custom) = &call.custom {
        let part = pending.custom.get_or_insert_default();
        append_part(part, custom.name.as_deref(), custom.input);
    }
}

fn append_part(part: &mut NamedText, name: Option<&str>, text: Option<&RawValue>) {
    if let Some(name) = name {
        part.name.push_str(name);
    }
    if let Some(raw) = text {
        part.text.push_str(&text_or_raw_json(raw));
    }
}

/// The calls that grew since they were last taken, marked taken.
fn taken(calls: &mut BTreeMap<(u32, Slot), PendingCall>) -> impl Iterator<Item = ToolCall> + '_ {
    let pending = calls.iter_mut().filter(|(_, call)| call.pending);
    pending.map(|(&(choice, slot), call)| {
        call.pending = false;
        call.to_call(choice, slot)
    })
}

impl PendingCall {
    fn to_call(&self, choice: u32, slot: Slot) -> ToolCall {
        let kind = match (slot, self.declared, &self.function, &self.custom) {
            (Slot::Legacy, ..) => ToolKind::LegacyFunction,
            (Slot::Tool(_), Some(kind), ..) => kind,
            (Slot::Tool(_), None, None, Some(_)) => ToolKind::Custom,
            (Slot::Tool(_), None, ..) => ToolKind::Function,
        };
        let part = match kind {
            ToolKind::Custom => &self.custom,
            ToolKind::Function | ToolKind::LegacyFunction | ToolKind::Builtin => &self.function,
        };
        let part = part.clone().unwrap_or_default();
        ToolCall {
            choice,
            id: self.id.clone(),
            name: part.name,
            kind,
            arguments: part.text,
        }
    }
}

impl StreamAssembler for ChatStreamAssembler {
    fn observe(&mut self, event: &SseEvent) -> StreamStep {
        let data = match event_data(event) {
            Ok(data) => data,
            Err(step) => return step,
        };
        if data == "[DONE]" {
            self.done = true;
            return StreamStep::Done;
        }
        let chunk: ChunkWire = match event_object(data) {
            Ok(chunk) => chunk,
            Err(step) => return step,
        };
        if chunk.foreign_type.is_some() || chunk.candidates.is_some() {
            return StreamStep::Unrecognized;
        }
        // An object without choices is an error the upstream sent mid-stream or an extension
        // event: the client must see it.
        let Some(choices) = chunk.choices else {
            return StreamStep::Content;
        };
        let mut visible = chunk.usage.is_some();
        let mut holds_calls = false;
        let mut odd_fragment = false;
        for (position, choice) in choices.into_iter().enumerate() {
            let index = choice.index.unwrap_or(position as u32);
            if let Some(delta) = choice.delta {
                odd_fragment |= delta.has_fragment_not_text();
                let (shows, fragment) = self.read_delta(index, delta);
                visible |= shows;
                holds_calls |= fragment;
                if fragment {
                    // Only a finish after a call's last fragment completes it.
                    self.choices.entry(index).or_default().finished = false;
                }
            }
            if choice.finish_reason.is_some() {
                self.choices.entry(index).or_default().finished = true;
                // The finish of a choice with calls completes them: held with them.
                let calls = (index, Slot::Tool(0))..=(index, Slot::Legacy);
                if self.calls.range(calls).any(|(_, call)| call.pending) {
                    holds_calls = true;
                } else {
                    visible = true;
                }
            }
        }
        match (holds_calls, visible) {
            // Fragments are joined as text: one that is another JSON value is replaced,
            // dropped or stringified, each client its own way (Python's accumulator puts
            // `"unit…"` in place of a `42` before it), so no reading of the call is the client's.
            (true, _) if odd_fragment => StreamStep::Unreadable,
            (true, _) => StreamStep::ToolFragment,
            (false, true) => StreamStep::Content,
            (false, false) => StreamStep::Preamble,
        }
    }

    fn ended(&self) -> bool {
        self.done
    }

    fn calls_ready(&self) -> bool {
        let mut pending = self
            .calls
            .iter()
            .filter(|(_, call)| call.pending)
            .peekable();
        pending.peek().is_some()
            && (self.done
                || pending.all(|((choice, _), _)| {
                    self.choices.get(choice).is_some_and(|state| state.finished)
                }))
    }

    fn take_calls(&mut self) -> Vec<ToolCall> {
        let mut calls: Vec<ToolCall> = taken(&mut self.calls).collect();
        if let Some(by_position) = &mut self.by_position {
            let read =
                |(&(choice, slot), call): (&(u32, Slot), &PendingCall)| call.to_call(choice, slot);
            let known: Vec<ToolCall> = self.calls.iter().map(read).collect();
            let other = taken(by_position).filter(|call| !known.contains(call));
            calls.extend(other.collect::<Vec<_>>());
        }
        calls
    }

    fn reasoning(&self) -> Option<&str> {
        (!self.reasoning.is_empty()).then_some(self.reasoning.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::tests::observe_all;

    type Summary<'a> = (Option<&'a str>, &'a str, ToolKind, &'a str);

    fn take_calls(chunks: &[&str]) -> Vec<ToolCall> {
        let mut assembler = ChatStreamAssembler::new();
        observe_all(&mut assembler, chunks);
        assembler.take_calls()
    }

    fn summary(calls: &[ToolCall]) -> Vec<Summary<'_>> {
        calls.iter().map(fields).collect()
    }

    fn fields(c: &ToolCall) -> Summary<'_> {
        (
            c.id.as_deref(),
            c.name.as_str(),
            c.kind,
            c.arguments.as_str(),
        )
    }

    #[test]
    fn names_in_pieces_and_missing_indexes_are_reassembled() {
        let calls = take_calls(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","type":"function","function":{"name":"get_","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"weather","arguments":":1}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"now","arguments":{"tz":"UTC"}}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"arguments":""}}]}}]}"#,
        ]);
        // A client that places a fragment without `index` at its position in the list reads
        // one call of them all: it is checked too.
        let expected: [Summary; 3] = [
            (Some("a"), "get_weather", ToolKind::Function, r#"{"x":1}"#),
            (Some("b"), "now", ToolKind::Function, r#"{"tz":"UTC"}"#),
            (
                Some("a"),
                "get_weathernow",
                ToolKind::Function,
                r#"{"x":1}{"tz":"UTC"}"#,
            ),
        ];
        assert_eq!(summary(&calls), expected);
    }

    #[test]
    fn the_final_type_selects_the_part_that_is_validated() {
        let calls = take_calls(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"safe","arguments":"{}"},"custom":{"name":"rm_rf","input":"/"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"type":"custom"}],"function_call":{"name":"legacy","arguments":"{}"}}}]}"#,
        ]);
        let expected: [Summary; 2] = [
            (Some("c"), "rm_rf", ToolKind::Custom, "/"),
            (None, "legacy", ToolKind::LegacyFunction, "{}"),
        ];
        assert_eq!(summary(&calls), expected);
    }

    #[test]
    fn a_custom_call_without_type_is_custom_and_calls_sort_by_choice_and_index() {
        let calls = take_calls(&[
            r#"{"choices":[{"index":1,"delta":{"tool_calls":[{"index":0,"id":"z","function":{"name":"late","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"y","custom":{"name":"sql","input":"select"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"x","function":{"name":"first"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"custom":{"input":" 1"}}]},"finish_reason":"tool_calls"}]}"#,
        ]);
        let expected: [Summary; 3] = [
            (Some("x"), "first", ToolKind::Function, ""),
            (Some("y"), "sql", ToolKind::Custom, "select 1"),
            (Some("z"), "late", ToolKind::Function, ""),
        ];
        assert_eq!(summary(&calls), expected);
        assert_eq!(
            calls.iter().map(|c| c.choice).collect::<Vec<_>>(),
            [0, 0, 1]
        );
    }
}
