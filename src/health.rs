//! What the admin listener says of the process's health and readiness (`/health`, `/ready`,
//! and the console's health panel): the state store checked now, each MCP backend, and the
//! plugins' own sections.

use std::sync::atomic::Ordering;
use std::time::Duration;

use http::{Response, StatusCode};
use toolgate_plugin::{StoreError, StoreFailMode};

use crate::body::{ProxyBody, json};
use crate::config::Config;
use crate::state::GatewayState;

/// Ready while serving, unless the state store is down and its `fail_mode` is `block`: every
/// budgeted exchange would be refused, so traffic is better sent to a replica that can count.
/// Likewise while a JWKS URL has never answered: every tenant token would be refused.
pub(crate) async fn ready(state: &GatewayState) -> Response<ProxyBody> {
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
pub(crate) async fn health(state: &GatewayState) -> Response<ProxyBody> {
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
