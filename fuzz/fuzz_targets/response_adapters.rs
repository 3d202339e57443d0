//! Fuzzes every format's response adapter: extracting tool calls and the reasoning summary must
//! never panic, whatever the upstream sends.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_plugin::WireFormat;

fuzz_target!(|data: &[u8]| {
    for format in WireFormat::ALL {
        if let Ok(response) = format.parse_response(data) {
            for call in &response.calls {
                assert!(!call.name.is_empty() || call.arguments.len() <= data.len());
            }
        }
    }
});
