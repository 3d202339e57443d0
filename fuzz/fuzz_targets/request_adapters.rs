//! Fuzzes every format's request adapter: reading declared tools, the user's request, the
//! history, and removing a tool must never panic, whatever the body; and a reading through the
//! declared-tools cache (a miss, then a hit) is the reading without it, errors included; and
//! what the cached reading's scan of a body accepts, serde_json accepts.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use toolgate_formats::{DeclaredToolsCache, Edit, ToolRequest, WireFormat};

/// What a reading gives the checks, comparable.
fn reading(read: &Result<ToolRequest, toolgate_formats::ParseError>) -> Result<String, String> {
    match read {
        Ok(request) => Ok(format!(
            "{:?} {} {} {:?} {:?}",
            request.declared_tools,
            request.stream,
            request.background,
            request.model,
            request.directives.as_ref().map(|raw| raw.get())
        )),
        Err(error) => Err(error.to_string()),
    }
}

fuzz_target!(|data: &[u8]| {
    if toolgate_formats::scans_as_object(data) {
        assert!(serde_json::from_slice::<serde::de::IgnoredAny>(data).is_ok());
    }
    let _ = WireFormat::from_body(data);
    let cache = DeclaredToolsCache::new();
    for format in WireFormat::ALL {
        let read = format.parse_request(Bytes::copy_from_slice(data));
        for attempt in ["miss", "hit"] {
            let cached = format.parse_request_cached(Bytes::copy_from_slice(data), &cache);
            assert_eq!(reading(&cached), reading(&read), "{format:?}, {attempt}");
        }
        let Ok(request) = read else {
            continue;
        };
        let _ = request.user_request();
        let _ = request.history();
        if let Some(tool) = request.declared_tools.first() {
            let edit = Edit::RemoveDeclaredTools(vec![tool.name.clone()]);
            if let Ok(Some(edited)) = format.apply_request_edits(data, &[edit]) {
                // An edited body is still a request of the same format, one tool shorter.
                let reread = format
                    .parse_request(edited)
                    .expect("an edited request parses");
                assert!(reread.declared_tools.len() < request.declared_tools.len());
            }
        }
    }
});
