//! Fuzzes SSE parsing and stream reassembly under arbitrary chunking: the first byte picks the
//! chunk size. Properties: nothing panics, the events' raw bytes give back the input exactly,
//! and the calls reassembled do not depend on how the stream was chunked.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_plugin::WireFormat;
use toolgate_plugin::stream::reassemble;

fuzz_target!(|data: &[u8]| {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(first % 64) + 1;
    for format in WireFormat::ALL {
        let whole = reassemble(format, [stream]);
        let chunked = reassemble(format, stream.chunks(chunk));
        assert_eq!(whole.raw, stream, "raw bytes round-trip");
        assert_eq!(chunked.raw, stream, "raw bytes round-trip under chunking");
        assert_eq!(
            chunked.response, whole.response,
            "the chunking does not change the calls"
        );
    }
});
