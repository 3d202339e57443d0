//! Fuzzes every format's response adapter: extracting tool calls and the reasoning summary must
//! never panic, whatever the upstream sends. And no body carries a call past the guard: for the
//! input and every hostile version of it (`hostile.rs`), each call a forgiving client reads
//! was checked by `read_answer`, or the answer refused, whatever format the route expected; and
//! the one-pass reading of the usual answer is the reading by every calls field; and a JSON
//! string's text, where toolgate's reading gives one, is serde_json's; and a Chat Completions
//! answer the scan reads is read as serde_json reads it.
#![no_main]

// Each target uses part of the shared oracle.
#[allow(dead_code)]
#[path = "../../crates/toolgate-formats/tests/support/oracle.rs"]
mod oracle;

mod hostile;

use libfuzzer_sys::fuzz_target;
use toolgate_formats::{ParseErrorKind, WireFormat};

fuzz_target!(|data: &[u8]| {
    if let Ok(written) = std::str::from_utf8(data)
        && let Some(text) = toolgate_formats::string_text(written)
    {
        assert_eq!(serde_json::from_str::<String>(written).ok(), Some(text));
    }
    if let Some(disagreement) = toolgate_formats::chat_answer_scan_disagreement(data) {
        panic!("{disagreement}\nbody:\n{}", String::from_utf8_lossy(data));
    }
    for format in WireFormat::ALL {
        if let Ok(response) = format.parse_response(data) {
            for call in &response.calls {
                assert!(!call.name.is_empty() || call.arguments.len() <= data.len());
            }
        }
    }
    // A JSON object answer is read in one pass by the expected format when that is the only
    // calls field: the reading must be the one by every calls field. A body that is not JSON
    // after all is refused as unreadable on a generation route, whichever reading saw it first.
    let is_object = data.iter().find(|byte| !byte.is_ascii_whitespace()) == Some(&b'{');
    if is_object && !toolgate_formats::answer::looks_like_event_stream(data) {
        let by_every_field = toolgate_formats::answer::read_every_calls_field(data);
        for hint in WireFormat::ALL {
            let read = toolgate_formats::answer::read_answer(hint, data);
            match (&read, &by_every_field) {
                (Err(refused), Err(not_json)) if not_json.kind() == ParseErrorKind::Syntax => {
                    assert_eq!(refused.kind(), ParseErrorKind::Unreadable, "{hint:?}: {refused}");
                }
                _ => assert_eq!(
                    read,
                    by_every_field,
                    "{hint:?} body:\n{}",
                    String::from_utf8_lossy(data)
                ),
            }
        }
    }
    for body in std::iter::once(data.to_vec()).chain(hostile::variants(data)) {
        for hint in WireFormat::ALL {
            if let Err(bypass) = oracle::body_is_guarded(hint, &body) {
                panic!(
                    "{bypass}\n{hint:?} body:\n{}",
                    String::from_utf8_lossy(&body)
                );
            }
        }
    }
});
