//! The MCP server toolgate presents on an MCP route: `tools/list` shows what the caller may
//! call, `tools/call` checks it again (policy, the tool's `inputSchema`, the route's plugins)
//! before forwarding, and checks a structured result against the tool's `outputSchema`. Every
//! list and call leaves one audit line.
//!
//! Refusals are JSON-RPC errors with stable codes (see [`codes`]); a refused call's `data` is
//! the `error` object of the 403 envelope, violations included.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, ErrorCode, ErrorData, Implementation, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ProgressToken, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext};
use rmcp::{RoleServer, ServerHandler};
use serde_json::json;
use toolgate_plugin::{
    DeclaredTool, ExchangeMeta, Parsed, Rejection, ToolCall, ToolRequest, ToolResponse, Violation,
    WireFormat,
};

use super::backend::{Backend, CallFailure, Connection, ProgressRelay};
use super::names::{RequestedTool, parse_requested};
use super::services::McpEndpoint;
use super::{Caller, Policy};
use crate::config::Config;
use crate::error::ErrorReport;
use crate::exchange::Exchange;
use crate::pipeline::StageOutcome;
use crate::router::Route;
use crate::state::GatewayState;
use crate::telemetry::McpAudit;

/// toolgate's JSON-RPC error codes (the server-defined range), stable for programs.
pub mod codes {
    /// A guardrail refused the call (policy, schema, a plugin): `data` has the violations.
    pub const TOOL_CALL_BLOCKED: i32 = -32001;
    /// The backend server is not connected (starting, restarting after a failure).
    pub const BACKEND_UNAVAILABLE: i32 = -32002;
    /// The backend did not answer within its `call_timeout_ms`.
    pub const BACKEND_TIMEOUT: i32 = -32003;
    /// The backend's answer broke its own `outputSchema`, or was not an MCP result.
    pub const INVALID_TOOL_RESULT: i32 = -32004;
    /// The caller is not who it claims (no tenant key, or an agent its tenant does not hold).
    pub const UNAUTHORIZED: i32 = -32005;
    /// The caller cancelled the call (`notifications/cancelled`); the backend was told too.
    /// The caller ignores the answer, as MCP says; the audit line keeps it.
    pub const CANCELLED: i32 = -32006;
}

/// What the HTTP side hands the MCP server with each request, in the request's extensions.
#[derive(Clone)]
pub struct RequestScope {
    pub state: Arc<GatewayState>,
    pub config: Arc<Config>,
    pub route: Arc<Route>,
    pub meta: ExchangeMeta,
    pub headers: HeaderMap,
    pub caller: Caller,
}

fn scope_of(extensions: &rmcp::model::Extensions) -> Result<RequestScope, ErrorData> {
    extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<RequestScope>())
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("the request reached MCP without its scope", None))
}

impl ServerHandler for McpEndpoint {
    fn get_info(&self) -> ServerConfig {
        let mut info = InitializeResult::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        );
        info.server_info = Implementation::new("toolgate", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Ok(scope) = scope_of(&context.extensions) {
            scope.state.mcp.register_session(context.peer.clone());
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let scope = scope_of(&context.extensions)?;
        let listing = list_tools(&scope);
        match crate::panics::contained(&scope.meta.request_id, listing).await {
            Some(result) => result,
            None => Err(close_panicked(&scope, "tools/list", None).await),
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let scope = scope_of(&context.extensions)?;
        let call_id = request_id_text(&context.id);
        // rmcp leaves a call's `_meta` in its params; its context's meta is the transport's.
        let progress = (request.meta.as_ref())
            .and_then(|meta| meta.get_progress_token())
            .or_else(|| context.meta.get_progress_token());
        let session = Session {
            peer: &context.peer,
            progress,
        };
        // Kept apart for the record of a call that panics, which cannot record itself.
        let called = ToolCall::function(
            Some(call_id.clone()),
            request.name.to_string(),
            String::new(),
        );
        let calling = call_tool(&scope, request, call_id, session, context.ct.cancelled());
        match crate::panics::contained(&scope.meta.request_id, calling).await {
            Some(result) => result.map(CallToolResponse::from),
            None => Err(close_panicked(&scope, "tools/call", Some(called)).await),
        }
    }
}

/// The JSON-RPC error of a request whose handling panicked. Its exchange went with the panic;
/// one is closed in its place as failed, so the request is audited and counted all the same
/// (with the tool called, when it was a call; its server is not known).
async fn close_panicked(
    scope: &RequestScope,
    method: &'static str,
    called: Option<ToolCall>,
) -> ErrorData {
    let error = ErrorData::internal_error(
        crate::panics::PANICKED,
        Some(json!({"code": "internal_error", "request_id": scope.meta.request_id})),
    );
    let mut exchange = open_exchange(scope, method);
    if let Some(called) = called {
        exchange.record_checked_call(called);
    }
    close(exchange, scope, Some(&error)).await;
    error
}

fn request_id_text(id: &rmcp::model::RequestId) -> String {
    match serde_json::to_value(id) {
        Ok(serde_json::Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// The caller's side of a call: its session, to ask it (confirmation) and tell it (progress).
struct Session<'a> {
    peer: &'a Peer<RoleServer>,
    progress: Option<ProgressToken>,
}

fn policy_of(scope: &RequestScope) -> &Policy {
    &scope.config.mcp.policy
}

/// How long a person has to confirm a call.
const CONFIRMATION_TIMEOUT: Duration = Duration::from_secs(120);

/// Asks the caller's client (MCP elicitation) whether a person confirms `call`, showing its
/// tool and arguments. Anything but an explicit yes — a decline, a cancel, no answer in time,
/// a client that cannot ask — refuses the call, and nothing is forwarded.
async fn confirm(session: &Peer<RoleServer>, call: &ToolCall) -> Result<(), Box<Violation>> {
    let refusal = |code: &str, message: String| {
        Box::new(Violation::on_call(
            toolgate_plugin::Check::Permission,
            code,
            call,
            message,
        ))
    };
    let can_ask = session
        .peer_info()
        .is_some_and(|client| client.capabilities.elicitation.is_some());
    if !can_ask {
        return Err(refusal(
            "confirmation_unavailable",
            format!(
                "'{}' needs a person's confirmation, and this client cannot ask for it (no MCP elicitation)",
                call.name
            ),
        ));
    }
    let schema = ElicitationSchema::builder()
        .required_bool("confirm")
        .build()
        .map_err(|problem| refusal("confirmation_unavailable", problem.to_owned()))?;
    let question = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "toolgate: allow the call to '{}' with these arguments?\n{}",
            call.name, call.arguments
        ),
        requested_schema: schema,
    };
    let declined = |how: &str| {
        refusal(
            "confirmation_declined",
            format!("the call to '{}' was not confirmed ({how})", call.name),
        )
    };
    match session
        .create_elicitation_with_timeout(question, Some(CONFIRMATION_TIMEOUT))
        .await
    {
        Ok(answer) if answer.action == ElicitationAction::Accept => {
            let confirmed = (answer.content.as_ref())
                .and_then(|content| content.get("confirm"))
                .and_then(serde_json::Value::as_bool);
            match confirmed {
                Some(true) => Ok(()),
                _ => Err(declined("answered no")),
            }
        }
        Ok(answer) => Err(declined(match answer.action {
            ElicitationAction::Decline => "declined",
            _ => "cancelled",
        })),
        Err(error) => Err(declined(&format!("no answer: {error}"))),
    }
}

/// One tool the caller is offered: where it lives and how it is named.
struct Offer {
    server: String,
    backend: Arc<Backend>,
    connection: Arc<Connection>,
    index: usize,
}

impl Offer {
    fn tool(&self) -> &super::backend::BackendTool {
        &self.connection.tools[self.index]
    }

    fn declared(&self) -> Option<&DeclaredTool> {
        self.tool().declared.as_ref()
    }
}

/// Every tool of every connected backend that the policy lets the caller see.
fn offers(scope: &RequestScope) -> Vec<Offer> {
    let policy = &scope.config.mcp.policy;
    let mut offers = Vec::new();
    for (server, backend) in scope.state.mcp.backends().iter() {
        if !policy.allows_server(&scope.caller, server) {
            continue;
        }
        let Some(connection) = backend.connection() else {
            continue;
        };
        for (index, tool) in connection.tools.iter().enumerate() {
            if tool.declared.is_some() && policy.allows_tool(&scope.caller, server, &tool.tool.name)
            {
                offers.push(Offer {
                    server: server.clone(),
                    backend: backend.clone(),
                    connection: connection.clone(),
                    index,
                });
            }
        }
    }
    offers
}

/// One MCP request's exchange: the caller is offered its tools as an LLM client declares them.
fn open_exchange(scope: &RequestScope, method: &'static str) -> Exchange {
    let mut exchange = Exchange::new(
        scope.meta.clone(),
        scope.route.clone(),
        scope.headers.clone(),
        Instant::now(),
    );
    exchange.audit_as_mcp(McpAudit {
        method,
        server: None,
        error_code: None,
        tool_error: false,
        outcome: "ok",
    });
    exchange
}

/// Runs the route's `pre_request` with `offers` as the declared tools; what a plugin removed
/// is no longer in the exchange's request.
async fn screen(exchange: &mut Exchange, offers: &[Offer]) -> StageOutcome {
    let declared = offers
        .iter()
        .filter_map(|offer| offer.declared().cloned())
        .collect();
    let format = exchange.format();
    exchange.request_read(
        format,
        Parsed::Parsed(ToolRequest::from_declared_tools(declared)),
    );
    exchange.pre_request(&mut Bytes::new()).await
}

/// Closes an MCP exchange with the JSON-RPC error its caller got, if any.
async fn close(mut exchange: Exchange, scope: &RequestScope, error: Option<&ErrorData>) {
    let error_code = error.map(|error| error.code.0);
    match error_code {
        Some(codes::TOOL_CALL_BLOCKED) => exchange.record_block_without_violations(),
        Some(_) => exchange.record_failure(),
        None => {}
    }
    if let Some(mcp) = exchange.mcp_audit() {
        mcp.error_code = error_code;
        mcp.outcome = match error_code {
            None if mcp.tool_error => "tool_error",
            None => "ok",
            Some(codes::TOOL_CALL_BLOCKED) => "blocked",
            Some(codes::INVALID_TOOL_RESULT) => "invalid_result",
            Some(codes::BACKEND_UNAVAILABLE) => "unavailable",
            Some(codes::BACKEND_TIMEOUT) => "timeout",
            Some(codes::CANCELLED) => "cancelled",
            Some(_) => "failed",
        };
    }
    exchange.finish(&scope.state, StatusCode::OK).await;
}

/// Refuses with `rejection`, recorded on the exchange.
fn refuse(exchange: &mut Exchange, scope: &RequestScope, rejection: &Rejection) -> ErrorData {
    exchange.record_block(rejection);
    blocked(scope, rejection)
}

async fn list_tools(scope: &RequestScope) -> Result<ListToolsResult, ErrorData> {
    let mut exchange = open_exchange(scope, "tools/list");
    let result = list_tools_checked(scope, &mut exchange).await;
    close(exchange, scope, result.as_ref().err()).await;
    result
}

async fn list_tools_checked(
    scope: &RequestScope,
    exchange: &mut Exchange,
) -> Result<ListToolsResult, ErrorData> {
    let offers = offers(scope);
    let outcome = screen(exchange, &offers).await;
    if let Some(rejection) = outcome.blocked {
        return Err(blocked(scope, &rejection));
    }
    let kept = |name: &str| {
        exchange
            .request()
            .as_parsed()
            .is_some_and(|request| request.declared_tool(name).is_some())
    };
    let mut tools: Vec<Tool> = Vec::new();
    for offer in &offers {
        let backend_tool = offer.tool();
        let Some(qualified) = backend_tool.qualified.as_deref() else {
            continue;
        };
        if kept(qualified) {
            let mut tool = backend_tool.tool.clone();
            tool.name = qualified.to_owned().into();
            tools.push(tool);
        }
    }
    Ok(ListToolsResult::with_all_items(tools))
}

/// Checks and forwards one call. A caller's `notifications/cancelled` (`cancelled`) ends it
/// where it is: a call not yet forwarded never is, one in flight is cancelled at the backend.
async fn call_tool(
    scope: &RequestScope,
    request: CallToolRequestParams,
    call_id: String,
    session: Session<'_>,
    cancelled: impl Future<Output = ()>,
) -> Result<CallToolResult, ErrorData> {
    let mut exchange = open_exchange(scope, "tools/call");
    let result = tokio::select! {
        result = call_tool_checked(scope, request, call_id, session, &mut exchange) => result,
        () = cancelled => Err(ErrorData::new(
            ErrorCode(codes::CANCELLED),
            "the caller cancelled the call",
            None,
        )),
    };
    close(exchange, scope, result.as_ref().err()).await;
    result
}

/// A `tools/call` through every check the route makes, before anything runs: the name
/// resolved to an offered tool, its arguments against the tool's schema, the request and
/// response stages of the plugins. Gives the tool, the call as the plugins left it, and the
/// arguments the backend gets.
async fn check_call<'o>(
    scope: &RequestScope,
    offers: &'o [Offer],
    request: CallToolRequestParams,
    call_id: String,
    exchange: &mut Exchange,
) -> Result<CheckedCall<'o>, ErrorData> {
    let offer = match resolve(scope, offers, &request.name) {
        Ok(offer) => offer,
        Err(Refusal::Blocked(violation)) => {
            exchange.record_checked_call(ToolCall::function(
                Some(call_id),
                request.name.to_string(),
                String::new(),
            ));
            let rejection = Rejection::forbidden(vec![*violation]);
            return Err(refuse(exchange, scope, &rejection));
        }
        Err(Refusal::Other { server, error }) => {
            set_server(exchange, server);
            return Err(error);
        }
    };
    set_server(exchange, Some(offer.server.clone()));
    let declared = offer
        .declared()
        .cloned()
        .ok_or_else(|| ErrorData::internal_error("an offered tool has no qualified name", None))?;
    let arguments_text = match &request.arguments {
        Some(arguments) => serde_json::to_string(arguments)
            .map_err(|error| ErrorData::invalid_params(error.to_string(), None))?,
        None => "{}".to_owned(),
    };
    let call = ToolCall::function(Some(call_id), declared.name.clone(), arguments_text);

    let checker = scope.state.plugins.schema_checker();
    let violations = checker.check_arguments(&declared, &call);
    if !violations.is_empty() {
        exchange.record_checked_call(call);
        return Err(refuse(exchange, scope, &Rejection::forbidden(violations)));
    }

    // The request stage sees every tool the caller is offered, as on an LLM route; a plugin
    // that hides the called tool refuses the call.
    let outcome = screen(exchange, offers).await;
    if let Some(rejection) = outcome.blocked {
        exchange.record_checked_call(call);
        return Err(blocked(scope, &rejection));
    }
    let offered = exchange
        .request()
        .as_parsed()
        .is_some_and(|request| request.declared_tool(&call.name).is_some());
    if !offered {
        let rejection = Rejection::forbidden(vec![Violation::on_call(
            toolgate_plugin::Check::Membership,
            "tool_not_permitted",
            &call,
            format!("'{}' is not offered to this caller", call.name),
        )]);
        exchange.record_checked_call(call);
        return Err(refuse(exchange, scope, &rejection));
    }
    let response = Parsed::Parsed(ToolResponse::from_calls(vec![call.clone()]));
    let outcome = exchange.pre_response(&response, StatusCode::OK).await;
    if let Some(rejection) = outcome.blocked {
        return Err(blocked(scope, &rejection));
    }
    // What the plugins changed (a redacted value) is what the backend gets.
    let mut call = call;
    toolgate_formats::edits::replace_arguments(
        std::slice::from_mut(&mut call),
        &outcome.response_edits,
    );
    let arguments = if outcome.response_edits.is_empty() {
        request.arguments
    } else {
        Some(
            serde_json::from_str::<rmcp::model::JsonObject>(&call.arguments).map_err(|error| {
                ErrorData::internal_error(
                    format!("the plugins' edit of the arguments is not an object: {error}"),
                    None,
                )
            })?,
        )
    };
    Ok(CheckedCall {
        offer,
        call,
        arguments,
    })
}

/// A call every check passed, ready for its backend.
struct CheckedCall<'o> {
    offer: &'o Offer,
    call: ToolCall,
    arguments: Option<rmcp::model::JsonObject>,
}

/// One call, checked, confirmed by a person where its policy asks, run on its backend, and its
/// result held to the tool's output schema.
async fn call_tool_checked(
    scope: &RequestScope,
    request: CallToolRequestParams,
    call_id: String,
    session: Session<'_>,
    exchange: &mut Exchange,
) -> Result<CallToolResult, ErrorData> {
    let offers = offers(scope);
    let CheckedCall {
        offer,
        call,
        arguments,
    } = check_call(scope, &offers, request, call_id, exchange).await?;
    let checker = scope.state.plugins.schema_checker();
    let backend_tool = offer.tool().tool.name.as_ref();
    if policy_of(scope).needs_confirmation(&scope.caller, &offer.server, backend_tool)
        && let Err(violation) = confirm(session.peer, &call).await
    {
        exchange.record_checked_call(call);
        let rejection = Rejection::forbidden(vec![*violation]);
        return Err(refuse(exchange, scope, &rejection));
    }
    let progress = session.progress.map(|token| ProgressRelay {
        session: session.peer.clone(),
        token,
    });

    let backend_started = Instant::now();
    let answer = offer
        .backend
        .call(&offer.tool().tool.name, arguments, progress)
        .await;
    exchange.upstream_took(backend_started.elapsed());
    let result = answer.map_err(|failure| backend_failure(&offer.server, failure))?;
    exchange.executed(call.clone());
    let tool_error = result.is_error == Some(true);
    if let Some(mcp) = exchange.mcp_audit() {
        mcp.tool_error = tool_error;
    }
    if !tool_error
        && let (Some(schema), Some(structured)) =
            (&offer.tool().output_schema, &result.structured_content)
    {
        let violations = checker.check_result(&call, schema, structured);
        if !violations.is_empty() {
            exchange.record_result_violations(&violations);
            return Err(invalid_result(scope, violations));
        }
    }
    // Delivered: accounting (`post_response`) sees it when the exchange closes.
    exchange.deliver(vec![call], &[]).await;
    Ok(result)
}

fn set_server(exchange: &mut Exchange, server: Option<String>) {
    if let Some(mcp) = exchange.mcp_audit() {
        mcp.server = server;
    }
}

/// Why a requested name led to no offered tool.
enum Refusal {
    Blocked(Box<Violation>),
    Other {
        server: Option<String>,
        error: ErrorData,
    },
}

/// Finds the offered tool a requested name means: `server__tool`, `server:tool`, or a bare
/// name that exactly one offered server has.
fn resolve<'a>(
    scope: &RequestScope,
    offers: &'a [Offer],
    name: &str,
) -> Result<&'a Offer, Refusal> {
    let backends = scope.state.mcp.backends();
    let policy: &Policy = &scope.config.mcp.policy;
    let violation = |code: &str, message: String| {
        let mut violation = Violation::new(
            if code == "unknown_tool" {
                toolgate_plugin::Check::Membership
            } else {
                toolgate_plugin::Check::Permission
            },
            code,
            message,
        );
        violation.tool = Some(name.to_owned());
        Refusal::Blocked(Box::new(violation))
    };
    match parse_requested(name, |server| backends.contains_key(server)) {
        RequestedTool::Qualified { server, tool } => {
            if let Some(offer) = offers
                .iter()
                .find(|offer| offer.server == server && offer.tool().tool.name == tool)
            {
                return Ok(offer);
            }
            let Some(backend) = backends.get(server) else {
                return Err(violation(
                    "unknown_tool",
                    format!("'{name}' names no MCP server toolgate knows ('{server}')"),
                ));
            };
            if !policy.allows_tool(&scope.caller, server, tool) {
                return Err(violation(
                    "tool_not_permitted",
                    format!("'{name}' is not a tool this caller may use"),
                ));
            }
            match backend.connection() {
                None => Err(Refusal::Other {
                    server: Some(server.to_owned()),
                    error: unavailable(server, backend.status().last_error),
                }),
                Some(_) => Err(violation(
                    "unknown_tool",
                    format!("MCP server '{server}' has no tool '{tool}'"),
                )),
            }
        }
        RequestedTool::Bare(tool) => {
            let matches: Vec<&Offer> = offers
                .iter()
                .filter(|offer| offer.tool().tool.name == tool)
                .collect();
            match matches.as_slice() {
                [offer] => Ok(offer),
                [] => {
                    let elsewhere = backends.values().any(|backend| {
                        backend.connection().is_some_and(|connection| {
                            connection.tools.iter().any(|known| known.tool.name == tool)
                        })
                    });
                    if elsewhere {
                        Err(violation(
                            "tool_not_permitted",
                            format!("'{name}' is not a tool this caller may use"),
                        ))
                    } else {
                        Err(violation(
                            "unknown_tool",
                            format!("no MCP server offers a tool '{name}' to this caller"),
                        ))
                    }
                }
                several => {
                    let candidates: Vec<&str> = several
                        .iter()
                        .filter_map(|offer| offer.tool().qualified.as_deref())
                        .collect();
                    Err(Refusal::Other {
                        server: None,
                        error: ErrorData::invalid_params(
                            format!(
                                "'{name}' is ambiguous: it is {}; call one of them by its qualified name",
                                candidates.join(" and ")
                            ),
                            Some(json!({"code": "ambiguous_tool", "candidates": candidates})),
                        ),
                    })
                }
            }
        }
    }
}

/// A refused call: the 403 envelope's `error` object is the `data`.
fn blocked(scope: &RequestScope, rejection: &Rejection) -> ErrorData {
    let report = ErrorReport::of_rejection(rejection, &scope.meta.request_id);
    let data = report.body(WireFormat::ChatCompletions)["error"].take();
    ErrorData::new(
        ErrorCode(codes::TOOL_CALL_BLOCKED),
        report.message.clone(),
        Some(data),
    )
}

fn invalid_result(scope: &RequestScope, violations: Vec<Violation>) -> ErrorData {
    let rejection = Rejection::forbidden(violations)
        .with_status(StatusCode::BAD_GATEWAY, "invalid_tool_result");
    let report = ErrorReport::of_rejection(&rejection, &scope.meta.request_id);
    let data = report.body(WireFormat::ChatCompletions)["error"].take();
    ErrorData::new(
        ErrorCode(codes::INVALID_TOOL_RESULT),
        format!("the tool's result was withheld: {}", report.message),
        Some(data),
    )
}

fn unavailable(server: &str, last_error: Option<String>) -> ErrorData {
    ErrorData::new(
        ErrorCode(codes::BACKEND_UNAVAILABLE),
        format!("MCP server '{server}' is not available right now"),
        Some(json!({"code": "backend_unavailable", "server": server, "last_error": last_error})),
    )
}

fn backend_failure(server: &str, failure: CallFailure) -> ErrorData {
    match failure {
        CallFailure::Unavailable(last_error) => unavailable(server, last_error),
        CallFailure::TimedOut(timeout) => ErrorData::new(
            ErrorCode(codes::BACKEND_TIMEOUT),
            format!(
                "MCP server '{server}' did not answer within {} ms",
                timeout.as_millis()
            ),
            Some(json!({"code": "backend_timeout", "server": server})),
        ),
        // The backend's own refusal (unknown tool, invalid params …) is its answer to give.
        CallFailure::Refused(error) => error,
        CallFailure::Lost(reason) => ErrorData::new(
            ErrorCode(codes::BACKEND_UNAVAILABLE),
            format!("MCP server '{server}' went away during the call: {reason}"),
            Some(json!({"code": "backend_lost", "server": server})),
        ),
        CallFailure::Broken(reason) => ErrorData::new(
            ErrorCode(codes::INVALID_TOOL_RESULT),
            format!("MCP server '{server}' gave no usable answer: {reason}"),
            Some(json!({"code": "backend_failed", "server": server})),
        ),
    }
}
