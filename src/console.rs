//! The operator's console on the admin listener: `/console` (a page, its script and style,
//! shipped inside the binary under a strict Content-Security-Policy) and its APIs — the recent
//! exchanges from the audit ring, live as server-sent events; one exchange with its capture; a
//! replay with the running configuration; the route table and health. Access: on a loopback
//! admin listener anyone local may look; with `[server] admin_token` every API (and
//! `/captures`, and `/metrics` with `protect_metrics`) asks for the token, as a bearer header
//! or the cookie the login form sets; off loopback without a token they are refused. A request
//! that changes anything must come from the console's own origin.

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::broadcast;

use crate::body::{ProxyBody, full, json};
use crate::state::GatewayState;

const PAGE: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/app.js");
const STYLE: &str = include_str!("console/app.css");

/// Nothing but this listener: no inline script or style, no framing, no other origin.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
     img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The cookie the login form sets: a digest of the token, never the token itself.
const COOKIE: &str = "toolgate_admin";

/// Whether a request may read (or change) what the admin listener guards.
pub enum Access {
    Allowed,
    Refused(Response<ProxyBody>),
}

fn digest(token: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    digest
        .as_ref()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The access rule of the guarded admin paths.
pub fn access(state: &GatewayState, request: &Request<Incoming>) -> Access {
    let config = state.config.load();
    let Some(token) = config.server.admin_token.as_deref() else {
        let loopback = config
            .server
            .admin_listen
            .is_some_and(|address| address.ip().is_loopback());
        return match loopback {
            true => Access::Allowed,
            false => Access::Refused(refusal(
                StatusCode::FORBIDDEN,
                "the admin listener is not on loopback: set [server] admin_token to use the console and its APIs",
            )),
        };
    };
    let bearer = (request.headers().get(http::header::AUTHORIZATION))
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .is_some_and(|given| same(given.trim().as_bytes(), token.as_bytes()));
    let expected = digest(token);
    let cookie = (request.headers().get_all(http::header::COOKIE).iter())
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .any(|(name, value)| name == COOKIE && same(value.as_bytes(), expected.as_bytes()));
    match bearer || cookie {
        true => Access::Allowed,
        false => Access::Refused(refusal(
            StatusCode::UNAUTHORIZED,
            "the admin token is missing or wrong",
        )),
    }
}

/// A request that changes something must come from the console's own page: its `Origin` (or,
/// without one, `Sec-Fetch-Site`) says so.
fn same_origin(request: &Request<Incoming>) -> bool {
    let headers = request.headers();
    let host = headers
        .get(http::header::HOST)
        .and_then(|value| value.to_str().ok());
    match headers
        .get(http::header::ORIGIN)
        .and_then(|value| value.to_str().ok())
    {
        Some(origin) => host.is_some_and(|host| {
            origin == format!("http://{host}") || origin == format!("https://{host}")
        }),
        None => headers
            .get("sec-fetch-site")
            .and_then(|value| value.to_str().ok())
            .is_none_or(|site| site == "same-origin"),
    }
}

fn refusal(status: StatusCode, message: &str) -> Response<ProxyBody> {
    json(status, serde_json::json!({ "status": message }).to_string())
}

fn asset(text: &'static str, content_type: &'static str) -> Response<ProxyBody> {
    let mut response = Response::new(full(text));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert("content-security-policy", HeaderValue::from_static(POLICY));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    // "no-referrer" would make the browser send `Origin: null` with the sign-in form, and the
    // same-origin check needs the origin.
    headers.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    response
}

/// Answers a `/console…` path; `None` for any other path.
pub async fn answer(
    state: &GatewayState,
    request: Request<Incoming>,
) -> Option<Response<ProxyBody>> {
    let path = request.uri().path().to_owned();
    let rest = path.strip_prefix("/console")?;
    // The page and its assets hold no data: they are served to anyone, and ask for the token.
    let response = match (request.method(), rest) {
        (&Method::GET, "" | "/") => asset(PAGE, "text/html; charset=utf-8"),
        (&Method::GET, "/app.js") => asset(SCRIPT, "text/javascript; charset=utf-8"),
        (&Method::GET, "/app.css") => asset(STYLE, "text/css; charset=utf-8"),
        (&Method::POST, "/login") => login(state, request).await,
        (_, api) if api.starts_with("/api/") => {
            if let Access::Refused(response) = access(state, &request) {
                return Some(response);
            }
            if request.method() != Method::GET && !same_origin(&request) {
                return Some(refusal(
                    StatusCode::FORBIDDEN,
                    "a change must come from the console's own page",
                ));
            }
            api_answer(state, request.method(), &api["/api".len()..]).await
        }
        _ => refusal(StatusCode::NOT_FOUND, "not found"),
    };
    Some(response)
}

/// The login form: a right token sets the cookie (its digest, HttpOnly, this site only).
async fn login(state: &GatewayState, request: Request<Incoming>) -> Response<ProxyBody> {
    if !same_origin(&request) {
        return refusal(
            StatusCode::FORBIDDEN,
            "a sign-in must come from the console's own page",
        );
    }
    let token = state.config.load().server.admin_token.clone();
    let Some(token) = token else {
        return redirect("/console", None);
    };
    let body = match http_body_util::Limited::new(request.into_body(), 4096)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(_) => return refusal(StatusCode::BAD_REQUEST, "the form is too large"),
    };
    let given = form_urlencoded::parse(&body)
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    if !same(given.as_bytes(), token.as_bytes()) {
        return refusal(StatusCode::UNAUTHORIZED, "the admin token is wrong");
    }
    let cookie = format!(
        "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age=43200",
        digest(&token)
    );
    redirect("/console", Some(cookie))
}

fn redirect(location: &'static str, cookie: Option<String>) -> Response<ProxyBody> {
    let mut response = Response::new(full(""));
    *response.status_mut() = StatusCode::SEE_OTHER;
    let headers = response.headers_mut();
    headers.insert(http::header::LOCATION, HeaderValue::from_static(location));
    if let Some(value) = cookie.and_then(|cookie| HeaderValue::from_str(&cookie).ok()) {
        headers.insert(http::header::SET_COOKIE, value);
    }
    response
}

async fn api_answer(state: &GatewayState, method: &Method, path: &str) -> Response<ProxyBody> {
    match (method, path) {
        (&Method::GET, "/exchanges") => {
            let lines = state.recent.newest_first();
            let body = format!("{{\"exchanges\":[{}]}}", lines.join(","));
            json(StatusCode::OK, body)
        }
        (&Method::GET, "/events") => events(state),
        (&Method::GET, "/overview") => {
            let config = state.config.load();
            let body = serde_json::json!({
                "routes": crate::route_table::table(&config.router),
                "health": crate::health::health_json(state).await,
            });
            json(StatusCode::OK, body.to_string())
        }
        (method, rest) => match rest.strip_prefix("/exchanges/") {
            Some(rest) => match (method, rest.strip_suffix("/replay")) {
                (&Method::POST, Some(id)) => replay(state, id).await,
                (&Method::GET, None) => exchange(state, rest),
                _ => refusal(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
            },
            None => refusal(StatusCode::NOT_FOUND, "not found"),
        },
    }
}

/// One exchange: its audit line and its capture, if it has one.
fn exchange(state: &GatewayState, request_id: &str) -> Response<ProxyBody> {
    let audit = state.recent.find(request_id);
    let capture = state.captures.find(request_id);
    if audit.is_none() && capture.is_none() {
        return refusal(
            StatusCode::NOT_FOUND,
            "no exchange with that request id in the ring",
        );
    }
    let audit: serde_json::Value = audit
        .and_then(|line| serde_json::from_str(&line).ok())
        .unwrap_or_default();
    let body = serde_json::json!({ "audit": audit, "capture": capture.as_deref() });
    json(StatusCode::OK, body.to_string())
}

/// Runs `toolgate explain` on a captured exchange with the running configuration.
async fn replay(state: &GatewayState, request_id: &str) -> Response<ProxyBody> {
    let Some(capture) = state.captures.find(request_id) else {
        return refusal(
            StatusCode::NOT_FOUND,
            "not captured (set [audit] capture), or gone from the ring",
        );
    };
    let config = state.config.load_full();
    let Some(route) = config.router.find(&capture.path).cloned() else {
        return refusal(
            StatusCode::NOT_FOUND,
            "no route of the running configuration serves its path",
        );
    };
    let report = crate::explain::explain(
        &route,
        &capture.path,
        capture.request.0.clone(),
        capture.response.as_bytes(),
    )
    .await;
    let body = serde_json::json!({ "blocked": report.blocked, "text": report.text });
    json(StatusCode::OK, body.to_string())
}

/// One audit line as the live feed sends it: a server-sent event.
pub fn live_frame(line: &str) -> String {
    format!("data: {line}\n\n")
}

/// New audit lines as server-sent events, one `data:` line each, for as long as the page
/// listens; a console too slow to keep up misses lines and is told with a comment.
fn events(state: &GatewayState) -> Response<ProxyBody> {
    let mut receiver = state.recent.subscribe();
    let (sender, body) = crate::body::ChannelBody::channel(16);
    tokio::spawn(async move {
        if sender
            .send(Ok(Bytes::from_static(b": live\n\n")))
            .await
            .is_err()
        {
            return;
        }
        // A comment now and then finds a page that went away while nothing happened.
        let mut keep_alive = tokio::time::interval(std::time::Duration::from_secs(15));
        keep_alive.tick().await;
        loop {
            let received = tokio::select! {
                received = receiver.recv() => received,
                _ = keep_alive.tick() => {
                    if sender.send(Ok(Bytes::from_static(b": keep-alive\n\n"))).await.is_err() {
                        return;
                    }
                    continue;
                }
            };
            let frame = match received {
                Ok(line) => live_frame(&line),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    format!(": {missed} exchanges were missed\n\n")
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            // The page went away: stop listening.
            if sender.send(Ok(Bytes::from(frame))).await.is_err() {
                return;
            }
        }
    });
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    response
}
