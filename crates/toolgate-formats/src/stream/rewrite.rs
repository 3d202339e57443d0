//! Argument edits on a stream: once a check replaced a call's arguments, every event that
//! carries (part of) them is rewritten before it reaches the client. The first fragment of an
//! edited call carries the whole new arguments and its later fragments carry nothing, so a
//! client that concatenates fragments rebuilds exactly the new arguments; events that repeat
//! the whole arguments (`….done`, `response.completed`) carry them whole. After a retried
//! block, the events that report usage carry the earlier attempts' added in (`usage.rs`).
//! Events that touch no edited call and report no usage are not rewritten: the caller forwards
//! their original bytes. Each format's events are rewritten in its folder (`chat/rewrite.rs`,
//! …); this file keeps the edits.

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::Value;

use crate::edits::Edit;
use crate::format::WireFormat;
use crate::response_edits;
use crate::sse::SseEvent;

/// An edit kept for the rest of the stream.
#[derive(Debug)]
pub(crate) struct StreamEdit {
    pub(crate) choice: u32,
    pub(crate) call_id: Option<String>,
    pub(crate) arguments: String,
    /// The new arguments went out in a fragment; later fragments of the call carry nothing.
    pub(crate) written: bool,
}

/// Rewrites a stream's events for the argument edits made so far. Feed it, in stream order,
/// every event from the first one of an edited call on.
#[derive(Debug)]
pub struct StreamRewriter {
    format: WireFormat,
    pub(crate) edits: Vec<StreamEdit>,
    /// Chat: (choice, tool-call index) → call id; Anthropic: (0, block index) → block id.
    pub(crate) slots: HashMap<(u32, u64), String>,
    /// Responses: output item id → the id its call is known by (`call_id`, else `id`).
    pub(crate) items: HashMap<String, String>,
    /// The usage of the attempts blocked before this stream's, summed: added into the usage
    /// this stream reports.
    earlier_usage: Option<Value>,
}

impl StreamRewriter {
    /// A rewriter for a stream in `format`, with nothing to rewrite yet.
    pub fn new(format: WireFormat) -> Self {
        StreamRewriter {
            format,
            edits: Vec::new(),
            slots: HashMap::new(),
            items: HashMap::new(),
            earlier_usage: None,
        }
    }

    /// Adds `usage`, an earlier attempt's, into every usage this stream reports.
    pub fn add_earlier_usage(&mut self, usage: Value) {
        match &mut self.earlier_usage {
            Some(total) => crate::on_block::add_usage(total, &usage),
            None => self.earlier_usage = Some(usage),
        }
    }

    /// Keeps the argument edits among `edits` for the rest of the stream.
    pub fn add_edits(&mut self, edits: &[Edit]) {
        for edit in response_edits::replacements(edits) {
            self.edits.push(StreamEdit {
                choice: edit.choice,
                call_id: edit.call_id.map(str::to_owned),
                arguments: edit.arguments.to_owned(),
                written: false,
            });
        }
    }

    /// Whether any edit was made or earlier usage is carried, i.e. whether events must go
    /// through [`Self::rewrite`].
    pub fn is_active(&self) -> bool {
        !self.edits.is_empty() || self.earlier_usage.is_some()
    }

    /// The event's new bytes when it carries an edited call's arguments or reports usage to add
    /// to, else `None` (forward the original bytes).
    pub fn rewrite(&mut self, event: &SseEvent) -> Option<Bytes> {
        let data = event.data.as_deref()?;
        if data.trim() == "[DONE]" {
            return None;
        }
        let edits = !self.edits.is_empty();
        let usage = self.earlier_usage.is_some() && super::usage::may_carry_usage(data);
        if !edits && !usage {
            return None;
        }
        let mut value: Value = serde_json::from_str(data).ok()?;
        let mut changed = edits && self.format.adapter().rewrite_event(self, &mut value);
        if usage && let Some(earlier) = &self.earlier_usage {
            changed |= super::usage::add_earlier(self.format, &mut value, earlier);
        }
        if !changed {
            return None;
        }
        let text = serde_json::to_string(&value).ok()?;
        Some(with_data(&event.raw, &text))
    }

    pub(crate) fn edit_for(
        &mut self,
        choice: u32,
        call_id: Option<&str>,
    ) -> Option<&mut StreamEdit> {
        self.edits
            .iter_mut()
            .rev()
            .find(|edit| edit.choice == choice && edit.call_id.as_deref() == call_id)
    }

    /// The text a fragment of an edited call carries: everything the first time, then nothing.
    pub(crate) fn fragment(edit: &mut StreamEdit) -> String {
        if edit.written {
            String::new()
        } else {
            edit.written = true;
            edit.arguments.clone()
        }
    }
}

/// The event with its `data` replaced by `data`: its other fields (`event:`, `id:`, comments)
/// are kept in order, the data goes on one line where the first data line was.
fn with_data(raw: &[u8], data: &str) -> Bytes {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::with_capacity(data.len() + 32);
    let mut data_written = false;
    for line in text.split(['\n', '\r']).filter(|line| !line.is_empty()) {
        if line == "data" || line.starts_with("data:") {
            if !data_written {
                out.push_str("data: ");
                out.push_str(data);
                out.push('\n');
                data_written = true;
            }
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !data_written {
        out.push_str("data: ");
        out.push_str(data);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseParser;
    use crate::stream::reassemble;

    /// Rewrites a whole stream with one edit, `call_id`'s new `arguments`, and returns the text a
    /// client would get.
    fn rewritten(format: WireFormat, stream: &str, call_id: &str, arguments: &str) -> String {
        let mut rewriter = StreamRewriter::new(format);
        rewriter.add_edits(&[Edit::ReplaceArguments {
            choice: 0,
            call_id: Some(call_id.to_owned()),
            arguments: arguments.to_owned(),
        }]);
        let mut parser = SseParser::new();
        let mut events = parser.push(stream.as_bytes());
        events.extend(parser.finish());
        let mut out = Vec::new();
        for event in events {
            match rewriter.rewrite(&event) {
                Some(bytes) => out.extend_from_slice(&bytes),
                None => out.extend_from_slice(&event.raw),
            }
        }
        String::from_utf8(out).expect("a rewritten stream is UTF-8")
    }

    #[test]
    fn a_chat_stream_carries_the_new_arguments_in_its_first_fragment() {
        let stream = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"a\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"k\\\":\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"secret\\\"}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let text = rewritten(
            WireFormat::ChatCompletions,
            stream,
            "c1",
            r#"{"k":"[REDACTED]"}"#,
        );
        assert!(!text.contains("secret"), "{text}");
        let calls = reassemble(WireFormat::ChatCompletions, [text.as_bytes()])
            .response
            .calls;
        assert_eq!(calls[0].arguments, r#"{"k":"[REDACTED]"}"#);
        assert!(text.ends_with("data: [DONE]\n\n"));
    }

    #[test]
    fn responses_and_anthropic_streams_are_rewritten_everywhere_the_arguments_appear() {
        let stream = concat!(
            "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"a\",\"arguments\":\"\"}}\n\n",
            "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"item_id\":\"fc_1\",\"output_index\":0,\"delta\":\"{\\\"k\\\":\\\"secret\\\"}\"}\n\n",
            "event: response.function_call_arguments.done\ndata: {\"type\":\"response.function_call_arguments.done\",\"item_id\":\"fc_1\",\"output_index\":0,\"arguments\":\"{\\\"k\\\":\\\"secret\\\"}\"}\n\n",
            "event: response.output_item.done\ndata: {\"type\":\"response.output_item.done\",\"output_index\":0,\"item\":{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"a\",\"arguments\":\"{\\\"k\\\":\\\"secret\\\"}\"}}\n\n",
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"output\":[{\"type\":\"function_call\",\"id\":\"fc_1\",\"call_id\":\"call_1\",\"name\":\"a\",\"arguments\":\"{\\\"k\\\":\\\"secret\\\"}\"}]}}\n\n",
        );
        let text = rewritten(WireFormat::Responses, stream, "call_1", r#"{"k":"x"}"#);
        assert!(!text.contains("secret"), "{text}");
        assert_eq!(text.matches("event: ").count(), 5, "event names are kept");

        let stream = concat!(
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"a\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"k\\\": \\\"sec\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ret\\\"}\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        );
        let text = rewritten(
            WireFormat::AnthropicMessages,
            stream,
            "toolu_1",
            r#"{"k":"x"}"#,
        );
        assert!(!text.contains("sec"), "{text}");
        assert!(text.contains(r#""partial_json":"{\"k\":\"x\"}""#), "{text}");
    }
}
