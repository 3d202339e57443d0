//! The Responses API stream assembler: classifies each `response.*` event for the gateway's
//! hold-back logic and rebuilds the call of each output item. A client may act on the streamed
//! deltas, on `…arguments.done`, on `response.output_item.done` or on the output of
//! `response.completed`; every distinct version of a call among those is handed out for checking,
//! so whichever one a client executes was validated. Versions that agree count once.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use crate::format::{WireFormat, name_text, text_or_raw_json};
use crate::sse::SseEvent;
use crate::stream::{StreamAssembler, StreamStep, event_json};
use crate::tool::{ToolCall, ToolKind};

#[derive(Deserialize, Default)]
#[serde(default)]
struct EventWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    output_index: Option<u64>,
    #[serde(borrow)]
    item_id: Option<&'a RawValue>,
    #[serde(borrow)]
    item: Option<&'a RawValue>,
    #[serde(borrow)]
    response: Option<&'a RawValue>,
    #[serde(borrow)]
    delta: Option<&'a RawValue>,
    /// `arguments` of a function call, `input` of a custom one.
    #[serde(borrow, alias = "input")]
    arguments: Option<&'a RawValue>,
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    summary_index: Option<&'a RawValue>,
    error: Option<IgnoredAny>,
    /// A chat chunk's field (and Gemini's): a client of that format would read calls from it,
    /// so the event is not this format's to classify.
    choices: Option<IgnoredAny>,
    candidates: Option<IgnoredAny>,
}

/// The head of an output item: enough to match it and to see whether it shows anything.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ItemHeadWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    summary: Option<Vec<IgnoredAny>>,
    content: Option<Vec<IgnoredAny>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ResponseWire<'a> {
    #[serde(borrow)]
    output: Option<Vec<&'a RawValue>>,
}

/// Where a complete version of a call came from, in the order SDKs trust them: the item of
/// `response.output_item.done` (what they hand to the code that runs the call), the item in a
/// response object (`response.completed`'s output), the text of `…arguments.done`.
const FINISHED: usize = 0;
const IN_RESPONSE: usize = 1;
const ARGUMENTS_DONE: usize = 2;

/// One output item that is a call, with every version of it seen so far.
#[derive(Debug, Default)]
struct CallItem {
    item_id: Option<String>,
    /// As `response.output_item.added` opened it (arguments still empty).
    opened: Option<ToolCall>,
    /// The deltas since it opened, once any arrived.
    streamed: Option<String>,
    complete: [Option<ToolCall>; 3],
    /// Versions replaced before they were handed out: a second `output_item.added` or `.done`
    /// at the same index. SDKs append every added item to their snapshot's output, and a client
    /// may act on each event, so a replaced version is still checked.
    superseded: Vec<ToolCall>,
    /// Versions already handed out by `take_calls`.
    released: Vec<ToolCall>,
    /// Something not yet handed out may be here.
    pending: bool,
}

impl CallItem {
    /// Every distinct version, the most trusted first; the opened call too unless another
    /// version is what it grew into (alone if nothing else came: a stream cut short is checked
    /// as it is). An SDK's snapshot holds the item as it was added, plus the deltas: when a
    /// later version names another tool, the one added is a call of its own.
    fn versions(&self) -> Vec<ToolCall> {
        let mut versions: Vec<ToolCall> = Vec::new();
        let complete = self.complete.iter().flatten().cloned();
        for call in complete.chain(self.streamed()) {
            if !versions.contains(&call) {
                versions.push(call);
            }
        }
        if let Some(opened) = &self.opened
            && !versions.iter().any(|version| grew_from(version, opened))
        {
            versions.push(opened.clone());
        }
        for call in &self.superseded {
            if !versions.contains(call) {
                versions.push(call.clone());
            }
        }
        versions
    }

    /// The opened call with the deltas since, once any arrived.
    fn streamed(&self) -> Option<ToolCall> {
        self.streamed.as_ref().map(|text| {
            let mut call = (self.opened.clone()).unwrap_or_else(|| nameless(ToolKind::Function));
            call.arguments.push_str(text);
            call
        })
    }

    /// Keeps a version about to be replaced, unless it was handed out already.
    fn supersede(&mut self, call: Option<ToolCall>) {
        if let Some(call) = call.filter(|call| !self.released.contains(call)) {
            self.superseded.push(call);
        }
    }

    /// Records a complete version; returns whether it is new to the calls handed out.
    fn record(&mut self, source: usize, call: ToolCall) -> bool {
        let new = !self.released.contains(&call);
        self.pending |= new;
        let replaced = self.complete[source].replace(call);
        self.supersede(replaced);
        new
    }

    fn step(&self) -> StreamStep {
        match self.pending {
            true => StreamStep::ToolFragment,
            false => StreamStep::Content,
        }
    }
}

/// Whether `later` is the call `opened` grew into: the same tool, with arguments that extend
/// the opened ones; for a built-in, whose payload fills in as it runs, the same MCP server and
/// tool in it (the opened payload leads the text when deltas were appended to it).
fn grew_from(later: &ToolCall, opened: &ToolCall) -> bool {
    let identity = |arguments: &str| {
        let mut values = serde_json::Deserializer::from_str(arguments).into_iter();
        let payload: Option<serde_json::Value> = values.next().and_then(Result::ok);
        let field = |key| {
            payload
                .as_ref()
                .and_then(|payload| payload.get(key))
                .cloned()
        };
        (field("server_label"), field("name"))
    };
    later.name == opened.name
        && later.kind == opened.kind
        && match opened.kind {
            ToolKind::Builtin => identity(&later.arguments) == identity(&opened.arguments),
            _ => later.arguments.starts_with(&opened.arguments),
        }
}

/// A call whose item never said what it is: named by nothing, so no check lets it pass.
fn nameless(kind: ToolKind) -> ToolCall {
    let (id, name, arguments) = (None, String::new(), String::new());
    ToolCall {
        choice: 0,
        id,
        name,
        kind,
        arguments,
    }
}

/// Reads one output item with the format's own reader. `None`: not a call.
fn read_call(item: &RawValue) -> Option<ToolCall> {
    let body = format!(r#"{{"output":[{}]}}"#, item.get());
    let response = WireFormat::Responses.parse_response(body.as_bytes()).ok()?;
    response.calls.into_iter().next()
}

fn text(raw: Option<&RawValue>) -> Option<String> {
    raw.map(text_or_raw_json)
}

/// Rebuilds the tool calls of one streamed Responses API answer.
#[derive(Debug, Default)]
pub struct ResponsesStreamAssembler {
    /// Call items by output index.
    items: BTreeMap<u64, CallItem>,
    /// The call item opened last: the one a fragment naming no item continues.
    last_opened: Option<u64>,
    /// A terminal event came (`response.completed`, `.incomplete`, `.failed`, `error`).
    ended: bool,
    /// The latest event was not part of a call, so the calls before it are all there is for now:
    /// parallel calls are checked together, and the event that follows them is held with them.
    settled: bool,
    reasoning: String,
    /// The summary part (output index, item id, summary index) the last delta belonged to.
    reasoning_part: Option<(Option<u64>, Option<String>, Option<String>)>,
    reasoning_separator_due: bool,
}

impl ResponsesStreamAssembler {
    /// An assembler for a stream that has not begun.
    pub fn new() -> Self {
        ResponsesStreamAssembler::default()
    }

    fn read_event(&mut self, kind: &str, event: EventWire<'_>) -> StreamStep {
        use StreamStep::*;
        let fragment_kind = match kind.contains("custom_tool_call") {
            true => ToolKind::Custom,
            false => ToolKind::Function,
        };
        match kind {
            "response.created" | "response.in_progress" | "response.queued" => {
                match self.read_response(event.response) {
                    Some(true) => ToolFragment,
                    Some(false) => Preamble,
                    None => Unrecognized,
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                self.ended = true;
                let readable = self.read_response(event.response).is_some();
                match self.items.values().any(|item| item.pending) {
                    _ if !readable => Unrecognized,
                    true => ToolFragment,
                    false => Content,
                }
            }
            "error" => {
                self.ended = true;
                Content
            }
            "response.output_item.added" | "response.output_item.done" => {
                self.read_item(kind.ends_with("added"), &event)
            }
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                let item = self.locate(&event, fragment_kind);
                let delta = text(event.delta).unwrap_or_default();
                item.streamed.get_or_insert_default().push_str(&delta);
                item.pending = true;
                ToolFragment
            }
            "response.function_call_arguments.done" | "response.custom_tool_call_input.done" => {
                let item = self.locate(&event, fragment_kind);
                let mut call = (item.opened.clone()).unwrap_or_else(|| nameless(fragment_kind));
                call.name = event.name.map(name_text).unwrap_or(call.name);
                call.arguments = text(event.arguments).unwrap_or_default();
                item.record(ARGUMENTS_DONE, call);
                item.step()
            }
            "response.reasoning_summary_text.delta" => {
                self.read_reasoning(&event);
                Content
            }
            "response.content_part.added" | "response.reasoning_summary_part.added" => Preamble,
            // An event of a type this reader does not know that carries an item or a response
            // object: a client that reads items wherever they come could act on it, so it is
            // the guard's to judge (it refuses the event when a call is in it).
            _ if event.item.is_some() || event.response.is_some() => Unrecognized,
            // Progress of a call still held (a built-in's status, code or argument deltas) is
            // held with it; anything else is visible.
            _ => match self.find(&event).and_then(|index| self.items.get(&index)) {
                Some(item) if item.pending => ToolFragment,
                _ => Content,
            },
        }
    }

    /// `response.output_item.added` / `.done`: a call item opens or finishes; other items show
    /// nothing until their text streams (or, done, show it unless they are an empty reasoning).
    fn read_item(&mut self, added: bool, event: &EventWire<'_>) -> StreamStep {
        let Some(raw) = event.item else {
            return StreamStep::Content;
        };
        let head: ItemHeadWire = serde_json::from_str(raw.get()).unwrap_or_default();
        let Some(call) = read_call(raw) else {
            let empty = |parts: Option<Vec<IgnoredAny>>| parts.is_none_or(|parts| parts.is_empty());
            let reasoning = head.kind.as_deref() == Some("reasoning");
            return match added || (reasoning && empty(head.summary) && empty(head.content)) {
                true => StreamStep::Preamble,
                false => StreamStep::Content,
            };
        };
        let item_id = text(head.id);
        let index = (event.output_index)
            .or_else(|| self.by_item_id(item_id.as_deref()))
            .unwrap_or_else(|| self.next_index());
        let item = self.items.entry(index).or_default();
        item.item_id = item_id.or(item.item_id.take());
        if added {
            // As SDKs do, a new item at an index starts over: later deltas extend this one.
            let replaced = item.streamed().or(item.opened.take());
            item.supersede(replaced);
            item.opened = Some(call);
            item.streamed = None;
            item.pending = true;
            self.last_opened = Some(index);
        } else {
            item.record(FINISHED, call);
        }
        item.step()
    }

    /// Records the calls in a response object's output (normally only `response.completed` has
    /// any); returns whether one of them is new to the calls handed out. `None`: the object
    /// cannot be read (a repeated `output`, one that is not a list), so its event is left to
    /// the guard, which refuses it when a client could read a call from it.
    fn read_response(&mut self, response: Option<&RawValue>) -> Option<bool> {
        let output = match response {
            Some(raw) => serde_json::from_str::<ResponseWire>(raw.get()).ok()?.output,
            None => None,
        };
        let output = output.unwrap_or_default();
        let mut new = false;
        for (position, raw) in output.into_iter().enumerate() {
            if let Some(call) = read_call(raw) {
                let item = self.items.entry(position as u64).or_default();
                new |= item.record(IN_RESPONSE, call);
            }
        }
        Some(new)
    }

    /// The call item a fragment belongs to, opened if it names none known: its output index
    /// (what SDKs go by), else its item id, else the call opened last, else a new one.
    fn locate(&mut self, event: &EventWire<'_>, kind: ToolKind) -> &mut CallItem {
        let index = self.find(event).unwrap_or_else(|| match event.item_id {
            None => self.last_opened.unwrap_or_else(|| self.next_index()),
            Some(_) => self.next_index(),
        });
        let item = self.items.entry(index).or_default();
        if item.opened.is_none() {
            item.opened = Some(nameless(kind));
            item.item_id = item.item_id.take().or_else(|| text(event.item_id));
            self.last_opened = Some(index);
        }
        item
    }

    fn find(&self, event: &EventWire<'_>) -> Option<u64> {
        let by_id = || self.by_item_id(text(event.item_id).as_deref());
        event.output_index.or_else(by_id)
    }

    fn by_item_id(&self, item_id: Option<&str>) -> Option<u64> {
        let item_id = item_id?;
        let mut items = self.items.iter();
        let found = items.find(|(_, item)| item.item_id.as_deref() == Some(item_id));
        found.map(|(&index, _)| index)
    }

    fn next_index(&self) -> u64 {
        let last = self.items.keys().next_back();
        last.map_or(0, |last| last.saturating_add(1))
    }

    /// Summary deltas, parts joined with a newline as `parse_response` joins them.
    fn read_reasoning(&mut self, event: &EventWire<'_>) {
        let index = event.summary_index.map(|raw| raw.get().to_owned());
        let part = Some((event.output_index, text(event.item_id), index));
        if self.reasoning_part != part {
            self.reasoning_separator_due = !self.reasoning.is_empty();
            self.reasoning_part = part;
        }
        let delta = text(event.delta).unwrap_or_default();
        if !delta.is_empty() {
            if std::mem::take(&mut self.reasoning_separator_due) {
                self.reasoning.push('\n');
            }
            self.reasoning.push_str(&delta);
        }
    }
}

impl StreamAssembler for ResponsesStreamAssembler {
    fn observe(&mut self, event: &SseEvent) -> StreamStep {
        let mut wire: EventWire = match event_json(event) {
            Ok(wire) => wire,
            Err(step) => return step,
        };
        // SDKs go by the data's `type`; the SSE `event:` name is the fallback.
        let kind = wire.kind.take();
        let Some(kind) = kind.as_deref().or(event.event.as_deref()) else {
            return match wire.error.is_some() && wire.choices.is_none() && wire.candidates.is_none()
            {
                true => StreamStep::Content,
                false => StreamStep::Unrecognized,
            };
        };
        // Another format's event (a chat chunk, an Anthropic block) is not this format's to
        // classify: the guard passes it only if no client could read a call from it.
        let foreign = wire.choices.is_some() || wire.candidates.is_some();
        if foreign || !(kind.starts_with("response.") || kind == "error") {
            return StreamStep::Unrecognized;
        }
        let step = self.read_event(kind, wire);
        self.settled = step != StreamStep::ToolFragment;
        step
    }

    fn ended(&self) -> bool {
        self.ended
    }

    fn calls_ready(&self) -> bool {
        let mut pending = self.items.values().filter(|item| item.pending).peekable();
        let done = |item: &CallItem| item.complete.iter().any(Option::is_some);
        // At the end nothing more will come: calls are checked as they are.
        pending.peek().is_some() && (self.ended || (self.settled && pending.all(done)))
    }

    fn take_calls(&mut self) -> Vec<ToolCall> {
        let mut calls = Vec::new();
        for item in self.items.values_mut().filter(|item| item.pending) {
            for version in item.versions() {
                if !item.released.contains(&version) {
                    item.released.push(version.clone());
                    calls.push(version);
                }
            }
            item.superseded.clear();
            item.pending = false;
        }
        calls
    }

    fn reasoning(&self) -> Option<&str> {
        (!self.reasoning.is_empty()).then_some(self.reasoning.as_str())
    }
}

#[cfg(test)]
mod tests {

    use bytes::Bytes;

    use super::*;
    use crate::format::ToolResponse;
    use crate::sse::SseParser;
    use crate::sse::tests::chunkings;
    use crate::stream::tests::golden_streams;
    use StreamStep::*;

    /// What the gateway does: observe every event, take the calls whenever they are ready and
    /// once more at the end. Returns the calls, the steps, and how many takes there were.
    fn assemble(chunks: &[&[u8]]) -> (ToolResponse, Vec<StreamStep>, usize) {
        let mut parser = SseParser::new();
        let mut assembler = ResponsesStreamAssembler::new();
        let (mut steps, mut calls, mut takes) = (Vec::new(), Vec::new(), 0);
        let mut events: Vec<SseEvent> = chunks.iter().flat_map(|c| parser.push(c)).collect();
        events.extend(parser.finish());
        for event in events {
            steps.push(assembler.observe(&event));
            if assembler.calls_ready() {
                calls.extend(assembler.take_calls());
                takes += 1;
                assert!(!assembler.calls_ready(), "taking leaves nothing pending");
            }
        }
        calls.extend(assembler.take_calls());
        let reasoning = assembler.reasoning().map(str::to_owned);
        (ToolResponse { calls, reasoning }, steps, takes)
    }

    #[test]
    fn every_fixture_stream_yields_the_calls_of_its_unstreamed_twin_however_it_is_chunked() {
        let golden = golden_streams(WireFormat::Responses, "responses", ".response.json", 9);
        for (name, stream, expected) in &golden {
            let (whole, steps, takes) = assemble(&[stream]);
            assert_eq!(whole, *expected, "{name}");
            assert!(!steps.contains(&Unrecognized), "{name}");
            assert_eq!(
                steps.contains(&ToolFragment),
                expected.has_calls(),
                "{name}"
            );
            assert_eq!(
                takes,
                usize::from(expected.has_calls()),
                "{name}: checked together"
            );
            // A stream that opens with a call shows nothing before it: a block is a real 403.
            if !name.starts_with("text") && !name.starts_with("reasoning") {
                let shown = steps.iter().find(|step| **step != Preamble);
                assert_eq!(shown, Some(&ToolFragment), "{name}");
            }
            // Whole, byte by byte, then a sample of the cuts (the parser's own tests try all).
            let cuts = chunkings(stream, 97).into_iter().enumerate();
            for (_, chunks) in cuts.filter(|(at, _)| *at < 2 || at % 8 == 0) {
                assert_eq!(
                    assemble(&chunks),
                    (whole.clone(), steps.clone(), takes),
                    "{name}"
                );
            }
        }
    }

    fn event(data: &str) -> SseEvent {
        let data = Some(data.to_owned());
        SseEvent {
            event: None,
            data,
            raw: Bytes::new(),
        }
    }

    /// Feeds events to a fresh assembler as the gateway does; returns a letter per step
    /// (Preamble, Content, ToolFragment, Unrecognized, and `!` where calls were ready and
    /// taken) and the calls taken, as `name arguments`.
    fn script(events: &[&str]) -> (String, Vec<String>) {
        let mut assembler = ResponsesStreamAssembler::new();
        let (mut steps, mut calls) = (String::new(), Vec::new());
        for data in events {
            let step = assembler.observe(&event(data));
            steps.push(match step {
                Preamble => 'P',
                Content => 'C',
                ToolFragment => 'T',
                Done => 'D',
                Unrecognized => 'U',
                Unreadable => 'X',
            });
            if assembler.calls_ready() {
                steps.push('!');
                let taken = assembler.take_calls().into_iter();
                calls.extend(taken.map(|call| format!("{} {}", call.name, call.arguments)));
            }
        }
        (steps, calls)
    }

    fn call(id: &str, name: &str, arguments: &str) -> String {
        let arguments = serde_json::json!(arguments);
        format!(
            r#"{{"type":"function_call","id":"fc_{id}","call_id":"{id}","name":"{name}","arguments":{arguments}}}"#
        )
    }

    fn item(state: &str, index: u64, item: &str) -> String {
        format!(r#"{{"type":"response.output_item.{state}","output_index":{index},"item":{item}}}"#)
    }

    fn delta(index: u64, delta: &str) -> String {
        let delta = serde_json::json!(delta);
        format!(
            r#"{{"type":"response.function_call_arguments.delta","output_index":{index},"delta":{delta}}}"#
        )
    }

    fn completed(output: &[&str]) -> String {
        let output = output.join(",");
        format!(r#"{{"type":"response.completed","response":{{"output":[{output}]}}}}"#)
    }

    #[test]
    fn events_are_classified_for_holding_back() {
        let single = [
            r#"{"type":"response.created","response":{"output":[]}}"#,
            r#"{"type":"response.in_progress"}"#,
            &item("added", 0, r#"{"type":"message","content":[]}"#),
            r#"{"type":"response.content_part.added","output_index":0}"#,
            &item("done", 1, r#"{"type":"reasoning","summary":[]}"#),
            r#"{"type":"response.output_text.delta","output_index":0,"delta":"Hi"}"#,
            &item("done", 1, r#"{"type":"reasoning","summary":[{}]}"#),
            r#"{"type":"response.reasoning_summary_text.delta","delta":"so"}"#,
            r#"{"type":"response.audio.delta","delta":"UklG"}"#,
            r#"{"type":"error","code":"server_error","message":"x"}"#,
            r#"{"error":{"message":"overloaded"}}"#,
            r#"{"type":"response.completed","response":{"output":[]}}"#,
            &item("added", 2, &call("c", "f", "")),
            &completed(&[&call("c", "f", "{}")]),
            "not json",
            "[1,2]",
            r#"{"type":"response.output_text.delta""#,
            r#"{"type":7}"#,
            r#"{"output_index":0}"#,
        ];
        let steps: String = single.iter().map(|data| script(&[data]).0).collect();
        assert_eq!(steps, "PPPPPCCCCCCCTT!UUUUU");
        let comment = SseEvent {
            data: None,
            ..event("")
        };
        assert_eq!(ResponsesStreamAssembler::new().observe(&comment), Preamble);
        let named = SseEvent {
            event: Some("response.completed".to_owned()),
            ..event(&format!(
                r#"{{"response":{{"output":[{}]}}}}"#,
                call("c", "f", "")
            ))
        };
        let mut assembler = ResponsesStreamAssembler::new();
        assert_eq!(
            assembler.observe(&named),
            ToolFragment,
            "the SSE name stands for a type"
        );
    }

    #[test]
    fn parallel_calls_are_ready_together_once_something_else_follows() {
        let (a, b) = (call("a", "f", r#"{"x":1}"#), call("b", "g", "{}"));
        let events = [
            &item("added", 0, &call("a", "f", "")),
            &delta(0, r#"{"x":1}"#),
            &item("done", 0, &a),
            &item("added", 1, &call("b", "g", "")),
            r#"{"type":"response.function_call_arguments.done","output_index":1,"arguments":"{}"}"#,
            r#"{"type":"response.mcp_call_arguments.delta","output_index":1}"#,
            &item("added", 2, r#"{"type":"message","content":[]}"#),
            r#"{"type":"response.output_text.delta","output_index":2,"delta":"Done."}"#,
            &completed(&[&a, &b]),
        ];
        let expected = ["f {\"x\":1}", "g {}"].map(str::to_owned);
        assert_eq!(
            script(&events),
            ("TTTTTTP!CC".to_owned(), expected.to_vec())
        );
        // A call cut short is held until the end, then checked as it is; an event of no known
        // type is left to the guard, which passes it on unless a client could read a call.
        let cut = [
            &item("added", 0, &call("a", "f", "")),
            &delta(0, "{\"x"),
            "{\"type\":\"x\"}",
        ];
        assert_eq!(script(&cut), ("TTU".to_owned(), vec![]));
        let ended = [
            cut[0],
            cut[1],
            r#"{"type":"response.incomplete","response":{}}"#,
        ];
        assert_eq!(
            script(&ended),
            ("TTT!".to_owned(), vec!["f {\"x".to_owned()])
        );
    }

    #[test]
    fn every_version_a_client_could_execute_is_checked() {
        let events = [
            &item("added", 0, &call("a", "read_file", "")),
            &delta(0, r#"{"path":"README.md"}"#),
            r#"{"type":"response.function_call_arguments.done","output_index":0,"arguments":"{\"path\":\"README.md\"}"}"#,
            &item(
                "done",
                0,
                &call("a", "read_file", r#"{"path":"/etc/shadow"}"#),
            ),
            &completed(&[&call("a", "rm", "{}"), &call("z", "delete_repo", "{}")]),
            // After release, a response that changes a checked call is held and checked again.
            &completed(&[
                &call("a", "read_file", "{}"),
                &call("z", "delete_repo", "{}"),
            ]),
        ];
        let expected = [
            r#"read_file {"path":"/etc/shadow"}"#,
            "rm {}",
            r#"read_file {"path":"README.md"}"#,
            "delete_repo {}",
            "read_file {}",
        ];
        assert_eq!(
            script(&events),
            ("TTTTT!T!".to_owned(), expected.map(str::to_owned).to_vec())
        );
    }

    /// What the fixtures do not show: fragments that name their item only by id, and an empty
    /// summary part (which `parse_response` skips too).
    #[test]
    fn fragments_by_item_id_and_reasoning_parts() {
        let summary = |index: u32, delta: &str| {
            format!(
                r#"{{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","summary_index":{index},"delta":"{delta}"}}"#
            )
        };
        let events = [
            &summary(0, "Check "),
            &summary(0, "it."),
            &summary(1, ""),
            &summary(2, "Act."),
            &item(
                "added",
                1,
                r#"{"type":"custom_tool_call","id":"ctc_1","name":"run_sql"}"#,
            ),
            &item("added", 2, r#"{"type":"web_search_call","id":"ws_1"}"#),
            r#"{"type":"response.custom_tool_call_input.delta","item_id":"ctc_1","delta":"select 1"}"#,
            r#"{"type":"response.web_search_call.searching","item_id":"ws_1"}"#,
            r#"{"type":"response.completed","response":{}}"#,
        ];
        let mut assembler = ResponsesStreamAssembler::new();
        let steps = crate::stream::tests::observe_all(&mut assembler, &events);
        assert_eq!(
            steps,
            [[Content; 4].as_slice(), &[ToolFragment; 5]].concat()
        );
        assert_eq!(assembler.reasoning(), Some("Check it.\nAct."));
        let calls = assembler.take_calls();
        let calls: Vec<String> = calls
            .iter()
            .map(|c| format!("{} {}", c.name, c.arguments))
            .collect();
        assert_eq!(calls, ["run_sql select 1", "web_search {}"]);
    }

    #[test]
    fn hostile_events_are_read_without_panicking() {
        let deep = format!("{}{}", "{\"a\":[".repeat(5000), "]}".repeat(5000));
        let events = [
            &deep,
            // A fragment for an item never opened: a call to no tool.
            r#"{"type":"response.function_call_arguments.delta","item_id":"fc_ghost","delta":"{}"}"#,
            &item("done", u64::MAX, &call("m", "max", "{}")),
            &delta(u64::MAX, "more"),
            r#"{"type":"response.function_call_arguments.delta","output_index":18446744073709551616}"#,
            r#"{"type":"response.function_call_arguments.delta","output_index":-1}"#,
            r#"{"type":"response.output_item.done","output_index":3}"#,
            &item(
                "done",
                4,
                r#"{"type":"function_call","name":{"x":1},"arguments":7}"#,
            ),
            r#"{"type":"response.completed","response":{"output":[1,{"type":"function_call"}]}}"#,
            "\u{0}",
        ];
        let expected = [" {}", " ", r#"{"x":1} 7"#, "max {}", " more"].map(str::to_owned);
        assert_eq!(
            script(&events),
            ("UTTTUUCTT!U".to_owned(), expected.to_vec())
        );
    }
}
