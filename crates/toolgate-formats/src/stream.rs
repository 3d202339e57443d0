//! Stream assemblers: rebuild tool calls from streamed fragments, one event at a time, and tell
//! the gateway what each event is so it can pass text through and hold tool calls back.
//! An assembler only reads events; the gateway decides what to forward, hold or replace.

pub(crate) mod rewrite;
pub(crate) mod usage;

pub use rewrite::StreamRewriter;
pub use usage::StreamUsage;

use crate::format::{ParseError, ToolResponse, WireFormat};
use crate::sse::{SseEvent, SseParser};
use crate::tool::ToolCall;

/// What an event is, as far as holding back goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStep {
    /// Shows the client nothing yet (a role-only or empty delta, a comment, a keep-alive):
    /// may be held until the first visible event, so a stream that opens with a bad call can
    /// still be answered with a real 403.
    Preamble,
    /// Visible to the client (text, refusal, usage, finish without calls): pass it on.
    Content,
    /// Part of a tool call: hold it until the calls it belongs to are validated.
    ToolFragment,
    /// The end-of-stream marker (`data: [DONE]`).
    Done,
    /// Not an event of this format (not JSON, wrong shape, another format's event). The guard
    /// passes it on only when no client could read a call from it ([`refusal`]).
    Unrecognized,
    /// Completes a call that clients read otherwise than toolgate can: Anthropic input pieces
    /// that do not join into JSON, which the SDKs parse in partial mode into a smaller object.
    /// Always refused ([`refusal`]).
    Unreadable,
}

/// Why the guard must refuse a stream at this event, if it must: an event that is not UTF-8
/// event-stream text (clients decode such bytes each their own way, so the call checked might
/// not be the call run: a block of type `\xFFtool_use` is no call to the assembler but one to a
/// client whose decoder drops the byte), or an event the assembler did not recognize from which
/// a forgiving client could still read a call.
pub fn refusal(step: StreamStep, event: &SseEvent) -> Option<ParseError> {
    // No third kind of answer: a stream is UTF-8 event-stream text, or it is refused, whatever
    // its events would otherwise say.
    if let Some(foreign) = event.foreign_line() {
        return Some(ParseError::unreadable(format!(
            "the answer is not a UTF-8 event stream: an event holds {foreign}"
        )));
    }
    if step == StreamStep::Unreadable {
        return Some(ParseError::unreadable(
            "a tool call's streamed input does not join into JSON: clients read such input partially, each their own way",
        ));
    }
    if step != StreamStep::Unrecognized {
        return None;
    }
    let data = event.data.as_deref().map_or(&event.raw[..], str::as_bytes);
    crate::lenient::may_carry_calls(data).then(|| {
        ParseError::unreadable(
            "a stream event of no known shape from which a client could read a tool call",
        )
    })
}

/// An event's data, trimmed; an event without data is preamble (a comment, a retry hint).
pub(crate) fn event_data(event: &SseEvent) -> Result<&str, StreamStep> {
    event
        .data
        .as_deref()
        .map(str::trim)
        .ok_or(StreamStep::Preamble)
}

/// Data read as one JSON object of `T`'s shape, or not recognized. serde would also read a
/// struct from a JSON array; an event is an object.
pub(crate) fn event_object<'a, T: serde::Deserialize<'a>>(data: &'a str) -> Result<T, StreamStep> {
    if !data.starts_with('{') {
        return Err(StreamStep::Unrecognized);
    }
    serde_json::from_str(data).map_err(|_| StreamStep::Unrecognized)
}

/// An event's data read as one JSON object of `T`'s shape: [`event_data`], then
/// [`event_object`].
pub(crate) fn event_json<'a, T: serde::Deserialize<'a>>(
    event: &'a SseEvent,
) -> Result<T, StreamStep> {
    event_object(event_data(event)?)
}

/// Rebuilds tool calls from one streamed response.
pub trait StreamAssembler: Send {
    /// Reads one event and classifies it.
    fn observe(&mut self, event: &SseEvent) -> StreamStep;

    /// True when calls are pending and all of them are complete (each choice that holds call
    /// fragments has finished, or the end marker was seen).
    fn calls_ready(&self) -> bool;

    /// Takes the pending calls (complete or not) for validation, leaving none pending.
    fn take_calls(&mut self) -> Vec<ToolCall>;

    /// The reasoning summary streamed so far, if any.
    fn reasoning(&self) -> Option<&str>;

    /// Whether the stream's terminal event was seen (`[DONE]`, `message_stop`, the response's
    /// end or an error event). A stream that stops before it was cut, not finished.
    fn ended(&self) -> bool;
}

/// A whole recorded stream, reassembled the way the stream guard reads it: the calls it carries
/// and the exact bytes of its events (which must equal the input).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reassembled {
    /// The stream's bytes as they arrived.
    pub raw: Vec<u8>,
    /// The calls the stream built.
    pub response: ToolResponse,
    /// Why the guard refuses the stream, if it does: the first [`refusal`].
    pub refused: Option<ParseError>,
}

/// Reassembles a stream delivered in `chunks`: for offline verdicts (`toolgate explain`), fuzzing
/// and property tests.
pub fn reassemble<'a>(
    format: WireFormat,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Reassembled {
    let mut parser = SseParser::new();
    let mut assembler = format.stream_assembler();
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(parser.push(chunk));
    }
    events.extend(parser.finish());
    let mut raw = Vec::new();
    let mut calls = Vec::new();
    let mut refused = None;
    for event in events {
        raw.extend_from_slice(&event.raw);
        let step = assembler.observe(&event);
        if refused.is_none() {
            refused = refusal(step, &event);
        }
        if assembler.calls_ready() {
            calls.extend(assembler.take_calls());
        }
    }
    let open = assembler.take_calls();
    // A stream cut before its terminal event with calls still open: the relay never releases
    // them and ends the client's stream with an error (closed on doubt), so they are refused
    // here as the relay refuses them, not checked as the text they were cut at.
    if !assembler.ended() && !open.is_empty() && refused.is_none() {
        refused = Some(ParseError::unreadable(
            "the stream ended before its terminal event with tool calls still open",
        ));
    }
    calls.extend(open);
    let reasoning = assembler.reasoning().map(str::to_owned);
    Reassembled {
        raw,
        response: ToolResponse { calls, reasoning },
        refused,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::PathBuf;

    use bytes::Bytes;

    use super::*;
    use crate::chat::ChatStreamAssembler;
    use crate::format::{ToolResponse, WireFormat};
    use crate::sse::SseParser;
    use crate::sse::tests::chunkings;

    fn event(data: Option<&str>) -> SseEvent {
        let data = data.map(str::to_owned);
        SseEvent {
            event: None,
            data,
            raw: Bytes::new(),
        }
    }

    pub(crate) fn observe_all(
        assembler: &mut dyn StreamAssembler,
        data: &[&str],
    ) -> Vec<StreamStep> {
        data.iter()
            .map(|data| assembler.observe(&event(Some(data))))
            .collect()
    }

    /// A `chat.completion.chunk` with one choice.
    fn chunk(choice: u32, delta: &str, finish_reason: &str) -> String {
        format!(
            r#"{{"object":"chat.completion.chunk","choices":[{{"index":{choice},"delta":{delta},"finish_reason":{finish_reason}}}]}}"#
        )
    }

    /// The golden pairs of `fixtures/DIR`: each recorded stream NAME.sse with NAME + `unstreamed`
    /// (the same answer unstreamed), sorted by name.
    pub(crate) fn fixture_pairs(dir: &str, unstreamed: &str) -> Vec<(String, Vec<u8>, Vec<u8>)> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures")
            .join(dir);
        let mut pairs = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("the fixtures folder exists") {
            let path = entry.expect("readable entry").path();
            if path.extension().is_some_and(|ext| ext == "sse") {
                let name = path
                    .file_stem()
                    .expect("a name")
                    .to_string_lossy()
                    .into_owned();
                let stream = std::fs::read(&path).expect("readable stream");
                let response = std::fs::read(dir.join(format!("{name}{unstreamed}")))
                    .unwrap_or_else(|_| panic!("{name}.sse has no {name}{unstreamed}"));
                pairs.push((name, stream, response));
            }
        }
        pairs.sort();
        pairs
    }

    /// The golden pairs of `fixtures/DIR` for `format`: each recorded stream with the answer its
    /// unstreamed twin parses to, once the folder is seen to hold at least `at_least` of them.
    pub(crate) fn golden_streams(
        format: WireFormat,
        dir: &str,
        unstreamed: &str,
        at_least: usize,
    ) -> Vec<(String, Vec<u8>, ToolResponse)> {
        let pairs = fixture_pairs(dir, unstreamed);
        assert!(
            pairs.len() >= at_least,
            "fixtures/{dir} holds the golden pairs"
        );
        (pairs.into_iter())
            .map(|(name, stream, response)| {
                let expected = format
                    .parse_response(&response)
                    .unwrap_or_else(|error| panic!("{name}{unstreamed}: {error}"));
                (name, stream, expected)
            })
            .collect()
    }

    /// What the gateway does with a stream: parse events, observe each, take the calls at the end.
    fn assemble(chunks: &[&[u8]]) -> (ToolResponse, Vec<StreamStep>) {
        let mut parser = SseParser::new();
        let mut assembler = WireFormat::ChatCompletions.stream_assembler();
        let mut steps = Vec::new();
        for chunk in chunks {
            for event in parser.push(chunk) {
                steps.push(assembler.observe(&event));
            }
        }
        steps.extend(parser.finish().map(|event| assembler.observe(&event)));
        assert!(!assembler.calls_ready() || steps.contains(&StreamStep::ToolFragment));
        let reasoning = assembler.reasoning().map(str::to_owned);
        let calls = assembler.take_calls();
        assert!(!assembler.calls_ready(), "taking leaves nothing pending");
        (ToolResponse { calls, reasoning }, steps)
    }

    #[test]
    fn every_fixture_stream_yields_the_calls_of_its_unstreamed_twin_however_it_is_chunked() {
        let golden = golden_streams(WireFormat::ChatCompletions, "streams", ".json", 8);
        for (name, stream, expected) in &golden {
            let (whole, steps) = assemble(&[stream]);
            assert_eq!(whole, *expected, "{name}");
            assert_eq!(
                steps.last(),
                Some(&StreamStep::Done),
                "{name} ends with [DONE]"
            );
            assert!(!steps.contains(&StreamStep::Unrecognized), "{name}");
            assert_eq!(
                steps.contains(&StreamStep::ToolFragment),
                expected.has_calls(),
                "{name}: fragments are held exactly when there are calls"
            );
            for chunks in chunkings(stream, 23) {
                assert_eq!(assemble(&chunks), (whole.clone(), steps.clone()), "{name}");
            }
        }
    }

    #[test]
    fn calls_become_ready_at_the_finish_of_their_choice() {
        let pairs = fixture_pairs("streams", ".json");
        let (_, stream, _) = pairs
            .iter()
            .find(|(name, ..)| name == "text_then_tool_call")
            .expect("fixture");
        let mut parser = SseParser::new();
        let mut assembler = ChatStreamAssembler::new();
        let mut ready_at = Vec::new();
        for event in parser.push(stream) {
            let step = assembler.observe(&event);
            ready_at.push((step, assembler.calls_ready()));
        }
        let first_ready = ready_at
            .iter()
            .position(|(_, ready)| *ready)
            .expect("ready");
        assert_eq!(
            ready_at[first_ready].0,
            StreamStep::ToolFragment,
            "the finish chunk"
        );
        assert!(ready_at[..first_ready].iter().all(|(_, ready)| !ready));
        assert_eq!(
            ready_at[0],
            (StreamStep::Preamble, false),
            "role-only opening"
        );
        assert_eq!(ready_at[1], (StreamStep::Content, false), "text passes");
    }

    #[test]
    fn events_are_classified_for_holding_back() {
        use StreamStep::*;
        let call = r#"{"content":"x","tool_calls":[{"index":0,"id":"c","function":{"name":"f"}}]}"#;
        let cases = [
            (
                chunk(0, r#"{"role":"assistant","content":""}"#, "null"),
                Preamble,
            ),
            (
                r#"{"choices":[],"prompt_filter_results":[]}"#.to_owned(),
                Preamble,
            ),
            (
                chunk(0, r#"{"content":"Hi","tool_calls":[]}"#, "null"),
                Content,
            ),
            (chunk(0, r#"{"refusal":"No."}"#, "null"), Content),
            (chunk(0, r#"{"reasoning":"hmm"}"#, "null"), Content),
            (
                r#"{"choices":[],"usage":{"total_tokens":3}}"#.to_owned(),
                Content,
            ),
            (
                r#"{"error":{"message":"overloaded","type":"server_error"}}"#.to_owned(),
                Content,
            ),
            (chunk(1, "{}", r#""stop""#), Content),
            (chunk(0, call, "null"), ToolFragment),
            (chunk(0, "{}", r#""tool_calls""#), ToolFragment),
            (" [DONE] ".to_owned(), Done),
            ("not json".to_owned(), Unrecognized),
            ("[1,2]".to_owned(), Unrecognized),
            (String::new(), Unrecognized),
            (r#"{"choices":"nope"}"#.to_owned(), Unrecognized),
            (
                chunk(0, r#"{"tool_calls":[{"index":-1}]}"#, "null"),
                Unrecognized,
            ),
        ];
        let mut assembler = ChatStreamAssembler::new();
        assert_eq!(assembler.observe(&event(None)), Preamble, "a comment");
        for (data, expected) in cases {
            assert_eq!(assembler.observe(&event(Some(&data))), expected, "{data}");
        }
    }

    #[test]
    fn readiness_waits_for_every_choice_holding_calls() {
        let call = r#"{"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}"#;
        let mut assembler = ChatStreamAssembler::new();
        observe_all(
            &mut assembler,
            &[&chunk(0, call, "null"), &chunk(1, call, "null")],
        );
        observe_all(&mut assembler, &[&chunk(0, "{}", r#""tool_calls""#)]);
        assert!(
            !assembler.calls_ready(),
            "choice 1 is still streaming its call"
        );
        observe_all(&mut assembler, &[&chunk(1, "{}", r#""tool_calls""#)]);
        assert!(assembler.calls_ready());
        assert_eq!(assembler.take_calls().len(), 2);
        assert!(!assembler.calls_ready(), "nothing pending after take");

        let mut cut_short = ChatStreamAssembler::new();
        observe_all(&mut cut_short, &[&chunk(0, call, "null")]);
        assert!(!cut_short.calls_ready());
        observe_all(
            &mut cut_short,
            &[&chunk(0, "{}", r#""stop""#), &chunk(0, call, "null")],
        );
        assert!(
            !cut_short.calls_ready(),
            "a fragment after the finish reopens the choice"
        );
        observe_all(&mut cut_short, &["[DONE]"]);
        assert!(
            cut_short.calls_ready(),
            "[DONE] completes calls whose choice never finished"
        );
    }

    #[test]
    fn reasoning_comes_from_choice_zero_in_either_field() {
        let mut assembler = ChatStreamAssembler::new();
        assert_eq!(assembler.reasoning(), None);
        observe_all(
            &mut assembler,
            &[
                &chunk(
                    0,
                    r#"{"reasoning_content":"Check ","reasoning":"Check "}"#,
                    "null",
                ),
                &chunk(1, r#"{"reasoning_content":"other choice"}"#, "null"),
                &chunk(
                    0,
                    r#"{"reasoning_content":"","reasoning":"the \"order\"."}"#,
                    "null",
                ),
            ],
        );
        assert_eq!(assembler.reasoning(), Some(r#"Check the "order"."#));
    }

    #[test]
    fn hostile_data_is_classified_without_panicking() {
        // serde_json skips ignored values without recursion, so depth there is harmless.
        let deep = format!("{}{}", "{\"a\":[".repeat(5000), "]}".repeat(5000));
        let deep_arguments = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        let deep_call = chunk(
            0,
            &format!(r#"{{"tool_calls":[{{"function":{{"arguments":{deep_arguments}}}}}]}}"#),
            "null",
        );
        let huge_index = chunk(
            u32::MAX,
            r#"{"tool_calls":[{"index":4294967295,"function":{"name":"f"}}]}"#,
            "null",
        );
        let invalid_utf8 = b"{\"choices\":[{\"delta\":{\"content\":\"\xFF\xFE\"}}]}";
        let replaced = String::from_utf8_lossy(invalid_utf8);
        let mut assembler = ChatStreamAssembler::new();
        let steps = observe_all(
            &mut assembler,
            &[&deep, &huge_index, &replaced, "{", "\u{0}", &deep_call],
        );
        use StreamStep::*;
        assert_eq!(
            steps,
            [
                Content,
                ToolFragment,
                Content,
                Unrecognized,
                Unrecognized,
                // Arguments that are an array, not text: no client joins them alike.
                Unreadable
            ]
        );
        let calls = assembler.take_calls();
        let choices: Vec<u32> = calls.iter().map(|call| call.choice).collect();
        assert_eq!(choices, [0, u32::MAX]);
        assert_eq!(
            calls[0].arguments, deep_arguments,
            "a lenient raw value is kept as text"
        );
    }

    /// Chat clients read `choices` and Gemini clients `candidates` from any event, whatever
    /// else it holds (their SDKs do not look at a `type`). So every format's stream reader
    /// must notice either field in its own events: a call carried there is checked or the
    /// stream refused, never passed as the reader's own content. Built from every format's own
    /// stream (its `message` answer), so a format added later is held to it at once.
    #[test]
    fn every_formats_stream_reader_notices_calls_that_other_clients_read_from_its_events() {
        let carriers = [
            (
                "choices",
                serde_json::json!([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "x",
                    "type": "function", "function": {"name": "smuggled", "arguments": "{}"}}]}}]),
            ),
            (
                "candidates",
                serde_json::json!([{"content": {"parts": [{"functionCall":
                    {"name": "smuggled", "args": {}}}]}, "index": 0}]),
            ),
        ];
        let toolgate = serde_json::json!({});
        let notice = crate::on_block::BlockNotice {
            request_id: "r",
            model: "m",
            text: "hello",
            toolgate: &toolgate,
            usage: None,
            created: 1,
        };
        for reader in WireFormat::ALL {
            let own = reader.block_message_stream(&notice);
            let mut parser = SseParser::new();
            let mut events = parser.push(&own);
            events.extend(parser.finish());
            for at in 0..events.len() {
                for (field, carrier) in &carriers {
                    let mut stream = Vec::new();
                    let mut injected = false;
                    for (position, event) in events.iter().enumerate() {
                        let data = event.data.as_deref().unwrap_or_default();
                        let value = serde_json::from_str::<serde_json::Value>(data);
                        match value {
                            Ok(serde_json::Value::Object(mut object)) if position == at => {
                                object.insert((*field).to_owned(), carrier.clone());
                                injected = true;
                                let data = serde_json::Value::Object(object);
                                stream.extend_from_slice(format!("data: {data}\n\n").as_bytes());
                            }
                            _ => stream.extend_from_slice(&event.raw),
                        }
                    }
                    if !injected {
                        continue;
                    }
                    let read = reassemble(reader, [&stream[..]]);
                    let checked = read
                        .response
                        .calls
                        .iter()
                        .any(|call| call.name == "smuggled");
                    assert!(
                        checked || read.refused.is_some(),
                        "{reader:?} passed `{field}` in event {at}:\n{}",
                        String::from_utf8_lossy(&stream)
                    );
                }
            }
        }
    }
}
