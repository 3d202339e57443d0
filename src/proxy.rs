//! The request path: match a route, read the request only if a plugin needs it, run
//! `pre_request`, forward, and either pass the answer through, buffer and check it, or hand a
//! stream to the stream guard. An allowed body is forwarded as the bytes the upstream sent.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Request, Response, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use toolgate_plugin::{
    DeclaredToolsCache, ExchangeMeta, Parsed, Rejection, ToolCall, ToolRequest, WireFormat,
};

use crate::body::{self, ProxyBody, collect_limited};
use crate::config::{Config, ServerConfig};
use crate::connections::DrainSignal;
use crate::error::GatewayError;
use crate::exchange::{AfterBlock, Discovered, Exchange, forwarded_path_and_query, path_and_query};
use crate::on_block::{OnBlock, ResendHead, RetryOutcome};
use crate::request_body::ClientBody;
use crate::rounds::{self, Round, Transport};
use crate::router::{Route, RouteKind};
use crate::shutdown::{CutAtGraceEnd, GraceOver};
use crate::state::GatewayState;
use crate::streaming;
use crate::tenants::authenticate;
use crate::upstream::{is_event_stream, strip_hop_by_hop};

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Answers one client request. Never fails: every problem becomes an enveloped answer.
pub async fn handle(
    state: Arc<GatewayState>,
    mut request: Request<Incoming>,
    drain: DrainSignal,
) -> Response<ProxyBody> {
    let started = Instant::now();
    let request_id_header = request_id_for(request.headers());
    // The id as text (logs, error envelopes, the exchange's record): a view of the header value,
    // which holds visible ASCII only.
    let request_id = request_id_header.to_str().unwrap_or_default();
    // Routed on, forwarded and audited from here on: the path as the upstream will read it. A
    // path with no one reading is answered like one with no route, with its own 400.
    let refused = crate::request_path::canonicalize(request.uri_mut()).err();
    let config = state.config.load_full();
    let route = match refused {
        Some(_) => None,
        None => config.router.find(request.uri().path()).cloned(),
    };
    let shape = match &route {
        Some(route) => route.format.resolve(request.uri().path(), None),
        None => WireFormat::from_path(request.uri().path()).unwrap_or(WireFormat::ChatCompletions),
    };
    // Kept apart for the record of an exchange that panics, which cannot record itself.
    let kept_for_panic = route
        .clone()
        .map(|route| (route, request.method().clone(), request.uri().clone()));
    let serving = async {
        match route {
            None => {
                // The operator's first clue to a client with a wrong base URL; the query is
                // left out, as some clients put keys there.
                let error = match &refused {
                    Some(refusal) => {
                        tracing::warn!(request_id = %request_id, reason = %refusal, "400: the request path was refused");
                        GatewayError::path_refused(refusal)
                    }
                    None => {
                        tracing::warn!(
                            request_id = %request_id,
                            method = %request.method(),
                            path = %request.uri().path(),
                            "404: no route for the path"
                        );
                        GatewayError::route_not_found(request.uri().path())
                    }
                };
                let response = error.report(request_id).response(shape);
                state.metrics.record_request(
                    &Arc::from(""),
                    response.status().as_u16(),
                    started.elapsed(),
                );
                response
            }
            Some(route) if matches!(route.kind, RouteKind::Mcp) => {
                // Boxed: inline, the MCP service's future (kilobytes) would size the state of
                // every exchange, LLM ones included, for as long as each waits on its upstream.
                let serving = Box::pin(crate::mcp::endpoint::serve(
                    state.clone(),
                    config.clone(),
                    route,
                    request,
                    request_id.to_owned(),
                    started,
                ));
                serving.await
            }
            Some(route) => {
                let connection = drain.clone();
                serve_llm(
                    &state,
                    &config,
                    route,
                    request,
                    (request_id, &request_id_header),
                    started,
                    connection,
                )
                .await
            }
        }
    };
    let serving = std::pin::pin!(crate::panics::contained(request_id, serving));
    let mut response = match state.grace_over.unless_over(serving, &drain).await {
        Some(Some(response)) => response,
        Some(None) => {
            Box::pin(record_panicked(&state, kept_for_panic, request_id, started)).await;
            GatewayError::internal(crate::panics::PANICKED)
                .report(request_id)
                .response(shape)
        }
        None => {
            // Dropping the exchange drops its upstream request: the client gets an answer it
            // can retry elsewhere, never a dropped connection.
            let mut response = GatewayError::shutting_down()
                .report(request_id)
                .response(shape);
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            response
        }
    };
    // A clone of the one value (a count, not a copy): the serving future still holds the text.
    response
        .headers_mut()
        .insert(REQUEST_ID, request_id_header.clone());
    response
}

/// Records a request whose handling panicked: an exchange on an LLM route is closed as a
/// failed one (counted as a 500, audited where the route audits); any other request is
/// counted, as its handler, which would have counted it, did not get to.
async fn record_panicked(
    state: &Arc<GatewayState>,
    kept: Option<(Arc<Route>, http::Method, http::Uri)>,
    request_id: &str,
    started: Instant,
) {
    match kept {
        Some((route, method, uri)) if !matches!(route.kind, RouteKind::Mcp) => {
            let meta =
                ExchangeMeta::new(request_id, route.path.clone(), method, path_and_query(&uri));
            Exchange::close_panicked(state, meta, route, started, false).await;
        }
        kept => {
            let route = kept.map_or_else(|| Arc::from(""), |(route, ..)| route.path.clone());
            let status = http::StatusCode::INTERNAL_SERVER_ERROR.as_u16();
            state
                .metrics
                .record_request(&route, status, started.elapsed());
        }
    }
}

/// An exchange on an LLM route, up to the client's response head.
///
/// Each stage is awaited as a box bound in its own statement. Inline, or boxed inside the
/// `.await` expression (a temporary that lives to the end of the statement), a stage's future
/// would be part of this state for the exchange's whole wait; boxed apart, only the stage in
/// progress holds memory. Thousands of exchanges waiting on their upstreams add that up.
async fn serve_llm(
    state: &Arc<GatewayState>,
    config: &Config,
    route: Arc<Route>,
    request: Request<Incoming>,
    (request_id, request_id_header): (&str, &HeaderValue),
    started: Instant,
    connection: DrainSignal,
) -> Response<ProxyBody> {
    let meta = ExchangeMeta::new(
        request_id,
        route.path.clone(),
        request.method().clone(),
        path_and_query(request.uri()),
    );
    let auth = route.auth;
    // Only plugins read the request's headers after it has gone upstream.
    let kept_headers = if route.chain.is_empty() {
        HeaderMap::new()
    } else {
        request.headers().clone()
    };
    let mut exchange = Exchange::new(meta, route, kept_headers, started);
    exchange.keep_checked_calls(state.audit.is_enabled());
    exchange.watch_connection(connection);
    if state.captures.mode() != crate::capture::CaptureMode::Off
        && !exchange.route().chain.is_empty()
    {
        exchange.start_capture(state.captures.answer_limit());
    }
    let result = match authenticate(&config.tenants, auth, request.headers()).await {
        Ok(tenant) => {
            exchange.authenticated(tenant);
            let forwarding = Box::pin(forward(
                &mut exchange,
                request,
                request_id_header,
                &config.server,
                &state.grace_over,
                &state.declared_tools,
            ));
            forwarding.await
        }
        Err(failure) => {
            let error = GatewayError::unauthenticated(failure);
            crate::tenants::warn_unauthenticated(
                request_id,
                &exchange.meta().route,
                request.uri().path(),
                error.code,
            );
            Err(error)
        }
    };
    let plugin_headers = exchange.take_response_headers();
    let mut response = match result {
        Ok(Step::Respond(response)) => {
            let finishing = Box::pin(exchange.finish(state, response.status()));
            finishing.await;
            response
        }
        Ok(Step::Stream(parts, body)) => {
            let limit = config.server.max_response_body_bytes;
            let streaming = Box::pin(streaming::guard(
                state.clone(),
                exchange,
                parts,
                body,
                limit,
            ));
            streaming.await
        }
        Err(error) => {
            if error.blame != crate::error::Blame::Client {
                tracing::warn!(request_id = %request_id, code = error.code, message = %error.message, "exchange failed");
            }
            exchange.record_failure();
            let response = error.report(request_id).response(exchange.error_format());
            let finishing = Box::pin(exchange.finish(state, response.status()));
            finishing.await;
            response
        }
    };
    for (name, value) in plugin_headers {
        response.headers_mut().insert(name, value);
    }
    response
}

/// Where `forward` left the exchange: an answer to send, or a guarded stream to start.
enum Step {
    Respond(Response<ProxyBody>),
    Stream(http::response::Parts, Incoming),
}

/// The phases of an exchange on an LLM route, in order. Each either hands the next what it
/// needs or ends the exchange with an answer (a block, an error, a passed-through body).
async fn forward(
    exchange: &mut Exchange,
    request: Request<Incoming>,
    request_id: &HeaderValue,
    server: &ServerConfig,
    grace_over: &GraceOver,
    declared_tools: &DeclaredToolsCache,
) -> Result<Step, GatewayError> {
    let route = exchange.route().clone();
    let Some(upstream) = route.upstream().cloned() else {
        return Err(GatewayError::internal("an MCP route reached the LLM proxy"));
    };
    let (parts, incoming) = request.into_parts();
    let mut headers = parts.headers;
    let client_body = ClientBody::new(incoming, server);
    let client_fault = client_body.fault_record();
    // 1. Read the request (only if a plugin needs it) and run `pre_request`.
    let body =
        match read_and_screen_request(exchange, &mut headers, client_body, declared_tools).await? {
            Screened::Forward(body) => body,
            Screened::Answer(response) => return Ok(Step::Respond(response)),
        };
    // 2. Forward it.
    let head = prepare_upstream_head(exchange, &upstream, &parts.uri, &mut headers)?;
    headers.insert(REQUEST_ID, request_id.clone());
    exchange.went_upstream_as(|| ResendHead {
        method: parts.method.clone(),
        uri: head.clone(),
        headers: headers.clone(),
    });
    let mut upstream_request = Request::new(body);
    *upstream_request.method_mut() = parts.method;
    *upstream_request.uri_mut() = head;
    *upstream_request.version_mut() = Version::HTTP_11;
    *upstream_request.headers_mut() = headers;
    let upstream_started = Instant::now();
    let response = match upstream.send(upstream_request).await {
        Ok(response) => response,
        // The body being forwarded failed on the client's side: the upstream is not to blame.
        Err(error) => match client_fault.get() {
            Some(fault) => return Err(fault.to_error()),
            None => return Err(error.into()),
        },
    };
    exchange.upstream_took(upstream_started.elapsed());
    // 3. and 4., in rounds: a block the route retries sends the conversation upstream again,
    //    with the blocked calls answered; the client gets the first answer that passes.
    let mut answers = WholeAnswers {
        exchange,
        first: Some(response),
        upstream: &upstream,
        server,
        grace_over,
    };
    rounds::run(&mut answers).await
}

/// An exchange's upstream answers as `forward` reads them: whole, each checked before any of it
/// is released; the first may turn out to be a stream, which the stream guard takes on.
struct WholeAnswers<'a> {
    exchange: &'a mut Exchange,
    first: Option<Response<Incoming>>,
    upstream: &'a crate::upstream::Upstream,
    server: &'a ServerConfig,
    grace_over: &'a GraceOver,
}

impl Transport for WholeAnswers<'_> {
    type Answer = Result<Step, GatewayError>;

    fn exchange(&mut self) -> &mut Exchange {
        self.exchange
    }

    async fn read(&mut self, retry: Option<Response<Incoming>>) -> Round<Self::Answer> {
        // An answer in place of a block (not a discovery round's): one that cannot be read
        // gives the client the block.
        let retrying = retry.is_some() && self.exchange.retry_under_way();
        let Some(response) = retry.or_else(|| self.first.take()) else {
            return Round::Answered(Err(GatewayError::internal("an answer read twice")));
        };
        let answered = Box::pin(read_and_check(
            self.exchange,
            response,
            self.upstream,
            self.server,
            self.grace_over,
        ))
        .await;
        let blocked = match answered {
            Ok(Answered::Passed(response)) => {
                self.exchange.settle_retry(RetryOutcome::Passed);
                return Round::Answered(Ok(Step::Respond(response)));
            }
            Ok(Answered::Blocked(blocked)) => blocked,
            Ok(Answered::Discovery(request)) => return Round::Again(request),
            // A retry's answer that is no answer to check (an error status, a cut).
            Ok(Answered::Other(_)) if retrying => return Round::Unusable(None),
            Err(error) if retrying => return Round::Unusable(Some(error)),
            Ok(Answered::Other(step)) => return Round::Answered(Ok(step)),
            Err(error) => return Round::Answered(Err(error)),
        };
        self.exchange.settle_retry(RetryOutcome::Blocked);
        let BlockedAnswer {
            rejection,
            on_block,
            calls,
            usage,
        } = *blocked;
        match self
            .exchange
            .after_block(rejection, on_block, &calls, usage, true)
        {
            AfterBlock::Retry(request) => Round::Again(request),
            after => Round::Answered(
                self.exchange
                    .blocked_answer(after)
                    .map(Step::Respond)
                    .ok_or_else(|| GatewayError::internal("a retry without its request")),
            ),
        }
    }

    async fn answer_block(&mut self, rejection: Rejection) -> Self::Answer {
        Ok(Step::Respond(self.exchange.block_response(&rejection)))
    }

    async fn answer_error(&mut self, error: GatewayError) -> Self::Answer {
        Err(error)
    }
}

/// What an upstream answer came to.
enum Answered {
    /// Checked and released: the client's answer.
    Passed(Response<ProxyBody>),
    /// Blocked by the chain, which may recover from it.
    Blocked(Box<BlockedAnswer>),
    /// Not checked here: passed through, refused by the gateway itself, or a stream.
    Other(Step),
    /// Discovery calls answered by the gateway: this conversation goes upstream again.
    Discovery(Bytes),
}

/// An answer the chain blocked, with what recovering from it needs.
struct BlockedAnswer {
    rejection: Rejection,
    on_block: Option<OnBlock>,
    calls: Vec<ToolCall>,
    usage: Option<serde_json::Value>,
}

/// Steps 3 and 4 of an exchange, for one upstream answer: what no plugin reads, and what is
/// not a success, goes back as it came (but for what would carry the client past the guard);
/// a stream goes to the stream guard; a whole answer is read and checked.
async fn read_and_check(
    exchange: &mut Exchange,
    response: Response<Incoming>,
    upstream: &crate::upstream::Upstream,
    server: &ServerConfig,
    grace_over: &GraceOver,
) -> Result<Answered, GatewayError> {
    let (mut response_parts, response_body) = response.into_parts();
    strip_hop_by_hop(&mut response_parts.headers);
    let guarded = exchange.reads_answers();
    if guarded
        && exchange.closes_on_doubt()
        && let Some(rejection) = unreadable_head(&response_parts)
    {
        exchange.record_block(&rejection);
        return Ok(Answered::Other(Step::Respond(
            exchange.block_response(&rejection),
        )));
    }
    if !guarded || !response_parts.status.is_success() {
        let mut body = body::passthrough(response_body, upstream.read_timeout);
        if is_event_stream(&response_parts.headers) {
            body = CutAtGraceEnd::new(
                body,
                grace_over,
                exchange.format(),
                exchange.meta().request_id.clone(),
            )
            .boxed();
        }
        return Ok(Answered::Other(Step::Respond(Response::from_parts(
            response_parts,
            body,
        ))));
    }
    if is_event_stream(&response_parts.headers) {
        return Ok(Answered::Other(Step::Stream(response_parts, response_body)));
    }
    // Read the answer whole, run `pre_response`, then release it or block. The upstream's time
    // goes on while its body arrives; what is passed through above reads no clock for it.
    let upstream_started = Instant::now();
    let limit = server.max_response_body_bytes;
    // `read_timeout_ms` bounds each silence, as documented, not the whole body: a long answer
    // that keeps arriving is read to its end.
    let body = body::IdleTimeout::new(response_body, upstream.read_timeout);
    let bytes = match collect_limited(body, limit).await {
        Err(error) if error.is::<body::IdleTimeoutError>() => {
            return Err(GatewayError::upstream_timeout("the response body stalled"));
        }
        Err(error) => {
            return Err(GatewayError::upstream_failed(format!(
                "the upstream response was cut: {error}"
            )));
        }
        Ok(None) => return Err(GatewayError::response_too_large(limit)),
        Ok(Some(bytes)) => bytes,
    };
    exchange.upstream_took_more(upstream_started.elapsed());
    check_and_release(exchange, response_parts, bytes).await
}

/// A guarded answer whose head already says toolgate cannot check what the client will read:
/// a body compressed in spite of `accept-encoding: identity` (the client decompresses it, the
/// guard would read noise), or a redirect (the client would fetch its answer past the guard).
fn unreadable_head(parts: &http::response::Parts) -> Option<Rejection> {
    let reason = if parts.status.is_redirection() && parts.headers.contains_key(header::LOCATION) {
        "the upstream answered with a redirect, which the client would follow past the guard"
            .to_owned()
    } else {
        let encoding = parts.headers.get(header::CONTENT_ENCODING)?;
        if !parts.status.is_success() || encoding.as_bytes().eq_ignore_ascii_case(b"identity") {
            return None;
        }
        format!(
            "the upstream's answer is compressed ({}) although toolgate asked for it plain",
            String::from_utf8_lossy(encoding.as_bytes())
        )
    };
    Some(GatewayError::unreadable_response(
        &toolgate_plugin::ParseError::unreadable(reason),
    ))
}

/// What the request phase decided.
enum Screened {
    /// Forward this body upstream.
    Forward(ProxyBody),
    /// Answer the client now (a block).
    Answer(Response<ProxyBody>),
}

/// Reads the request when a plugin needs it, refuses what cannot be checked unambiguously,
/// runs `pre_request` and applies its header edits; the body to forward is the client's own
/// bytes unless an edit or the `toolgate` object changed them.
async fn read_and_screen_request(
    exchange: &mut Exchange,
    headers: &mut HeaderMap,
    client_body: ClientBody<Incoming>,
    declared_tools: &DeclaredToolsCache,
) -> Result<Screened, GatewayError> {
    let route = exchange.route().clone();
    // A body announced too large is refused before the upstream is bothered; one that grows
    // too large on the way fails the forward, answered as the client's fault.
    if let Some(fault) = client_body.announced_too_large() {
        return Err(fault.to_error());
    }
    if route.chain.is_empty() {
        return Ok(Screened::Forward(forwarded(client_body)));
    }
    let needs = route.chain.body_needs();
    let mut bytes = Bytes::new();
    let untouched = if needs.request || needs.response {
        bytes = client_body
            .read_whole()
            .await
            .map_err(|fault| fault.to_error())?;
        exchange.capture_request(&bytes);
        let target = &exchange.meta().path_and_query;
        let path = target.split('?').next().unwrap_or_default();
        let format = route.format.resolve(path, Some(&bytes));
        let request = parse_request(format, headers, &bytes, target, declared_tools);
        exchange.request_read(format, request);
        match exchange.request() {
            Parsed::Unparsable(error) if error.is_ambiguous() => {
                return Err(GatewayError::ambiguous_request(error));
            }
            // A background answer is fetched later by id, out of this exchange's sight.
            Parsed::Parsed(request) if request.background && needs.response => {
                return Err(GatewayError::background_refused());
            }
            // The object is toolgate's: a malformed one is refused on every route, never
            // forwarded or read as "no directives".
            Parsed::Parsed(request) if request.directives().is_err() => {
                let message = request.directives().err().unwrap_or_default();
                return Err(GatewayError::invalid_directive(message));
            }
            _ => {}
        }
        None
    } else {
        Some(forwarded(client_body))
    };
    let outcome = Box::pin(exchange.pre_request(&mut bytes)).await;
    if let Some(rejection) = outcome.blocked {
        return Ok(Screened::Answer(exchange.block_response(&rejection)));
    }
    for (name, value) in outcome.request_headers {
        headers.insert(name, value);
    }
    if let Parsed::Parsed(request) = exchange.request()
        && request.directives.is_some()
    {
        // The `toolgate` object is for toolgate: upstreams refuse unknown fields.
        match toolgate_formats::format::without_directives(&bytes) {
            Ok(Some(stripped)) => bytes = stripped,
            Ok(None) => {}
            Err(error) => {
                return Err(GatewayError::bad_request(format!(
                    "the request body could not be rewritten: {error}"
                )));
            }
        }
    }
    if untouched.is_none() {
        // Boxed only where a route discloses: the state of the open is no part of every
        // exchange's.
        if route.chain.disclosure().is_some()
            && let Err(rejection) = Box::pin(exchange.disclose(&mut bytes)).await
        {
            exchange.record_block(&rejection);
            return Ok(Screened::Answer(exchange.block_response(&rejection)));
        }
        if route.chain.recovers() || exchange.discloses() {
            exchange.recover_from(bytes.clone());
        }
    }
    Ok(Screened::Forward(
        untouched.unwrap_or_else(|| body::full(bytes)),
    ))
}

/// The client's body as it goes upstream untouched: its limits are its own, its frames gathered
/// in bursts as every passed-through body's are.
fn forwarded(client_body: ClientBody<Incoming>) -> ProxyBody {
    body::Coalesce::new(client_body).boxed()
}

/// The upstream's URI for this exchange, and the request headers as the upstream gets them:
/// no hop-by-hop headers, no tenant key, the upstream's own credentials (the caller adds the
/// request id).
fn prepare_upstream_head(
    exchange: &Exchange,
    upstream: &crate::upstream::Upstream,
    client_uri: &http::Uri,
    headers: &mut HeaderMap,
) -> Result<http::Uri, GatewayError> {
    let uri = upstream
        .uri_for(&forwarded_path_and_query(client_uri))
        .map_err(|error| {
            GatewayError::bad_request(format!("the request path cannot be forwarded: {error}"))
        })?;
    let tenant = exchange.meta().tenant.as_ref();
    upstream.prepare_headers(
        headers,
        exchange.format(),
        tenant.map(|tenant| tenant.name.as_str()),
    );
    if exchange.reads_answers() {
        // A compressed answer could not be inspected: ask for it plain.
        headers.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_static("identity"),
        );
    }
    Ok(uri)
}

/// A whole answer: read as a guard must, judged by `pre_response`, then released as the
/// upstream's bytes (rewritten only when a check edited a call, or when earlier blocked
/// attempts' usage is added to it) or handed back blocked.
async fn check_and_release(
    exchange: &mut Exchange,
    mut response_parts: http::response::Parts,
    bytes: Bytes,
) -> Result<Answered, GatewayError> {
    exchange.capture_answer(&bytes);
    let response_view = match exchange.read_answer(&bytes) {
        Ok(view) => view,
        Err(rejection) => {
            exchange.record_block(&rejection);
            return Ok(Answered::Other(Step::Respond(
                exchange.block_response(&rejection),
            )));
        }
    };
    if let Parsed::Parsed(view) = &response_view
        && exchange.discloses()
    {
        let usage = toolgate_formats::on_block::answer_usage(&bytes);
        match Box::pin(exchange.discovery_round(&view.calls, usage.clone(), true)).await {
            Some(Discovered::Again(request)) => return Ok(Answered::Discovery(request)),
            Some(Discovered::Refused(rejection, on_block)) => {
                exchange.record_block(&rejection);
                return Ok(Answered::Blocked(Box::new(BlockedAnswer {
                    rejection,
                    on_block,
                    calls: view.calls.clone(),
                    usage,
                })));
            }
            None => {}
        }
    }
    let outcome = Box::pin(exchange.pre_response(&response_view, response_parts.status)).await;
    if let Some(rejection) = outcome.blocked {
        let calls = match response_view {
            Parsed::Parsed(parsed) => parsed.calls,
            _ => Vec::new(),
        };
        return Ok(Answered::Blocked(Box::new(BlockedAnswer {
            rejection,
            on_block: outcome.on_block,
            calls,
            usage: toolgate_formats::on_block::answer_usage(&bytes),
        })));
    }
    let mut bytes = bytes;
    if !outcome.response_edits.is_empty() {
        match exchange
            .format()
            .apply_response_edits(&bytes, &outcome.response_edits)
        {
            Ok(Some(edited)) => {
                bytes = edited;
                response_parts.headers.remove(header::CONTENT_LENGTH);
            }
            Ok(None) => {
                tracing::warn!(request_id = %exchange.meta().request_id, "a response edit named no call of the answer");
            }
            // An edit that cannot be made (a redaction) must not let the original through.
            Err(error) => {
                return Err(GatewayError::internal(format!(
                    "a plugin's edit of the answer could not be applied: {error}"
                )));
            }
        }
    }
    // The client is billed for every attempt: the blocked ones' usage joins this answer's.
    if let Some(earlier) = exchange.blocked_usage()
        && let Ok(Some(summed)) = toolgate_formats::on_block::with_added_usage(&bytes, earlier)
    {
        bytes = summed;
        response_parts.headers.remove(header::CONTENT_LENGTH);
    }
    if let Parsed::Parsed(parsed) = response_view {
        Box::pin(exchange.deliver(parsed.calls, &outcome.response_edits)).await;
    }
    Ok(Answered::Passed(Response::from_parts(
        response_parts,
        body::full(bytes),
    )))
}

/// `target` is the request's path and query: a format may name the model or the stream there.
fn parse_request(
    format: WireFormat,
    headers: &HeaderMap,
    bytes: &Bytes,
    target: &str,
    declared_tools: &DeclaredToolsCache,
) -> Parsed<ToolRequest> {
    let encoded = headers
        .get(header::CONTENT_ENCODING)
        .is_some_and(|encoding| !encoding.as_bytes().eq_ignore_ascii_case(b"identity"));
    if encoded {
        return Parsed::Unparsable(toolgate_plugin::ParseError::new(
            "compressed request bodies are not inspected",
        ));
    }
    match format.parse_request_cached(bytes.clone(), declared_tools) {
        Ok(mut parsed) => {
            format.read_target(&mut parsed, target);
            Parsed::Parsed(parsed)
        }
        Err(error) => Parsed::Unparsable(error),
    }
}

/// The client's `x-request-id` when it is a sane token (its own value, not copied), else a new
/// one: written once, the value the upstream's request and the answer both carry.
fn request_id_for(headers: &HeaderMap) -> HeaderValue {
    let sane = |value: &&HeaderValue| {
        let id = value.as_bytes();
        !id.is_empty() && id.len() <= 128 && id.iter().all(u8::is_ascii_graphic)
    };
    if let Some(value) = headers.get(REQUEST_ID).filter(sane) {
        return value.clone();
    }
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    uuid::Uuid::new_v4().hyphenated().encode_lower(&mut text);
    // One allocation that every clone shares (`HeaderValue::from_str` would copy, and its
    // clones copy again); a hyphenated UUID is always a valid value.
    HeaderValue::from_maybe_shared(Bytes::from_owner(text))
        .unwrap_or_else(|_| HeaderValue::from_static("unknown"))
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::server::{Gateway, Runtime};

    const GUARDED: &str = "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\n\n\
        [upstreams.llm]\nurl = \"http://127.0.0.1:9\"\n\n[audit]\noutput = \"off\"\n\n\
        [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\n\
        [[routes.plugins]]\nname = \"tool_selection\"\n";

    /// An exchange's state is allocated per request and held until the answer's head is out:
    /// for a non-streamed answer, the model's whole generation; for a stream, until its first
    /// event. Thousands of waiting exchanges multiply it. It was 8 KB while the MCP branch's
    /// future sat inline in every exchange; the bound leaves room for compiler changes.
    #[tokio::test]
    async fn an_exchange_keeps_little_state_while_it_waits() {
        let runtime = Runtime::new();
        let config = Config::from_toml(GUARDED, "test.toml", &runtime.plugins)
            .expect("the test config loads");
        let gateway = Gateway::bind(config, runtime)
            .await
            .expect("binds loopback ports");
        let state = gateway.state();

        // hyper makes the `Request<Incoming>` that `handle` takes; the exchange is measured,
        // never run, and the client gets an empty answer.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let address = listener.local_addr().expect("bound");
        let (sizes, mut measured) = tokio::sync::mpsc::unbounded_channel();
        let registered = crate::connections::Connections::new().register();
        let drain = DrainSignal::of(&registered);
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.expect("accepts");
            let service = service_fn(move |request| {
                let exchange = handle(state.clone(), request, drain.clone());
                let _ = sizes.send(std::mem::size_of_val(&exchange));
                async { Ok::<_, Infallible>(Response::new(body::empty())) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        let mut client = TcpStream::connect(address).await.expect("connects");
        client
            .write_all(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: gateway\r\n\
                  content-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            )
            .await
            .expect("sends");
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.expect("reads");
        assert!(
            answer.starts_with(b"HTTP/1.1 200"),
            "the test server answered"
        );
        server.await.expect("the test server ends");

        let size = measured.recv().await.expect("the exchange was measured");
        assert!(
            size <= 4096,
            "an exchange's state is {size} bytes: a stage's future is inline again"
        );
    }
}
