//! Stream assemblers: rebuild tool calls from streamed fragments, one event at a time, and tell
//! the gateway what each event is so it can pass text through and hold tool calls back.
//! An assembler only reads events; the gateway decides what to forward, hold or replace.

mod chat;

pub use chat::ChatStreamAssembler;

use crate::sse::SseEvent;
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
    /// Not an event of this format (not JSON, wrong shape).
    Unrecognized,
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
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::format::{ToolResponse, WireFormat};
    use crate::sse::SseParser;
    use crate::sse::tests::chunkings;

    /// The golden pairs: NAME.sse (a recorded stream) and NAME.json (the same answer unstreamed).
    fn fixture_pairs() -> Vec<(String, Vec<u8>, Vec<u8>)> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/streams");
        let mut pairs = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("fixtures/streams exists") {
            let path = entry.expect("readable entry").path();
            if path.extension().is_some_and(|ext| ext == "sse") {
                let name = path
                    .file_stem()
                    .expect("a name")
                    .to_string_lossy()
                    .into_owned();
                let stream = std::fs::read(&path).expect("readable stream");
                let response = std::fs::read(path.with_extension("json"))
                    .unwrap_or_else(|_| panic!("{name}.sse has no {name}.json"));
                pairs.push((name, stream, response));
            }
        }
        pairs.sort();
        pairs
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
        let pairs = fixture_pairs();
        assert!(pairs.len() >= 8, "fixtures/streams holds the golden pairs");
        for (name, stream, response) in &pairs {
            let expected = WireFormat::ChatCompletions
                .parse_response(response)
                .unwrap_or_else(|error| panic!("{name}.json: {error}"));
            let (whole, steps) = assemble(&[stream]);
            assert_eq!(whole, expected, "{name}");
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
        let pairs = fixture_pairs();
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
}
