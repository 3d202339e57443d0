//! The HTTP side of an MCP route, on toolgate's own listener: the caller is authenticated as on
//! any route (tenant keys), an asserted agent is checked against its tenant, the message is
//! read within the size cap and the body timeout, and the request goes to rmcp's Streamable
//! HTTP service (sessions, SSE, JSON-RPC) with its scope attached. One service per route path
//! lives as long as the process, so sessions survive config reloads.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use rmcp::model::{CallToolRequestParams, ErrorCode, ErrorData, JsonRpcError, JsonRpcVersion2_0};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;
use serde_json::json;
use toolgate_plugin::{ExchangeMeta, Tenant};

use super::handler::{RequestScope, codes};
use super::services::SessionOwner;
use super::{AGENT_HEADER, Caller};
use crate::body::{ProxyBody, full};
use crate::config::Config;
use crate::error::GatewayError;
use crate::exchange::{Exchange, path_and_query};
use crate::request_body::{ClientBody, ClientBodyFault};
use crate::router::Route;
use crate::state::GatewayState;
use crate::tenants::authenticate;

/// Answers one HTTP request on an MCP route. Never fails: every problem is a JSON-RPC error.
pub async fn serve(
    state: Arc<GatewayState>,
    config: Arc<Config>,
    route: Arc<Route>,
    request: Request<Incoming>,
    request_id: String,
    started: Instant,
) -> Response<ProxyBody> {
    let response = answer(&state, config, route.clone(), request, request_id).await;
    state.metrics.record_route_request(
        &route.path,
        &route.metrics,
        response.status().as_u16(),
        started.elapsed(),
        // The backends' time is the MCP exchanges' to tell (their audit lines).
        std::time::Duration::ZERO,
    );
    response
}

/// One HTTP request of an MCP route, in four steps: who calls (authenticate, and the agent it
/// asserts), the message read whole, the session it names owned by that caller, and rmcp's
/// answer with its transport errors wrapped as JSON-RPC errors.
async fn answer(
    state: &Arc<GatewayState>,
    config: Arc<Config>,
    route: Arc<Route>,
    request: Request<Incoming>,
    request_id: String,
) -> Response<ProxyBody> {
    let (tenant, owner, identity) =
        match identify(state, &config, &route, &request, &request_id).await {
            Ok(caller) => caller,
            Err(refused) => return refused,
        };
    let (mut parts, incoming) = request.into_parts();
    let limit = config.server.max_request_body_bytes;
    let body = match read_message(&config, incoming, &parts.method, &request_id).await {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let session = parts
        .headers
        .get(HEADER_SESSION_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    if let Some(session) = &session
        && !state.mcp_endpoints.may_use(&route.path, session, &owner)
    {
        let meta = meta_of(&route, &parts.method, &parts.uri, &request_id, tenant);
        return session_not_owned(state, &route, meta, &request_id).await;
    }
    let meta = meta_of(&route, &parts.method, &parts.uri, &request_id, tenant);
    let service = state.mcp_endpoints.service(&route.path, limit);
    parts.extensions.insert(RequestScope {
        state: state.clone(),
        config,
        route: route.clone(),
        meta,
        headers: parts.headers.clone(),
        caller: Caller { identity },
    });
    let closing = parts.method == http::Method::DELETE;
    let response = service
        .handle(Request::from_parts(parts, Full::new(body)))
        .await;
    match (&session, response.headers().get(HEADER_SESSION_ID)) {
        (None, Some(opened)) => {
            if let Ok(opened) = opened.to_str() {
                state.mcp_endpoints.bind(&route.path, opened, owner).await;
            }
        }
        (Some(session), _) if closing && response.status().is_success() => {
            state.mcp_endpoints.release(&route.path, session);
        }
        _ => {}
    }
    as_json_rpc(response, &request_id).await
}

/// Who calls: the tenant its key or token names, the session owner it will be, and the
/// identity its calls are checked as (an agent the tenant holds, else the tenant).
async fn identify(
    state: &Arc<GatewayState>,
    config: &Config,
    route: &Arc<Route>,
    request: &Request<Incoming>,
    request_id: &str,
) -> Result<(Option<Arc<Tenant>>, SessionOwner, Option<String>), Response<ProxyBody>> {
    let tenant = match authenticate(&config.tenants, route.auth, request.headers()).await {
        Ok(tenant) => tenant,
        Err(failure) => {
            let error = crate::error::GatewayError::unauthenticated(failure);
            crate::tenants::warn_unauthenticated(
                request_id,
                &route.path,
                request.uri().path(),
                error.code,
            );
            audit_refused(
                state,
                route,
                meta_of(route, request.method(), request.uri(), request_id, None),
                StatusCode::UNAUTHORIZED,
                error.code,
            )
            .await;
            return Err(refusal(
                StatusCode::UNAUTHORIZED,
                codes::UNAUTHORIZED,
                &error.message,
                json!({"code": error.code, "request_id": request_id}),
            ));
        }
    };
    let agent = request
        .headers()
        .get(AGENT_HEADER)
        .map(|value| value.to_str().unwrap_or_default().trim().to_owned());
    let owner = SessionOwner {
        tenant: tenant.as_ref().map(|tenant| tenant.name.clone()),
        agent: agent.clone(),
    };
    let identity = match (&tenant, agent) {
        (_, None) => tenant.as_ref().map(|tenant| tenant.name.clone()),
        (Some(tenant), Some(agent)) if tenant.agents.contains(&agent) => Some(agent),
        (_, Some(agent)) => {
            let meta = meta_of(
                route,
                request.method(),
                request.uri(),
                request_id,
                tenant.clone(),
            );
            audit_refused(state, route, meta, StatusCode::FORBIDDEN, "agent_not_held").await;
            return Err(refusal(
                StatusCode::FORBIDDEN,
                codes::UNAUTHORIZED,
                &format!(
                    "{AGENT_HEADER} '{agent}' is not an agent this caller's tenant may assert"
                ),
                json!({"code": "agent_not_held", "request_id": request_id}),
            ));
        }
    };
    Ok((tenant, owner, identity))
}

/// The message, read whole within the body limits; a POST's must be JSON, and a `tools/call`'s
/// params a call.
async fn read_message(
    config: &Config,
    incoming: Incoming,
    method: &http::Method,
    request_id: &str,
) -> Result<Bytes, Response<ProxyBody>> {
    let limit = config.server.max_request_body_bytes;
    let body = match ClientBody::new(incoming, &config.server).read_whole().await {
        Ok(body) => body,
        Err(ClientBodyFault::TooLarge(_)) => {
            let error = GatewayError::request_too_large(limit);
            return Err(refusal(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::INVALID_REQUEST.0,
                &error.message,
                json!({"code": "message_too_large", "limit": limit, "request_id": request_id}),
            ));
        }
        Err(fault) => {
            let error = fault.to_error();
            return Err(refusal(
                error.status,
                ErrorCode::INVALID_REQUEST.0,
                &format!("the message could not be read: {fault}"),
                json!({"code": "unreadable_message", "request_id": request_id}),
            ));
        }
    };
    if *method != http::Method::POST {
        return Ok(body);
    }
    if serde_json::from_slice::<serde::de::IgnoredAny>(&body).is_err() {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            ErrorCode::PARSE_ERROR.0,
            "the message is not JSON",
            json!({"code": "parse_error", "request_id": request_id}),
        ));
    }
    match invalid_call_params(&body, request_id) {
        Some(answer) => Err(answer),
        None => Ok(body),
    }
}

/// A session another caller owns: answered as rmcp answers a session it does not know, since
/// whether the id exists is its owner's business alone.
async fn session_not_owned(
    state: &Arc<GatewayState>,
    route: &Arc<Route>,
    meta: ExchangeMeta,
    request_id: &str,
) -> Response<ProxyBody> {
    audit_refused(
        state,
        route,
        meta,
        StatusCode::NOT_FOUND,
        "session_not_owned",
    )
    .await;
    refusal(
        StatusCode::NOT_FOUND,
        ErrorCode::INVALID_REQUEST.0,
        "Not Found: Session not found",
        json!({"code": "invalid_message", "request_id": request_id}),
    )
}

/// rmcp's answer for the client: as it is when it succeeded or is JSON; rmcp answers
/// transport-level problems (a message that is not JSON-RPC, an unknown session, a missing
/// Accept) in plain text, which becomes a JSON-RPC error with rmcp's status and words.
async fn as_json_rpc<B>(response: Response<B>, request_id: &str) -> Response<ProxyBody>
where
    B: http_body::Body<Data = Bytes, Error = std::convert::Infallible> + Send + Sync + 'static,
{
    if response.status().is_success() || is_json(response.headers()) {
        return response.map(|body| body.map_err(|never| match never {}).boxed());
    }
    let status = response.status();
    let text = match response.into_body().collect().await {
        Ok(collected) => String::from_utf8_lossy(&collected.to_bytes()).into_owned(),
        Err(never) => match never {},
    };
    refusal(
        status,
        ErrorCode::INVALID_REQUEST.0,
        text.trim(),
        json!({"code": "invalid_message", "request_id": request_id}),
    )
}

/// A `tools/call` request whose params are not a call, answered -32602 (invalid params) for its
/// id. rmcp reads a request whose params fit no known method as an unknown method (-32601),
/// which tells a client the server lacks tools, not that its call was malformed.
fn invalid_call_params(body: &[u8], request_id: &str) -> Option<Response<ProxyBody>> {
    #[derive(serde::Deserialize)]
    struct Message {
        method: Option<String>,
        id: Option<serde_json::Value>,
        params: Option<serde_json::Value>,
    }
    let message: Message = serde_json::from_slice(body).ok()?;
    // A notification (no id) gets no answer, whatever it holds.
    let id = message
        .id
        .filter(|_| message.method.as_deref() == Some("tools/call"))?;
    let problem = match message.params {
        None => "tools/call has no params".to_owned(),
        Some(params) => serde_json::from_value::<CallToolRequestParams>(params)
            .err()?
            .to_string(),
    };
    let error = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": ErrorCode::INVALID_PARAMS.0,
            "message": format!("invalid tools/call params: {problem}"),
            "data": {"code": "invalid_params", "request_id": request_id},
        },
    });
    let mut response = Response::new(full(Bytes::from(error.to_string())));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Some(response)
}

fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("application/json"))
}

/// What every stage shares, for a request on `route`.
fn meta_of(
    route: &Route,
    method: &http::Method,
    uri: &http::Uri,
    request_id: &str,
    tenant: Option<Arc<Tenant>>,
) -> ExchangeMeta {
    ExchangeMeta::new(
        request_id,
        route.path.clone(),
        method.clone(),
        path_and_query(uri),
    )
    .with_tenant(tenant)
}

/// The audit line of a caller refused before MCP: who knocked is an audit trail's business.
async fn audit_refused(
    state: &Arc<GatewayState>,
    route: &Arc<Route>,
    meta: ExchangeMeta,
    status: StatusCode,
    code: &str,
) {
    let mut exchange = Exchange::new(meta, route.clone(), HeaderMap::new(), Instant::now());
    exchange.record_refusal(code);
    exchange.finish(state, status).await;
}

/// A JSON-RPC error toolgate answers before a message reaches the MCP service (its id is not
/// known yet, so it is null, as JSON-RPC says).
fn refusal(
    status: StatusCode,
    code: i32,
    message: &str,
    data: serde_json::Value,
) -> Response<ProxyBody> {
    let error = JsonRpcError {
        jsonrpc: JsonRpcVersion2_0,
        id: None,
        error: ErrorData::new(ErrorCode(code), message.to_owned(), Some(data)),
    };
    let body = serde_json::to_vec(&error).unwrap_or_default();
    let mut response = Response::new(full(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
