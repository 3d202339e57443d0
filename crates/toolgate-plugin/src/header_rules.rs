//! Which headers a plugin may never set through an edit: the ones that describe a connection
//! (hop-by-hop) or how a body is framed. The gateway computes those itself; a plugin (or the
//! service behind it) setting `content-length` or `transfer-encoding` would desync the client's
//! keep-alive connection or empty its answer.

use http::HeaderName;

/// Whether `name` describes one connection (hop-by-hop): such a header never crosses a
/// proxy, either way. Matched by text, which the compiler turns into a length switch: run on
/// every header of every message, a list of names compared one by one cost ~1k instructions a
/// request.
pub fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// Whether `name` says how a body is framed or where it goes: the gateway computes those.
fn is_framing(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "content-length" | "content-encoding" | "host"
    )
}

/// Whether `name` describes a connection or a body's framing, so no edit may set it.
pub fn is_connection_or_framing(name: &HeaderName) -> bool {
    is_hop_by_hop(name) || is_framing(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    use http::header;

    #[test]
    fn the_hop_by_hop_headers_are_rfc_9110s_and_the_legacy_ones() {
        let hop_by_hop = [
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
        for name in &hop_by_hop {
            assert!(is_hop_by_hop(name), "{name}");
        }
        for name in [header::CONTENT_TYPE, header::AUTHORIZATION, header::HOST] {
            assert!(!is_hop_by_hop(&name), "{name}");
        }
        let custom = HeaderName::from_static("x-connection");
        assert!(!is_hop_by_hop(&custom));
    }

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
