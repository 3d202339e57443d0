//! The admin listener: `/health` (the process is up, and the state of each MCP backend),
//! `/ready` (it is serving traffic), `/metrics` (Prometheus text format) and `/tools` (which
//! tools a request would be offered). Kept off the proxy port so it is never exposed with it.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use toolgate_plugin::prometheus_client::encoding::text::encode;

use crate::body::{ProxyBody, full};
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
                async move { Ok::<_, Infallible>(answer(&state, &request)) }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(state: &GatewayState, request: &Request<Incoming>) -> Response<ProxyBody> {
    match request.uri().path() {
        "/health" => health(state),
        "/ready" => {
            let config = state.config.load();
            if state.ready.load(Ordering::Acquire) {
                let routes = config.router.routes().count();
                json(
                    StatusCode::OK,
                    format!(r#"{{"status":"ready","routes":{routes}}}"#),
                )
            } else {
                json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    r#"{"status":"not ready"}"#.to_owned(),
                )
            }
        }
        "/tools" => {
            let (status, body) =
                crate::discovery::tools(&state.config.load(), request.uri().query());
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
        _ => json(
            StatusCode::NOT_FOUND,
            r#"{"status":"not found"}"#.to_owned(),
        ),
    }
}

/// Up is up: a backend that is down does not make toolgate unhealthy (restarting toolgate would
/// not bring it back), it is reported in `mcp_servers` for whoever watches.
fn health(state: &GatewayState) -> Response<ProxyBody> {
    let mut body = serde_json::json!({"status": "ok"});
    if !state.mcp.is_empty() {
        body["mcp_servers"] = serde_json::json!(state.mcp.health());
    }
    json(StatusCode::OK, body.to_string())
}

fn json(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
