//! An exchange's capture (`[audit] capture`): the bodies it collects while it runs, and the
//! record it leaves at its end when the setting names it, its answer's call arguments passed
//! through the route's redactions first.

use bytes::Bytes;
use toolgate_formats::stream::StreamRewriter;
use toolgate_plugin::{Edit, ToolCall, WireFormat};

use super::Exchange;
use crate::capture::{CaptureRecord, CaptureStore, Captured, CapturedBody};
use crate::telemetry::AuditRecord;

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
            captured.calls.clear();
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

    /// The calls of the whole answer just read, for the captured answer's redactions, so it is
    /// not read again (each attempt's replace the one before, as its answer does).
    pub(super) fn capture_calls(&mut self, calls: &[ToolCall]) {
        if let Some(captured) = &mut self.captured {
            captured.calls = calls.to_vec();
        }
    }

    /// The bodies collected, when `store`'s setting names this exchange; dropped otherwise,
    /// before anything is built for them.
    pub(super) fn wanted_capture(&mut self, store: &CaptureStore) -> Option<Box<Captured>> {
        self.captured.take().filter(|_| store.wants(self.blocked))
    }

    /// Leaves the record of `captured` in `store`: its bodies shared as they were held for the
    /// checks; only an answer the route redacts is written anew.
    pub(super) fn keep_capture(
        &self,
        store: &CaptureStore,
        captured: Captured,
        audit: &AuditRecord,
    ) {
        let request = CapturedBody(captured.request.clone());
        let response = CapturedBody(self.redacted_answer(captured));
        store.keep(CaptureRecord {
            request_id: audit.request_id.clone(),
            timestamp: audit.timestamp.clone(),
            route: audit.route.clone(),
            method: audit.method.clone(),
            path: (self.meta.path_and_query.split('?').next())
                .unwrap_or_default()
                .to_owned(),
            status: audit.status,
            verdict: audit.verdict.as_str().to_owned(),
            streamed: self.streamed,
            request,
            response,
            violations: serde_json::to_value(&audit.violations).unwrap_or_default(),
        });
    }

    /// The captured answer with every call's arguments as the route's plugins redact them; a
    /// note in its place when a redaction cannot be written into it (nothing unredacted is
    /// kept).
    fn redacted_answer(&self, captured: Captured) -> Bytes {
        let format = self.format;
        let Captured {
            whole,
            mut answer,
            answer_cut,
            calls,
            ..
        } = captured;
        if let Some(whole) = whole {
            let edits = redactions(&self.route.chain, &calls);
            if edits.is_empty() {
                return whole;
            }
            return match format.apply_response_edits(&whole, &edits) {
                Ok(Some(edited)) => edited,
                _ => Bytes::from_static(
                    b"(not captured: the route's redactions could not be written into it)",
                ),
            };
        }
        // A stream's calls are checked in batches as they complete, and one blocked or cut
        // short leaves some unchecked: its captured events are read whole for the redactions.
        let calls = toolgate_formats::stream::reassemble(format, [answer.as_slice()])
            .response
            .calls;
        let edits = redactions(&self.route.chain, &calls);
        if !edits.is_empty() {
            answer = redacted_stream(format, &answer, &edits);
        }
        if answer_cut {
            answer.extend_from_slice(
                b"\n(the rest of the stream was not captured: past capture_ring_mib)",
            );
        }
        Bytes::from(answer)
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
fn redacted_stream(format: WireFormat, stream: &[u8], edits: &[Edit]) -> Vec<u8> {
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
    out
}
