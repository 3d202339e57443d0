//! Fuzzes the scan's skip of a JSON string (a byte loop over plain runs, and 64-byte blocks of
//! bitmaps once escapes come close) against serde_json's: for the input read as a string's text
//! (a quote put in front), both must accept exactly what serde_json's skip accepts and end the
//! string where it does. Any disagreement would let a body past the guard that its reading of
//! the same bytes does not see.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;

/// Where serde_json's skip of the string `written` starts with ends, or `None` if it refuses it.
fn serde_end(written: &[u8]) -> Option<usize> {
    let mut values = serde_json::Deserializer::from_slice(written).into_iter::<IgnoredAny>();
    values.next()?.ok()?;
    Some(values.byte_offset())
}

fuzz_target!(|data: &[u8]| {
    let mut written = Vec::with_capacity(data.len() + 1);
    written.push(b'"');
    written.extend_from_slice(data);
    let expected = serde_end(&written);
    for (way, end) in ["scan", "blocks"].iter().zip(toolgate_formats::string_ends(&written)) {
        assert_eq!(end, expected, "{way}: {:?}", String::from_utf8_lossy(&written));
    }
});
