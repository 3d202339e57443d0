//! Fuzzes SSE parsing and stream reassembly under arbitrary chunking: the first byte picks the
//! chunk size. Properties: nothing panics, the events' raw bytes give back the input exactly,
//! and the calls reassembled do not depend on how the stream was chunked. And no stream
//! carries a call past the guard: for the input and every hostile version of it (`hostile.rs`),
//! each call a forgiving client reads was checked by the stream relay (`reassemble`) and by
//! `read_answer` (the stream sent where JSON was expected), or the stream refused.
#![no_main]

// Each target uses part of the shared oracle.
#[allow(dead_code)]
#[path = "../../crates/toolgate-formats/tests/support/oracle.rs"]
mod oracle;

mod hostile;

use libfuzzer_sys::fuzz_target;
use toolgate_formats::WireFormat;
use toolgate_formats::stream::reassemble;

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
    for stream in std::iter::once(stream.to_vec()).chain(hostile::variants(stream)) {
        for hint in WireFormat::ALL {
            let verdicts = [
                oracle::stream_is_guarded(hint, &stream, stream.chunks(chunk)),
                oracle::body_is_guarded(hint, &stream),
            ];
            for (path, verdict) in ["relay", "body"].iter().zip(verdicts) {
                if let Err(bypass) = verdict {
                    let text = String::from_utf8_lossy(&stream);
                    panic!("{bypass}\n{hint:?} {path}:\n{text}");
                }
            }
        }
    }
});
