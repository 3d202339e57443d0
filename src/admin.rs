//! The admin listener: `/health` (the process is up, and the state of what it depends on: each
//! MCP backend, the state store, each validator service's breaker), `/ready` (it is serving
//! traffic, and can: not while a `fail_mode = "block"` store is down), `/metrics` (Prometheus
//! text format), `/tools` (which tools a request would be offered) and `/captures`,
//! `/captures/{request_id}` (the exchanges `[audit] capture` kept). Kept off the proxy port so
//! it is never exposed with it.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use toolgate_plugin::prometheus_client::encoding::text::encode;
use toolgate_plugin::{StoreError, StoreFailMode};

use crate::body::{ProxyBody, full};
use crate::config::Config;
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

/// Ready while serving, unless the state store is down and its `fail_mode` is `block`: every
/// budgeted exchange would be refused, so traffic is better sent to a replica that can count.
/// Likewise while a JWKS URL has never answered: every tenant token would be refused.
async fn ready(state: &GatewayState) -> Response<ProxyBody> {
    if !state.ready.load(Ordering::Acquire) {
        return json(
            StatusCode::SERVICE_UNAVAILABLE,
            r#"{"status":"not ready"}"#.to_owned(),
        );
    }
    let config = state.config.load();
    let store = StoreStatus::check(&config).await;
    let mut body = serde_json::json!({"status": "ready", "routes": config.router.routes().count()});
    let jwks_missing = config.tenants.signing_keys_missing();
    let status = if store.blocks_traffic() || jwks_missing.is_some() {
        body["status"] = "not ready".into();
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    body["store"] = store.to_json();
    if let Some(reason) = jwks_missing {
        body["jwks"] = reason.into();
    }
    json(status, body.to_string())
}

/// Up is up: a dependency that is down does not make toolgate unhealthy (restarting toolgate
/// would not bring it back); each is reported for whoever watches — `mcp_servers`, `store`,
/// and the plugins' sections (`services`: each validator service's breaker).
async fn health(state: &GatewayState) -> Response<ProxyBody> {
    json(StatusCode::OK, health_json(state).await.to_string())
}

/// What `/health` says, for the console too.
pub(crate) async fn health_json(state: &GatewayState) -> serde_json::Value {
    let mut body = serde_json::json!({"status": "ok"});
    if !state.mcp.is_empty() {
        body["mcp_servers"] = serde_json::json!(state.mcp.health());
    }
    let config = state.config.load();
    body["store"] = StoreStatus::check(&config).await.to_json();
    for (section, detail) in state.plugins.health_sections() {
        body[section] = detail;
    }
    body
}

/// The state store as the admin endpoints show it, from a check made now.
struct StoreStatus {
    store: String,
    fail_mode: StoreFailMode,
    problem: Option<StoreError>,
}

/// The longest an admin answer waits for the store: probes time out after a second by default,
/// and a `/health` that timed out would have the process restarted for a dependency's fault.
const STORE_CHECK_BUDGET: Duration = Duration::from_millis(750);

impl StoreStatus {
    async fn check(config: &Config) -> StoreStatus {
        let problem = match tokio::time::timeout(STORE_CHECK_BUDGET, config.store.check()).await {
            Ok(checked) => checked.err(),
            Err(_) => Some(StoreError::new(format!(
                "no answer within {} ms",
                STORE_CHECK_BUDGET.as_millis()
            ))),
        };
        StoreStatus {
            store: config.store.describe(),
            fail_mode: config.store_fail_mode,
            problem,
        }
    }

    fn blocks_traffic(&self) -> bool {
        self.problem.is_some() && self.fail_mode == StoreFailMode::Block
    }

    fn to_json(&self) -> serde_json::Value {
        let mut status = serde_json::json!({
            "store": self.store,
            "state": if self.problem.is_some() { "down" } else { "up" },
            "fail_mode": match self.fail_mode {
                StoreFailMode::Block => "block",
                StoreFailMode::Allow => "allow",
            },
        });
        if let Some(problem) = &self.problem {
            status["error"] = problem.message().into();
        }
        status
    }
}

/// A JSON answer of the admin listener (the console's too).
pub(crate) fn json(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
