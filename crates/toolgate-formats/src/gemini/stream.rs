//! The Gemini stream assembler. Each chunk of `streamGenerateContent?alt=sse` is a whole
//! answer of its own, and clients read each chunk's `functionCall` parts as whole calls (the
//! SDKs hand out every chunk as a response), so a call is complete in the chunk that carries
//! it. Calls are validated together once every candidate that made one has finished (its
//! `finishReason`), as `parse_response` sees them; there is no end marker, the stream has ended
//! when every candidate has finished.

use super::{Fields, candidate_choice, candidate_parts, part_call};
use crate::sse::SseEvent;
use crate::stream::{StreamAssembler, StreamStep, event_data};
use crate::tool::ToolCall;

/// The top-level fields a chunk of this format may have; a chunk with none of them is some
/// other document.
const CHUNK_FIELDS: [&str; 6] = [
    "candidates",
    "usageMetadata",
    "promptFeedback",
    "modelVersion",
    "responseId",
    "createTime",
];

/// Rebuilds the tool calls of one streamed Gemini answer.
#[derive(Debug, Default)]
pub struct GeminiStreamAssembler {
    /// Every candidate seen, and whether it has finished.
    candidates: Vec<(u32, bool)>,
    pending: Vec<ToolCall>,
    reasoning: String,
    /// The upstream ended the stream with an error chunk.
    failed: bool,
}

impl GeminiStreamAssembler {
    /// An assembler for a stream that has not begun.
    pub fn new() -> Self {
        GeminiStreamAssembler::default()
    }

    fn saw(&mut self, choice: u32, finished: bool) {
        match self
            .candidates
            .iter_mut()
            .find(|(known, _)| *known == choice)
        {
            Some((_, done)) => *done |= finished,
            None => self.candidates.push((choice, finished)),
        }
    }

    fn finished(&self, choice: u32) -> bool {
        self.candidates
            .iter()
            .any(|(known, done)| *known == choice && *done)
    }

    /// Reads one chunk; `None` when it is not one this reader can read whole.
    fn read_chunk(&mut self, data: &str) -> Option<StreamStep> {
        let chunk = Fields::read(data).ok()?;
        if chunk.get("error").is_some() && chunk.get("candidates").is_none() {
            self.failed = true;
            return Some(StreamStep::Content);
        }
        if !CHUNK_FIELDS.iter().any(|field| chunk.get(field).is_some()) {
            return None;
        }
        // Another format's calls field in the same chunk: a client of that format would read
        // its calls, which this reader does not.
        let foreign = (crate::format::WireFormat::ALL.iter())
            .map(|format| format.calls_field())
            .any(|field| field != "candidates" && chunk.has(field));
        if foreign {
            return None;
        }
        let mut calls = Vec::new();
        let mut visible =
            chunk.get("usageMetadata").is_some() || chunk.get("promptFeedback").is_some();
        let mut seen = Vec::new();
        for (position, candidate) in chunk.objects("candidates").ok()?.iter().enumerate() {
            let choice = candidate_choice(candidate, position);
            for part in candidate_parts(candidate).ok()? {
                if let Some(call) = part_call(&part, choice).ok()? {
                    calls.push(call);
                    continue;
                }
                let Some(text) = part.text("text") else {
                    visible |= part.names().next().is_some();
                    continue;
                };
                visible |= !text.is_empty();
                if part.is_true("thought") && !text.is_empty() {
                    if !self.reasoning.is_empty() {
                        self.reasoning.push('\n');
                    }
                    self.reasoning.push_str(&text);
                }
            }
            let finished = candidate.get("finishReason").is_some();
            visible |= finished;
            seen.push((choice, finished));
        }
        for (choice, finished) in seen {
            self.saw(choice, finished);
        }
        let step = if !calls.is_empty() {
            StreamStep::ToolFragment
        } else if visible {
            StreamStep::Content
        } else {
            StreamStep::Preamble
        };
        self.pending.extend(calls);
        Some(step)
    }
}

impl StreamAssembler for GeminiStreamAssembler {
    fn observe(&mut self, event: &SseEvent) -> StreamStep {
        let data = match event_data(event) {
            Ok(data) => data,
            Err(step) => return step,
        };
        if data.is_empty() {
            return StreamStep::Preamble;
        }
        if !data.starts_with('{') {
            return StreamStep::Unrecognized;
        }
        self.read_chunk(data).unwrap_or(StreamStep::Unrecognized)
    }

    fn calls_ready(&self) -> bool {
        !self.pending.is_empty()
            && (self.failed || self.pending.iter().all(|call| self.finished(call.choice)))
    }

    fn take_calls(&mut self) -> Vec<ToolCall> {
        std::mem::take(&mut self.pending)
    }

    fn reasoning(&self) -> Option<&str> {
        (!self.reasoning.is_empty()).then_some(self.reasoning.as_str())
    }

    fn ended(&self) -> bool {
        self.failed
            || (!self.candidates.is_empty() && self.candidates.iter().all(|(_, done)| *done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::WireFormat;
    use crate::sse::tests::chunkings;
    use crate::stream::reassemble;
    use crate::stream::tests::{golden_streams, observe_all};

    #[test]
    fn every_fixture_stream_yields_the_calls_of_its_whole_twin_however_it_is_chunked() {
        let golden = golden_streams(WireFormat::Gemini, "gemini", ".response.json", 8);
        for (name, stream, expected) in &golden {
            for chunks in chunkings(stream, 29) {
                let read = reassemble(WireFormat::Gemini, chunks);
                assert_eq!(read.refused, None, "{name}");
                assert_eq!(read.response, *expected, "{name}");
                assert_eq!(read.raw, *stream, "{name}: the bytes are kept");
            }
        }
    }

    #[test]
    fn calls_are_whole_in_their_chunk_and_ready_when_their_candidate_finishes() {
        let mut assembler = GeminiStreamAssembler::new();
        let steps = observe_all(
            &mut assembler,
            &[
                r#"{"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"index":0}]}"#,
                r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"Let me look."}]},"index":0}]}"#,
                r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}]},"index":0}]}"#,
            ],
        );
        assert_eq!(
            steps,
            [
                StreamStep::Preamble,
                StreamStep::Content,
                StreamStep::ToolFragment
            ]
        );
        assert!(!assembler.calls_ready(), "its candidate has not finished");
        let steps = observe_all(
            &mut assembler,
            &[
                r#"{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"lookup","args":{}}}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3}}"#,
            ],
        );
        assert_eq!(steps, [StreamStep::ToolFragment]);
        assert!(assembler.calls_ready() && assembler.ended());
        let names: Vec<String> = assembler
            .take_calls()
            .into_iter()
            .map(|call| call.name)
            .collect();
        assert_eq!(names, ["get_weather", "lookup"]);
    }

    #[test]
    fn pieces_ambiguous_spellings_and_foreign_chunks_are_not_read_as_this_format() {
        let unrecognized = [
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a","partialArgs":[{"jsonPath":"$.x"}],"willContinue":true}}]}}]}"#,
            r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a"},"function_call":{"name":"b"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"x"}}]}}],"candidates":[]}"#,
            r#"{"type":"content_block_start"}"#,
            "[1]",
        ];
        for data in unrecognized {
            let mut assembler = GeminiStreamAssembler::new();
            assert_eq!(
                observe_all(&mut assembler, &[data]),
                [StreamStep::Unrecognized],
                "{data}"
            );
        }
        let stream = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"a\",\"partialArgs\":[],\"willContinue\":true}}]}}]}\n\n";
        assert!(
            reassemble(WireFormat::Gemini, [stream.as_bytes()])
                .refused
                .is_some()
        );
    }

    #[test]
    fn a_stream_cut_before_its_candidate_finished_is_refused_with_its_calls_open() {
        let stream = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"a\",\"args\":{}}}]},\"index\":0}]}\r\n\r\n";
        let read = reassemble(WireFormat::Gemini, [stream.as_bytes()]);
        assert!(read.refused.is_some());
        let finished = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"a\",\"args\":{\"k\":1}}}]},\"finishReason\":\"STOP\",\"index\":0}]}\r\n\r\n";
        let read = reassemble(WireFormat::Gemini, [finished.as_bytes()]);
        assert_eq!(read.refused, None);
        assert_eq!(read.response.calls[0].arguments, r#"{"k":1}"#);
    }
}
