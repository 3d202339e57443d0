//! The Anthropic Messages stream assembler: classifies each event for the gateway's hold-back
//! logic and rebuilds `tool_use` / `server_tool_use` blocks from their `input_json_delta`
//! fragments the way Anthropic's SDKs do (blocks in the order they start, deltas addressed by
//! `index` into that list), so the calls validated are the calls the client will execute.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use super::PartWire;
use crate::format::{name_text, text_or_raw_json};
use crate::sse::SseEvent;
use crate::stream::{StreamAssembler, StreamStep, event_json};
use crate::tool::{ToolCall, ToolKind};

/// Every event's data; the fields that depend on `type` stay raw until the type says which.
#[derive(Deserialize)]
struct EventWire<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    index: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content_block: Option<&'a RawValue>,
    #[serde(borrow, default)]
    delta: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    /// A chat chunk's field (and Gemini's): a client of that format would read calls from it,
    /// so the event is not this format's to classify.
    #[serde(default)]
    choices: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    candidates: Option<serde::de::IgnoredAny>,
}

/// Reads a part. One that is missing or cannot be read (a duplicate key, a non-string type)
/// makes its event unrecognized, so the gateway's rule for unparsable answers applies to it,
/// as it does when `parse_response` fails on the same block.
fn read_part(raw: Option<&RawValue>) -> Option<PartWire<'_>> {
    serde_json::from_str(raw?.get()).ok()
}

/// One content block of the message, at its position in the client's snapshot.
#[derive(Debug)]
enum Block {
    Call(PendingCall),
    Thinking,
    Other,
}

#[derive(Debug)]
struct PendingCall {
    id: Option<String>,
    name: String,
    kind: ToolKind,
    /// The `input` of the block's start (`{}` when deltas follow, the whole input when not).
    start_input: Option<String>,
    /// The `partial_json` fragments so far; when not empty it replaces `start_input`, as the
    /// SDKs do, so an `input: {}` at the start is not counted twice.
    partial: String,
    stopped: bool,
    /// Not yet taken for validation.
    pending: bool,
}

/// Rebuilds the tool calls of one streamed Anthropic message.
#[derive(Debug, Default)]
pub struct AnthropicStreamAssembler {
    blocks: Vec<Block>,
    /// The stream has moved past the latest call (a non-call block started, or the message
    /// ended), so parallel calls are validated together, as `parse_response` sees them.
    settled: bool,
    /// The first `message_start` was read; a later one is not this reader's to read.
    started: bool,
    done: bool,
    reasoning: String,
    /// The thinking block whose text was appended last: a new block's text starts a new line.
    reasoning_block: Option<usize>,
}

impl AnthropicStreamAssembler {
    /// An assembler for a stream that has not begun.
    pub fn new() -> Self {
        AnthropicStreamAssembler::default()
    }

    /// The kind of call a content block of this `type` is. `mcp_tool_use` is not a call here:
    /// its tools are declared in `mcp_servers`, not `tools[]`. Shared with `parse_response`.
    pub(crate) fn call_kind(block_type: &str) -> Option<ToolKind> {
        match block_type {
            "tool_use" => Some(ToolKind::Function),
            "server_tool_use" => Some(ToolKind::Builtin),
            _ => None,
        }
    }

    /// A call's arguments from the JSON text of its `input` (shared with `parse_response`).
    pub(crate) fn arguments(input: &str) -> String {
        crate::format::compact_json_text(input)
    }

    /// Appends a block started by `content_block_start` or listed by `message_start`; returns
    /// the step it is.
    fn start_block(&mut self, raw: Option<&RawValue>) -> StreamStep {
        let position = self.blocks.len();
        let Some(block) = read_part(raw) else {
            // It still takes its position, as it does in the client's list.
            self.blocks.push(Block::Other);
            self.settled = true;
            return StreamStep::Unrecognized;
        };
        let kind = block.kind.as_deref().unwrap_or_default();
        if let Some(call_kind) = Self::call_kind(kind) {
            self.blocks.push(Block::Call(PendingCall {
                id: block.id.map(text_or_raw_json),
                name: block.name.map(name_text).unwrap_or_default(),
                kind: call_kind,
                start_input: block.input.map(|raw| raw.get().to_owned()),
                partial: String::new(),
                stopped: false,
                pending: true,
            }));
            self.settled = false;
            return StreamStep::ToolFragment;
        }
        self.settled = true;
        let text = match kind {
            "thinking" => block.thinking,
            _ => block.text,
        };
        let text = text.map(text_or_raw_json).unwrap_or_default();
        if kind == "thinking" {
            self.blocks.push(Block::Thinking);
            self.push_reasoning(position, &text);
        } else {
            self.blocks.push(Block::Other);
        }
        match kind {
            // An empty text or thinking block shows the client nothing yet.
            "text" | "thinking" if text.is_empty() => StreamStep::Preamble,
            _ => StreamStep::Content,
        }
    }

    fn push_reasoning(&mut self, position: usize, text: &str) {
        if text.is_empty() {
            return;
        }
        if !self.reasoning.is_empty() && self.reasoning_block != Some(position) {
            self.reasoning.push('\n');
        }
        self.reasoning_block = Some(position);
        self.reasoning.push_str(text);
    }

    /// The block an `index` addresses. Negative indexes count from the end, as in the Python
    /// SDK's list; anything else out of range addresses nothing.
    fn position(&self, index: Option<&RawValue>) -> Option<usize> {
        let index: i128 = serde_json::from_str(index?.get()).ok()?;
        let index = if index < 0 {
            index + self.blocks.len() as i128
        } else {
            index
        };
        usize::try_from(index)
            .ok()
            .filter(|&position| position < self.blocks.len())
    }

    fn read_delta(&mut self, position: Option<usize>, raw: Option<&RawValue>) -> StreamStep {
        let Some(delta) = read_part(raw) else {
            return StreamStep::Unrecognized;
        };
        match (
            position.and_then(|p| self.blocks.get_mut(p)),
            delta.kind.as_deref(),
        ) {
            (Some(Block::Call(call)), Some("input_json_delta")) => {
                if let Some(fragment) = delta.partial_json {
                    call.partial.push_str(&text_or_raw_json(fragment));
                }
                // A fragment after the stop (or after validation) reopens the call: the
                // client appends it, so it is checked again.
                call.stopped = false;
                call.pending = true;
                self.settled = false;
                StreamStep::ToolFragment
            }
            (Some(Block::Call(call)), _) if call.pending => StreamStep::ToolFragment,
            (Some(Block::Thinking), Some("thinking_delta")) => {
                let text = delta.thinking.map(text_or_raw_json).unwrap_or_default();
                if let Some(position) = position {
                    self.push_reasoning(position, &text);
                }
                StreamStep::Content
            }
            // A call fragment for a block that is not a call: held, never passed unchecked.
            (None, Some("input_json_delta")) => StreamStep::ToolFragment,
            _ => StreamStep::Content,
        }
    }

    fn pending(&self) -> impl Iterator<Item = &PendingCall> {
        self.blocks.iter().filter_map(|block| match block {
            Block::Call(call) if call.pending => Some(call),
            _ => None,
        })
    }
}

/// Whether a forgiving client reads this event as one of the events that build the message's
/// blocks (its last `type`, whatever else is wrong with it).
fn is_block_event_to_clients(event: &SseEvent) -> bool {
    let Some(data) = event.data.as_deref() else {
        return false;
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(data.trim()) else {
        return false;
    };
    matches!(
        value.get("type").and_then(serde_json::Value::as_str),
        Some(
            "message_start"
                | "content_block_start"
                | "content_block_delta"
                | "content_block_stop"
                | "message_delta"
                | "message_stop"
        )
    )
}

impl PendingCall {
    /// Whether the input pieces so far do not join into JSON: the SDKs parse such a buffer in
    /// partial mode (`{"a":1,"b` reads as `{"a":1}`), a reading toolgate does not share, so a
    /// call completed so is refused rather than checked as text the client never runs.
    fn input_is_partial(&self) -> bool {
        !self.partial.is_empty() && serde_json::from_str::<IgnoredAny>(&self.partial).is_err()
    }

    fn to_call(&self) -> ToolCall {
        let input = match (self.partial.as_str(), &self.start_input) {
            ("", Some(start)) => start.as_str(),
            ("", None) => "{}",
            (partial, _) => partial,
        };
        ToolCall {
            choice: 0,
            id: self.id.clone(),
            name: self.name.clone(),
            kind: self.kind,
            arguments: AnthropicStreamAssembler::arguments(input),
        }
    }
}

impl StreamAssembler for AnthropicStreamAssembler {
    fn observe(&mut self, event: &SseEvent) -> StreamStep {
        let wire: EventWire = match event_json(event) {
            Ok(wire) => wire,
            // A client's list of blocks is positional: a block event it reads (by the last of
            // repeated keys, say) that this reader cannot would shift every later `index`.
            Err(StreamStep::Unrecognized) if is_block_event_to_clients(event) => {
                return StreamStep::Unreadable;
            }
            Err(step) => return step,
        };
        if wire.choices.is_some() || wire.candidates.is_some() {
            return StreamStep::Unrecognized;
        }
        match wire.kind.as_ref() {
            "message_start" if !self.started => {
                self.started = true;
                // A message or a block list that cannot be read (a repeated key, a list that
                // is not one) is the guard's to judge, as an unreadable block is.
                let Some(message) = read_part(wire.message) else {
                    return StreamStep::Unrecognized;
                };
                let blocks: Vec<&RawValue> = match message.content {
                    Some(raw) => match serde_json::from_str(raw.get()) {
                        Ok(blocks) => blocks,
                        Err(_) => return StreamStep::Unrecognized,
                    },
                    None => Vec::new(),
                };
                let steps: Vec<StreamStep> = blocks
                    .into_iter()
                    .map(|block| self.start_block(Some(block)))
                    .collect();
                // An unreadable block is reported (the guard refuses the event if it lists any
                // call, the readable ones included); a listed call is held; the rest is unseen.
                [StreamStep::Unrecognized, StreamStep::ToolFragment]
                    .into_iter()
                    .find(|step| steps.contains(step))
                    .unwrap_or(StreamStep::Preamble)
            }
            // A later `message_start` is skipped by the Python SDK's accumulator and an error
            // to the TypeScript one, but a client reading the events itself may take the blocks
            // it lists: the guard passes it on only when it lists no call.
            "message_start" => StreamStep::Unrecognized,
            "ping" => StreamStep::Preamble,
            "content_block_start" => self.start_block(wire.content_block),
            "content_block_delta" => {
                let position = self.position(wire.index);
                self.read_delta(position, wire.delta)
            }
            "content_block_stop" => {
                let position = self.position(wire.index);
                match position.and_then(|position| self.blocks.get_mut(position)) {
                    Some(Block::Call(call)) if call.pending => {
                        call.stopped = true;
                        if call.input_is_partial() {
                            return StreamStep::Unreadable;
                        }
                        StreamStep::ToolFragment
                    }
                    _ => StreamStep::Content,
                }
            }
            "message_delta" => {
                self.settled = true;
                if self.pending().any(PendingCall::input_is_partial) {
                    StreamStep::Unreadable
                } else if self.pending().next().is_some() {
                    StreamStep::ToolFragment
                } else {
                    StreamStep::Content
                }
            }
            "message_stop" => {
                self.done = true;
                self.settled = true;
                if self.pending().any(PendingCall::input_is_partial) {
                    return StreamStep::Unreadable;
                }
                StreamStep::Done
            }
            "error" => StreamStep::Content,
            // Event types added later, and other formats' events: the guard passes them on
            // when no client could read a call from them.
            _ => StreamStep::Unrecognized,
        }
    }

    fn ended(&self) -> bool {
        self.done
    }

    fn calls_ready(&self) -> bool {
        let mut pending = self.pending();
        let Some(first) = pending.next() else {
            return false;
        };
        self.done || (self.settled && first.stopped && pending.all(|call| call.stopped))
    }

    fn take_calls(&mut self) -> Vec<ToolCall> {
        let mut calls = Vec::new();
        for block in &mut self.blocks {
            if let Block::Call(call) = block
                && call.pending
            {
                call.pending = false;
                calls.push(call.to_call());
            }
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
    use crate::format::{ToolResponse, WireFormat};
    use crate::sse::SseParser;
    use crate::sse::tests::chunkings;
    use crate::stream::tests::observe_all;
    use crate::stream::tests::{fixture_pairs, golden_streams};
    use crate::testing::call_lines;
    use StreamStep::*;

    const TOOL: &str = r#"{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}"#;
    const THINKING: &str = r#"{"type":"thinking","thinking":"","signature":""}"#;
    const MESSAGE_DELTA: &str = r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#;
    const MESSAGE_STOP: &str = r#"{"type":"message_stop"}"#;

    fn start(index: u64, block: &str) -> String {
        format!(r#"{{"type":"content_block_start","index":{index},"content_block":{block}}}"#)
    }

    fn delta(index: &str, kind: &str, field: &str, text: &str) -> String {
        let text = serde_json::to_string(text).unwrap_or_default();
        let delta = format!(r#"{{"type":"{kind}","{field}":{text}}}"#);
        format!(r#"{{"type":"content_block_delta","index":{index},"delta":{delta}}}"#)
    }

    fn json_delta(index: &str, partial: &str) -> String {
        delta(index, "input_json_delta", "partial_json", partial)
    }

    fn stop(index: u64) -> String {
        format!(r#"{{"type":"content_block_stop","index":{index}}}"#)
    }

    /// What the gateway does: parse events and observe each; calls are taken when ready (as
    /// the gateway validates them) and at the end. Returns each step with its readiness.
    fn assemble(chunks: &[&[u8]]) -> (ToolResponse, Vec<(StreamStep, bool)>) {
        let mut parser = SseParser::new();
        let mut assembler = WireFormat::AnthropicMessages.stream_assembler();
        let (mut calls, mut steps) = (Vec::new(), Vec::new());
        let events = chunks.iter().flat_map(|chunk| parser.push(chunk));
        for event in events
            .collect::<Vec<_>>()
            .into_iter()
            .chain(parser.finish())
        {
            let step = assembler.observe(&event);
            let ready = assembler.calls_ready();
            if ready {
                calls.extend(assembler.take_calls());
            }
            steps.push((step, ready));
        }
        calls.extend(assembler.take_calls());
        assert!(!assembler.calls_ready(), "taking leaves nothing pending");
        let reasoning = assembler.reasoning().map(str::to_owned);
        (ToolResponse { calls, reasoning }, steps)
    }

    #[test]
    fn every_fixture_stream_yields_the_calls_of_its_message_however_it_is_chunked() {
        let golden = golden_streams(
            WireFormat::AnthropicMessages,
            "anthropic",
            ".response.json",
            8,
        );
        for (name, stream, expected) in &golden {
            let (whole, steps) = assemble(&[stream]);
            assert_eq!(whole, *expected, "{name}");
            assert_eq!(
                steps.last(),
                Some(&(Done, false)),
                "{name} ends with message_stop"
            );
            assert!(
                !steps.iter().any(|(step, _)| *step == Unrecognized),
                "{name}"
            );
            let held = steps.iter().any(|(step, _)| *step == ToolFragment);
            assert_eq!(
                held,
                expected.has_calls(),
                "{name}: held exactly when there are calls"
            );
            let validations = steps.iter().filter(|(_, ready)| *ready).count();
            assert_eq!(
                validations,
                usize::from(held),
                "{name}: the calls are checked at once"
            );
            for chunks in chunkings(stream, 41) {
                assert_eq!(assemble(&chunks), (whole.clone(), steps.clone()), "{name}");
            }
        }
    }

    fn fixture_steps(name: &str) -> Vec<(StreamStep, bool)> {
        let pairs = fixture_pairs("anthropic", ".response.json");
        let (_, stream, _) = pairs.iter().find(|(n, ..)| n == name).expect("fixture");
        assemble(&[stream]).1
    }

    #[test]
    fn parallel_calls_are_ready_together_and_a_server_call_before_the_answer() {
        let steps = fixture_steps("parallel_tool_use");
        let ready = steps.iter().position(|(_, ready)| *ready);
        assert_eq!(
            ready,
            Some(steps.len() - 2),
            "at the message_delta, after both calls"
        );
        assert_eq!(
            steps[..3],
            [(Preamble, false), (ToolFragment, false), (Preamble, false)]
        );

        let steps = fixture_steps("server_web_search");
        let ready = steps.iter().position(|(_, ready)| *ready).expect("ready");
        assert_eq!(
            steps[ready - 1],
            (ToolFragment, false),
            "the stop of the call"
        );
        assert_eq!(
            steps[ready],
            (Content, true),
            "the web_search_tool_result block"
        );
        assert!(
            steps[ready + 1..]
                .iter()
                .all(|(step, _)| *step != ToolFragment)
        );
    }

    #[test]
    fn events_are_classified_for_holding_back() {
        let mut assembler = AnthropicStreamAssembler::new();
        let comment = SseEvent {
            event: None,
            data: None,
            raw: bytes::Bytes::new(),
        };
        assert_eq!(assembler.observe(&comment), Preamble);
        let cases = [
            (
                r#"{"type":"message_start","message":{"content":[]}}"#.to_owned(),
                Preamble,
            ),
            (r#"{"type": "ping"}"#.to_owned(), Preamble),
            (start(0, r#"{"type":"text","text":""}"#), Preamble),
            (delta("0", "text_delta", "text", "Hi"), Content),
            (stop(0), Content),
            (start(1, r#"{"type":"thinking","thinking":"hm"}"#), Content),
            (delta("1", "signature_delta", "signature", "sig"), Content),
            (
                start(
                    2,
                    r#"{"type":"bash_code_execution_tool_result","content":{}}"#,
                ),
                Content,
            ),
            (start(3, TOOL), ToolFragment),
            (json_delta("3", r#"{"city":"#), ToolFragment),
            (json_delta("3", r#""Paris"}"#), ToolFragment),
            (stop(3), ToolFragment),
            (MESSAGE_DELTA.to_owned(), ToolFragment),
            (
                r#"{"type":"error","error":{"type":"overloaded_error"}}"#.to_owned(),
                Content,
            ),
            // Unknown to this reader: the guard passes it on unless a client could read a call.
            (r#"{"type":"a_future_event"}"#.to_owned(), Unrecognized),
            (
                r#"{"type":"response.output_item.added","item":{}}"#.to_owned(),
                Unrecognized,
            ),
            (r#"{"type":"ping","choices":[]}"#.to_owned(), Unrecognized),
            ("not json".to_owned(), Unrecognized),
            ("[1,2]".to_owned(), Unrecognized),
            (r#"{"type":5}"#.to_owned(), Unrecognized),
            (MESSAGE_STOP.to_owned(), Done),
        ];
        for (data, expected) in cases {
            assert_eq!(observe_all(&mut assembler, &[&data]), [expected], "{data}");
        }
        assert_eq!(assembler.reasoning(), Some("hm"));
    }

    /// The SDKs parse a block's input pieces in partial mode (`{"city":"Pa` reads as `{}`,
    /// `{"a":1,"b` as `{"a":1}`): a call whose pieces do not join into JSON is refused when it
    /// completes, by its stop, the message's delta or its stop, never checked as text.
    #[test]
    fn input_pieces_that_do_not_join_into_json_are_unreadable() {
        for end in [stop(0), MESSAGE_DELTA.to_owned(), MESSAGE_STOP.to_owned()] {
            let mut assembler = AnthropicStreamAssembler::new();
            let steps = observe_all(
                &mut assembler,
                &[&start(0, TOOL), &json_delta("0", r#"{"city":"Pa"#), &end],
            );
            assert_eq!(steps.last(), Some(&Unreadable), "{end}");
        }
        let mut whole = AnthropicStreamAssembler::new();
        let steps = observe_all(
            &mut whole,
            &[
                &start(0, TOOL),
                &json_delta("0", r#"{"city":"Paris"}"#),
                &stop(0),
            ],
        );
        assert_eq!(steps.last(), Some(&ToolFragment));
    }

    #[test]
    fn the_input_comes_from_the_deltas_or_else_from_the_start() {
        let server =
            r#"{"type":"server_tool_use","id":"srv_1","name":"web_search","input":{"query": "q"}}"#;
        let mut assembler = AnthropicStreamAssembler::new();
        let events = [
            start(0, TOOL),
            json_delta("0", ""),
            json_delta("0", "{\"city\": \"Pa"),
            json_delta("0", "ris\",\n \"days\": 1.50e1}"),
            start(1, server),
            start(2, r#"{"type":"tool_use","id":7,"name":"no_input"}"#),
            stop(2),
        ];
        observe_all(&mut assembler, &events.each_ref().map(String::as_str));
        assert!(!assembler.calls_ready(), "blocks 0 and 1 never stopped");
        observe_all(&mut assembler, &[&stop(0), &stop(1), MESSAGE_DELTA]);
        assert!(assembler.calls_ready());
        let expected = [
            r#"toolu_1 get_weather Function {"city":"Paris","days":1.50e1}"#,
            r#"srv_1 web_search Builtin {"query":"q"}"#,
            "7 no_input Function {}",
        ];
        assert_eq!(call_lines(&assembler.take_calls()), expected);
    }

    #[test]
    fn a_fragment_after_validation_reopens_its_call() {
        let mut assembler = AnthropicStreamAssembler::new();
        let events = [
            &start(0, TOOL),
            &json_delta("0", "{}"),
            &stop(0),
            MESSAGE_DELTA,
        ];
        observe_all(&mut assembler, &events);
        assert_eq!(assembler.take_calls()[0].arguments, "{}");
        let late = json_delta("-1", r#"{"x":1}"#);
        assert_eq!(observe_all(&mut assembler, &[&late]), [ToolFragment]);
        assert!(!assembler.calls_ready(), "open until it stops again");
        observe_all(&mut assembler, &[MESSAGE_STOP]);
        assert!(
            assembler.calls_ready(),
            "message_stop completes whatever is open"
        );
        assert_eq!(
            assembler.take_calls()[0].arguments,
            r#"{}{"x":1}"#,
            "not JSON: flagged"
        );
    }

    #[test]
    fn calls_listed_in_message_start_count_and_thoughts_are_joined_by_block() {
        let opening = format!(r#"{{"type":"message_start","message":{{"content":[{TOOL}]}}}}"#);
        let thought = |index: &str, text: &str| delta(index, "thinking_delta", "thinking", text);
        let events = [
            opening,
            start(1, THINKING),
            thought("1", "a"),
            thought("1", "b"),
            start(2, THINKING),
            thought("2", "c"),
        ];
        let mut assembler = AnthropicStreamAssembler::new();
        let steps = observe_all(&mut assembler, &events.each_ref().map(String::as_str));
        assert_eq!(
            steps,
            [ToolFragment, Preamble, Content, Content, Preamble, Content]
        );
        assert_eq!(assembler.reasoning(), Some("ab\nc"));
        assert_eq!(assembler.take_calls()[0].name, "get_weather");
    }

    #[test]
    fn hostile_streams_are_read_without_panicking() {
        let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        let odd_call = r#"{"type":"tool_use","name":{"a":[1]},"input":"text"}"#;
        let events = [
            json_delta("0", "{"),
            stop(0),
            MESSAGE_STOP.to_owned(),
            start(0, TOOL),
            json_delta("18446744073709551615", "{"),
            json_delta("-99", "{"),
            json_delta("1e400", "{"),
            json_delta("\"0\"", "{"),
            json_delta("0", "{\"city\": \"Par"),
            json_delta("0", &deep),
            start(u64::MAX, odd_call),
            start(1, "[1]"),
            r#"{"type":"content_block_start","index":2}"#.to_owned(),
            r#"{"type":"content_block_delta","index":0,"delta":"x"}"#.to_owned(),
            delta("0", "input_json_delta", "partial_json", "").replace(r#""""#, "5"),
            stop(u64::MAX),
            "\u{0}".to_owned(),
            "{".to_owned(),
        ];
        let mut assembler = AnthropicStreamAssembler::new();
        let steps = observe_all(&mut assembler, &events.each_ref().map(String::as_str));
        assert_eq!(steps[..3], [ToolFragment, Content, Done]);
        assert_eq!(
            steps[11..15],
            [Unrecognized, Unrecognized, Unrecognized, ToolFragment]
        );
        assert!(!steps.contains(&Preamble));
        let calls = assembler.take_calls();
        assert_eq!(calls.len(), 2);
        assert!(
            calls[0].arguments.starts_with("{\"city\": \"Par[[[["),
            "kept raw"
        );
        assert!(calls[0].arguments.ends_with("]]5"));
        assert_eq!(call_lines(&calls[1..]), [r#" {"a":[1]} Function "text""#]);
    }
}
