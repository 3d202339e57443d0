//! Fuzzes SSE parsing and stream reassembly under arbitrary chunking: the first byte picks the
//! chunk size. Properties: nothing panics, the events' raw bytes give back the input exactly,
//! and the calls reassembled do not depend on how the stream was chunked.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_plugin::WireFormat;
use toolgate_plugin::sse::SseParser;

fn reassemble(
    format: WireFormat,
    data: &[u8],
    chunk: usize,
) -> (Vec<u8>, Vec<toolgate_plugin::ToolCall>) {
    let mut parser = SseParser::new();
    let mut assembler = format.stream_assembler();
    let mut raw = Vec::with_capacity(data.len());
    let mut calls = Vec::new();
    let mut events = Vec::new();
    for piece in data.chunks(chunk.max(1)) {
        events.extend(parser.push(piece));
    }
    events.extend(parser.finish());
    for event in events {
        raw.extend_from_slice(&event.raw);
        assembler.observe(&event);
        if assembler.calls_ready() {
            calls.extend(assembler.take_calls());
        }
    }
    calls.extend(assembler.take_calls());
    (raw, calls)
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(first % 64) + 1;
    for format in WireFormat::ALL {
        let (whole_raw, whole_calls) = reassemble(format, stream, stream.len().max(1));
        let (raw, calls) = reassemble(format, stream, chunk);
        assert_eq!(whole_raw, stream, "raw bytes round-trip");
        assert_eq!(raw, stream, "raw bytes round-trip under chunking");
        assert_eq!(calls, whole_calls, "the chunking does not change the calls");
    }
});
