//! What a plugin's own tests need to call its stages without a gateway: the facts of an
//! exchange on a chat route, and the views of each stage built from a request and an answer.

use std::sync::Arc;

use http::{HeaderMap, Method, StatusCode};

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
