//! Fuzzes every format's request adapter: reading declared tools, the user's request, the
//! history, and removing a tool must never panic, whatever the body.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use toolgate_formats::{Edit, WireFormat};

fuzz_target!(|data: &[u8]| {
    let _ = WireFormat::from_body(data);
    for format in WireFormat::ALL {
        let Ok(request) = format.parse_request(Bytes::copy_from_slice(data)) else {
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
