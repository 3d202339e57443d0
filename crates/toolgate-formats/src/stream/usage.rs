//! Usage on a stream, for a route that retries blocked answers: what one streamed attempt
//! reported (read event by event, so a blocked attempt can be billed), and the usage events of
//! the attempt that reaches the client with the earlier attempts' added in. Each format's
//! folder says where its events carry usage (`event_usage` in its `rewrite.rs`).

use serde_json::Value;

use crate::format::WireFormat;
use crate::on_block::add_usage;
use crate::sse::SseEvent;

/// Where one event carries usage.
pub(crate) enum UsageSlot<'a> {
    /// The whole usage of the answer so far: chat's usage chunk, Responses' final `response`,
    /// Anthropic's `message_start`.
    Whole(&'a mut Value),
    /// Counts that replace the ones named before: Anthropic's `message_delta` (its counts are
    /// cumulative, and clients overwrite the opening event's with them).
    Update(&'a mut Value),
}

/// An event's data, parsed, when it may carry usage: most events do not, and are not parsed.
fn usage_event(event: &SseEvent) -> Option<Value> {
    let data = event.data.as_deref()?;
    if !may_carry_usage(data) {
        return None;
    }
    serde_json::from_str(data).ok()
}

/// The usage one streamed answer reported, read from its events as they pass.
#[derive(Debug)]
pub struct StreamUsage {
    format: WireFormat,
    reported: Option<Value>,
}

impl StreamUsage {
    /// A reader of the usage a stream in `format` reports.
    pub fn new(format: WireFormat) -> Self {
        StreamUsage {
            format,
            reported: None,
        }
    }

    /// Reads the usage `event` reports, if it reports any.
    pub fn observe(&mut self, event: &SseEvent) {
        let Some(mut value) = usage_event(event) else {
            return;
        };
        match self.format.adapter().event_usage(&mut value) {
            Some(UsageSlot::Whole(usage)) => self.reported = Some(usage.take()),
            Some(UsageSlot::Update(usage)) => match (&mut self.reported, usage) {
                (Some(Value::Object(total)), Value::Object(counts)) => {
                    for (key, count) in std::mem::take(counts) {
                        total.insert(key, count);
                    }
                }
                (_, usage) => self.reported = Some(usage.take()),
            },
            None => {}
        }
    }

    /// The usage reported so far, leaving none.
    pub fn take(&mut self) -> Option<Value> {
        self.reported.take()
    }
}

/// Adds `earlier` into the usage `event` carries; true when it carried some. An update gets
/// only the counts it names, so what a client rebuilds from the opening event and the updates
/// is the sum.
pub(crate) fn add_earlier(format: WireFormat, event: &mut Value, earlier: &Value) -> bool {
    match format.adapter().event_usage(event) {
        Some(UsageSlot::Whole(usage)) if usage.is_object() => {
            add_usage(usage, earlier);
            true
        }
        Some(UsageSlot::Update(Value::Object(counts))) => {
            let mut changed = false;
            for (key, count) in counts.iter_mut() {
                if let Some(more) = earlier.get(key) {
                    add_usage(count, more);
                    changed = true;
                }
            }
            changed
        }
        _ => false,
    }
}

/// Whether an event's data may carry usage: the rewriter parses only those (and an edited
/// call's).
pub(crate) fn may_carry_usage(data: &str) -> bool {
    // A prefix: Gemini's chunks report it as `usageMetadata`.
    data.contains("\"usage")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sse::SseParser;
    use crate::stream::StreamRewriter;

    fn events(stream: &str) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events = parser.push(stream.as_bytes());
        events.extend(parser.finish());
        events
    }

    /// What one attempt reported, as the relay reads it.
    fn reported(format: WireFormat, stream: &str) -> Option<Value> {
        let mut usage = StreamUsage::new(format);
        for event in events(stream) {
            usage.observe(&event);
        }
        usage.take()
    }

    /// The stream as the client gets it with `earlier` added, read back as one attempt.
    fn summed(format: WireFormat, stream: &str, earlier: Value) -> Option<Value> {
        let mut rewriter = StreamRewriter::new(format);
        rewriter.add_earlier_usage(earlier);
        let mut out = String::new();
        for event in events(stream) {
            let bytes = rewriter.rewrite(&event).unwrap_or(event.raw);
            out.push_str(&String::from_utf8_lossy(&bytes));
        }
        reported(format, &out)
    }

    const CHAT: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"usage\"}}],\"usage\":null}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":3,\"total_tokens\":13}}\n\n",
        "data: [DONE]\n\n",
    );

    const RESPONSES: &str = concat!(
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n",
        "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":20,\"output_tokens\":4,\"total_tokens\":24}}}\n\n",
    );

    const ANTHROPIC: &str = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":30,\"output_tokens\":1}}}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":6}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    #[test]
    fn each_format_reports_one_attempts_usage() {
        assert_eq!(
            reported(WireFormat::ChatCompletions, CHAT),
            Some(json!({"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}))
        );
        assert_eq!(
            reported(WireFormat::Responses, RESPONSES),
            Some(json!({"input_tokens": 20, "output_tokens": 4, "total_tokens": 24}))
        );
        assert_eq!(
            reported(WireFormat::AnthropicMessages, ANTHROPIC),
            Some(json!({"input_tokens": 30, "output_tokens": 6})),
            "the delta's cumulative count replaces the opening one"
        );
    }

    #[test]
    fn the_client_reads_the_sum_of_every_attempt() {
        // Each row: a stream, the usage of the attempts before it, and the sum the client reads.
        let attempts = [
            (
                WireFormat::ChatCompletions,
                CHAT,
                json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
                json!({"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}),
            ),
            (
                WireFormat::Responses,
                RESPONSES,
                json!({"input_tokens": 20, "output_tokens": 2, "total_tokens": 22}),
                json!({"input_tokens": 40, "output_tokens": 6, "total_tokens": 46}),
            ),
            (
                WireFormat::AnthropicMessages,
                ANTHROPIC,
                json!({"input_tokens": 30, "output_tokens": 9}),
                json!({"input_tokens": 60, "output_tokens": 15}),
            ),
        ];
        for (format, stream, earlier, sum) in attempts {
            assert_eq!(summed(format, stream, earlier), Some(sum), "{format:?}");
        }
    }

    #[test]
    fn events_without_usage_keep_their_bytes() {
        let mut rewriter = StreamRewriter::new(WireFormat::ChatCompletions);
        rewriter.add_earlier_usage(json!({"prompt_tokens": 1}));
        let events = events(CHAT);
        assert_eq!(
            rewriter.rewrite(&events[0]),
            None,
            "usage: null is no usage"
        );
        assert_eq!(rewriter.rewrite(&events[2]), None, "[DONE]");
    }
}
