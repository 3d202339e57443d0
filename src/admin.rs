//! The admin listener: `/health` (the process is up, and the state of what it depends on: each
//! MCP backend, the state store, each validator service's breaker), `/ready` (it is serving
//! traffic, and can: not while a `fail_mode = "block"` store is down), `/metrics` (Prometheus
//! text format), `/tools` (which tools a request would be offered) and `/captures`,
//! `/captures/{request_id}` (the exchanges `[audit] capture` kept). Kept off the proxy port so
//! it is never exposed with it.

use std::convert::Infallible;
use std::sync::Arc;

use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use toolgate_plugin::prometheus_client::encoding::text::encode;

use crate::body::{ProxyBody, full, json};
use crate::health::{health, ready};
use crate::state::GatewayState;

pub async fn serve(listener: TcpListener, state: Arc<GatewayState>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let state = state.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(route(&state, request).await) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn route(state: &GatewayState, request: Request<Incoming>) -> Response<ProxyBody> {
    let path = request.uri().path();
    let guarded = path.starts_with("/captures")
        || (path == "/metrics" && state.config.load().server.protect_metrics);
    if guarded
        && let crate::console::Access::Refused(response) = crate::console::access(state, &request)
    {
        return response;
    }
    if path == "/console" || path.starts_with("/console/") {
        return match crate::console::answer(state, request).await {
            Some(response) => response,
            None => json(
                StatusCode::NOT_FOUND,
                r#"{"status":"not found"}"#.to_owned(),
            ),
        };
    }
    answer(state, &request).await
}

async fn answer(state: &GatewayState, request: &Request<Incoming>) -> Response<ProxyBody> {
    match request.uri().path() {
        "/health" => health(state).await,
        "/ready" => ready(state).await,
        "/tools" => {
            let (status, body) =
                crate::discovery::tools(&state.config.load_full(), request.uri().query()).await;
            json(status, body)
        }
        "/metrics" => {
            let mut text = String::new();
            if encode(&mut text, &state.registry).is_err() {
                return json(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    r#"{"status":"metrics unavailable"}"#.to_owned(),
                );
            }
            let mut response = Response::new(full(text));
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            response
        }
        "/captures" => json(StatusCode::OK, state.captures.list().to_string()),
        path => match path.strip_prefix("/captures/") {
            Some(request_id) => match state.captures.find(request_id) {
                Some(record) => json(
                    StatusCode::OK,
                    serde_json::to_string(&*record).unwrap_or_default(),
                ),
                None => json(
                    StatusCode::NOT_FOUND,
                    r#"{"status":"no capture of that request id (not captured, or gone from the ring)"}"#.to_owned(),
                ),
            },
            None => json(
                StatusCode::NOT_FOUND,
                r#"{"status":"not found"}"#.to_owned(),
            ),
        },
    }
}
