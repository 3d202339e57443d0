//! Which headers a plugin may never set through an edit: the ones that describe a connection
//! (hop-by-hop) or how a body is framed. The gateway computes those itself; a plugin (or the
//! service behind it) setting `content-length` or `transfer-encoding` would desync the client's
//! keep-alive connection or empty its answer.

use http::HeaderName;
use http::header;

/// Headers that describe one connection (hop-by-hop): they never cross a proxy, either way.
pub const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Headers that say how a body is framed or where it goes: the gateway computes them.
const FRAMING: [HeaderName; 3] = [
    header::CONTENT_LENGTH,
    header::CONTENT_ENCODING,
    header::HOST,
];

/// Whether `name` describes a connection or a body's framing, so no edit may set it.
pub fn is_connection_or_framing(name: &HeaderName) -> bool {
    HOP_BY_HOP.contains(name) || FRAMING.contains(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_and_hop_by_hop_headers_are_recognised_whatever_their_case() {
        for name in [
            "Content-Length",
            "transfer-encoding",
            "CONNECTION",
            "te",
            "upgrade",
        ] {
            let parsed = HeaderName::from_bytes(name.as_bytes()).expect("a header name");
            assert!(is_connection_or_framing(&parsed), "{name}");
        }
        assert!(!is_connection_or_framing(&HeaderName::from_static(
            "x-reviewed"
        )));
        assert!(!is_connection_or_framing(&header::CONTENT_TYPE));
    }
}
