//! What a plugin's own tests need to call its stages without a gateway: the facts of an
//! exchange on a chat route, the views of each stage built from a request and an answer, its
//! metrics as Prometheus exposes them, and assertions on the text it writes for people.

use std::sync::Arc;

use http::{HeaderMap, Method, StatusCode};
use prometheus_client::registry::Registry;

use crate::exchange::{ExchangeMeta, Parsed, ResponseExchange};
use crate::format::{ToolRequest, ToolResponse};

/// The facts of a POST to `path` on route `/v1`, with request id `req-test`.
pub fn meta(path: &str) -> ExchangeMeta {
    ExchangeMeta::new("req-test", Arc::from("/v1"), Method::POST, path)
}

/// The request headers of a test exchange: none.
pub fn no_headers() -> &'static HeaderMap {
    static EMPTY: std::sync::OnceLock<HeaderMap> = std::sync::OnceLock::new();
    EMPTY.get_or_init(HeaderMap::new)
}

/// The view `pre_response` gets of a whole 200 answer to `request`.
pub fn response_exchange<'a>(
    meta: &'a ExchangeMeta,
    request: &'a Parsed<ToolRequest>,
    response: &'a Parsed<ToolResponse>,
) -> ResponseExchange<'a> {
    ResponseExchange {
        meta,
        request_headers: no_headers(),
        request,
        status: StatusCode::OK,
        response,
        streamed: false,
    }
}

/// A registry holding only what `register` puts in it, and what it returned: a plugin's
/// metrics as its factory registers them.
pub fn registered<M>(register: impl FnOnce(&mut Registry) -> M) -> (M, Registry) {
    let mut registry = Registry::default();
    let metrics = register(&mut registry);
    (metrics, registry)
}

/// Asserts that the registry's text exposition has each of `lines`: a series under its
/// documented name, labels and value.
pub fn assert_exposes(registry: &Registry, lines: &[&str]) {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry)
        .expect("encoding into a String cannot fail");
    for line in lines {
        assert!(text.contains(line), "{line} in\n{text}");
    }
}

/// Asserts that `text` holds `part`, showing the whole text when it does not.
pub fn assert_contains(text: &str, part: &str) {
    assert!(text.contains(part), "{part:?} not in {text:?}");
}

/// Asserts, for each `(index, part)`, that `lines[index]` holds `part`, showing every line
/// when one does not.
pub fn assert_lines_contain(lines: &[String], parts: &[(usize, &str)]) {
    for (index, part) in parts {
        let line = lines.get(*index).map(String::as_str);
        assert!(
            line.is_some_and(|line| line.contains(part)),
            "{part:?} not in line {index} of {lines:#?}"
        );
    }
}
