//! An exchange's capture (`[audit] capture`): the bodies it collects while it runs, and the
//! record it leaves at its end when the setting names it, its answer's call arguments passed
//! through the route's redactions first.

use bytes::Bytes;
use toolgate_formats::stream::StreamRewriter;
use toolgate_plugin::{Edit, ToolCall, WireFormat};

use super::Exchange;
use crate::capture::{CaptureMode, CaptureRecord, CaptureStore, Captured};

impl Exchange {
    /// Collects this exchange's bodies for a capture (only when captures are on).
    pub fn start_capture(&mut self, limit: usize) {
        self.captured = Some(Box::new(Captured {
            limit,
            ..Captured::default()
        }));
    }

    /// The client's request body, shared, not copied.
    pub fn capture_request(&mut self, body: &Bytes) {
        if let Some(captured) = &mut self.captured {
            captured.request = body.clone();
        }
    }

    /// A whole answer as read (each attempt's replaces the one before), shared, not copied.
    pub fn capture_answer(&mut self, body: &Bytes) {
        if let Some(captured) = &mut self.captured {
            captured.whole = Some(body.clone());
        }
    }

    /// One event of a streamed answer, up to the capture's limit in all.
    pub fn capture_event(&mut self, raw: &[u8]) {
        if let Some(captured) = &mut self.captured {
            captured.add_answer_bytes(raw);
        }
    }

    /// A retried stream starts its capture again.
    pub fn capture_restart(&mut self) {
        if let Some(captured) = &mut self.captured {
            captured.whole = None;
            captured.answer.clear();
            captured.answer_cut = false;
        }
    }

    /// Leaves the record in `store` when its setting names this exchange.
    pub(super) fn keep_capture(
        &mut self,
        store: &CaptureStore,
        status: http::StatusCode,
        verdict: &str,
        violations: serde_json::Value,
    ) {
        let Some(captured) = self.captured.take() else {
            return;
        };
        let wanted = match store.mode() {
            CaptureMode::Off => false,
            CaptureMode::Blocked => self.blocked,
            CaptureMode::All => true,
        };
        if !wanted {
            return;
        }
        let response = self.redacted_answer(&captured);
        store.keep(CaptureRecord {
            request_id: self.meta.request_id.clone(),
            timestamp: crate::telemetry::now_rfc3339(),
            route: self.route.path.to_string(),
            method: self.meta.method.to_string(),
            path: (self.meta.path_and_query.split('?').next())
                .unwrap_or_default()
                .to_owned(),
            status: status.as_u16(),
            verdict: verdict.to_owned(),
            streamed: self.streamed,
            request: String::from_utf8_lossy(&captured.request).into_owned(),
            response,
            violations,
        });
    }

    /// The captured answer with every call's arguments as the route's plugins redact them; a
    /// note in its place when a redaction cannot be written into it (nothing unredacted is
    /// kept).
    fn redacted_answer(&self, captured: &Captured) -> String {
        let answer: &[u8] = captured.whole.as_deref().unwrap_or(&captured.answer);
        let format = self.format;
        let streamed = toolgate_formats::answer::looks_like_event_stream(answer);
        let calls = match streamed {
            true => {
                toolgate_formats::stream::reassemble(format, [answer])
                    .response
                    .calls
            }
            false => toolgate_formats::answer::read_answer(format, answer)
                .map(|read| read.calls)
                .unwrap_or_default(),
        };
        let edits = redactions(&self.route.chain, &calls);
        let mut text = match (edits.is_empty(), streamed) {
            (true, _) => String::from_utf8_lossy(answer).into_owned(),
            (false, true) => redacted_stream(format, answer, &edits),
            (false, false) => match format.apply_response_edits(answer, &edits) {
                Ok(Some(edited)) => String::from_utf8_lossy(&edited).into_owned(),
                _ => {
                    "(not captured: the route's redactions could not be written into it)".to_owned()
                }
            },
        };
        if captured.answer_cut {
            text.push_str("\n(the rest of the stream was not captured: past capture_ring_mib)");
        }
        text
    }
}

/// The edits that redact `calls` as the chain's plugins would (each plugin's after the one
/// before it, so two redactions of one call both hold).
fn redactions(chain: &crate::pipeline::Chain, calls: &[ToolCall]) -> Vec<Edit> {
    let mut edits = Vec::new();
    for call in calls {
        let mut current = call.clone();
        let mut changed = false;
        for entry in chain.entries() {
            if let Some(arguments) = entry.plugin.redacted_arguments(&current) {
                current.arguments = arguments;
                changed = true;
            }
        }
        if changed {
            edits.push(Edit::ReplaceArguments {
                choice: call.choice,
                call_id: call.id.clone(),
                arguments: current.arguments,
            });
        }
    }
    edits
}

/// A stream's events with the edits written where the arguments appear, as a client of a
/// redacting route gets them.
fn redacted_stream(format: WireFormat, stream: &[u8], edits: &[Edit]) -> String {
    let mut parser = toolgate_formats::sse::SseParser::new();
    let mut events = parser.push(stream);
    events.extend(parser.finish());
    let mut rewriter = StreamRewriter::new(format);
    rewriter.add_edits(edits);
    let mut out = Vec::with_capacity(stream.len());
    for event in events {
        match rewriter.rewrite(&event) {
            Some(bytes) => out.extend_from_slice(&bytes),
            None => out.extend_from_slice(&event.raw),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
