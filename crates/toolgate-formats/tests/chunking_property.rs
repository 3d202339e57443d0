//! Property: however a stream is cut into chunks, the SSE parser gives back its exact bytes and
//! the format's assembler yields the same tool calls (so the same verdict) as for the whole
//! stream — for every recorded stream of every format in fixtures/.

use std::path::PathBuf;

use proptest::prelude::*;
use toolgate_formats::WireFormat;
use toolgate_formats::stream::reassemble;

/// Every recorded stream with the format it is in.
fn recorded_streams() -> Vec<(WireFormat, String, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let folders = [
        ("streams", WireFormat::ChatCompletions),
        ("responses", WireFormat::Responses),
        ("anthropic", WireFormat::AnthropicMessages),
        ("gemini", WireFormat::Gemini),
    ];
    let mut streams = Vec::new();
    for (folder, format) in folders {
        let Ok(entries) = std::fs::read_dir(root.join(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|extension| extension == "sse") {
                let bytes = std::fs::read(&path).expect("a readable fixture");
                streams.push((format, path.display().to_string(), bytes));
            }
        }
    }
    streams.sort_by(|a, b| a.1.cmp(&b.1));
    streams
}

/// Cuts `bytes` at the given fractions of its length.
fn cut<'a>(bytes: &'a [u8], fractions: &[f64]) -> Vec<&'a [u8]> {
    let mut positions: Vec<usize> = fractions
        .iter()
        .map(|fraction| ((bytes.len() as f64) * fraction) as usize)
        .collect();
    positions.sort_unstable();
    positions.dedup();
    let mut chunks = Vec::new();
    let mut start = 0;
    for position in positions.into_iter().chain([bytes.len()]) {
        if position > start {
            chunks.push(&bytes[start..position]);
            start = position;
        }
    }
    chunks
}

#[test]
fn there_are_recorded_streams_of_every_format() {
    let streams = recorded_streams();
    for format in WireFormat::ALL {
        assert!(
            streams.iter().filter(|(of, _, _)| *of == format).count() >= 5,
            "{format:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_chunking_yields_the_same_bytes_and_calls(fractions in prop::collection::vec(0.0f64..1.0, 0..40)) {
        for (format, name, bytes) in recorded_streams() {
            let whole = reassemble(format, [bytes.as_slice()]);
            prop_assert_eq!(&whole.raw, &bytes, "{}", name);
            let chunked = reassemble(format, cut(&bytes, &fractions));
            prop_assert_eq!(&chunked.raw, &bytes, "{}", name);
            prop_assert_eq!(&chunked.response, &whole.response, "{}", name);
        }
    }
}
