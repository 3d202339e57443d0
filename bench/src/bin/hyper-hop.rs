//! The floors the benchmark reads toolgate against. The bare hyper hop: the least reverse proxy
//! hyper 1.x makes, with the same choices as toolgate (HTTP/1.1 server, a pooled hyper-util
//! client, mimalloc, the `dist` profile) and nothing else: no routing, no request id, no header
//! work, bodies streamed through untouched. With `--guard`, the same hop with the least guard in
//! it (`toolgate_bench::least_guard`): the request and the answer held whole, the answer's calls
//! checked against the request's declared tools and schemas, a bare 403 when one fails.
//! `hyper-hop --upstream ADDR [--listen ADDR] [--guard]` prints `LISTEN <address>` once bound
//! and stops on SIGTERM or SIGINT.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::uri::{Authority, Scheme};
use http::{StatusCode, Uri};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};
use toolgate_bench::least_guard::{Declared, LeastGuard};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Upstream = Client<HttpConnector, Incoming>;
type GuardedUpstream = Client<HttpConnector, Full<Bytes>>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen = "127.0.0.1:0".to_owned();
    let mut upstream: Option<SocketAddr> = None;
    let mut guarded = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an address")?,
            "--upstream" => {
                upstream = Some(args.next().ok_or("--upstream needs an address")?.parse()?)
            }
            "--guard" => guarded = true,
            "-h" | "--help" => {
                println!("hyper-hop --upstream 127.0.0.1:PORT [--listen 127.0.0.1:0] [--guard]");
                return Ok(());
            }
            other => return Err(format!("unknown argument '{other}'").into()),
        }
    }
    let upstream = upstream.ok_or("--upstream is required")?;
    let authority: Authority = upstream.to_string().parse()?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Upstream = Client::builder(TokioExecutor::new()).build(connector.clone());
    let guarded_client: GuardedUpstream = Client::builder(TokioExecutor::new()).build(connector);
    let least_guard = Arc::new(LeastGuard::default());

    let listener = TcpListener::bind(&listen).await?;
    println!("LISTEN {}", listener.local_addr()?);
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => accepted?,
            _ = terminate.recv() => return Ok(()),
            _ = interrupt.recv() => return Ok(()),
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(stream);
        let authority = authority.clone();
        if guarded {
            let (client, least_guard) = (guarded_client.clone(), least_guard.clone());
            tokio::spawn(async move {
                let service = service_fn(move |request| {
                    guard(
                        client.clone(),
                        authority.clone(),
                        least_guard.clone(),
                        request,
                    )
                });
                let _ = http1::Builder::new().serve_connection(io, service).await;
            });
        } else {
            let client = client.clone();
            tokio::spawn(async move {
                let service =
                    service_fn(move |request| forward(client.clone(), authority.clone(), request));
                let _ = http1::Builder::new().serve_connection(io, service).await;
            });
        }
    }
}

/// The request's URI made absolute, towards the upstream.
fn upstream_uri(uri: Uri, authority: Authority) -> Uri {
    let mut uri = uri.into_parts();
    uri.scheme = Some(Scheme::HTTP);
    uri.authority = Some(authority);
    Uri::from_parts(uri).unwrap_or_default()
}

fn bare<B>(status: StatusCode, body: B) -> Response<B> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
}

/// The request goes to the upstream as it came (only its URI made absolute), the answer back as
/// it came; a failed hop is a bare 502.
async fn forward(
    client: Upstream,
    authority: Authority,
    request: Request<Incoming>,
) -> Result<Response<http_body_util::Either<Incoming, Empty<Bytes>>>, Infallible> {
    let (mut parts, body) = request.into_parts();
    parts.uri = upstream_uri(parts.uri, authority);
    match client.request(Request::from_parts(parts, body)).await {
        Ok(answer) => Ok(answer.map(http_body_util::Either::Left)),
        Err(_) => Ok(bare(
            StatusCode::BAD_GATEWAY,
            http_body_util::Either::Right(Empty::new()),
        )),
    }
}

/// The request is held whole and sent on; the answer is held whole and released only when
/// each of its calls names a tool the request declares, with valid arguments: else a bare 403.
/// A request or answer the guard cannot read is a bare 400 or 502.
async fn guard(
    client: GuardedUpstream,
    authority: Authority,
    least_guard: Arc<LeastGuard>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let empty = || Full::new(Bytes::new());
    let (mut parts, body) = request.into_parts();
    let Ok(body) = body.collect().await.map(|body| body.to_bytes()) else {
        return Ok(bare(StatusCode::BAD_REQUEST, empty()));
    };
    let Some(declared) = Declared::read(&body) else {
        return Ok(bare(StatusCode::BAD_REQUEST, empty()));
    };
    parts.uri = upstream_uri(parts.uri, authority);
    let request = Request::from_parts(parts, Full::new(body.clone()));
    let Ok(answer) = client.request(request).await else {
        return Ok(bare(StatusCode::BAD_GATEWAY, empty()));
    };
    let (parts, answer) = answer.into_parts();
    let Ok(answer) = answer.collect().await.map(|answer| answer.to_bytes()) else {
        return Ok(bare(StatusCode::BAD_GATEWAY, empty()));
    };
    if least_guard.checked_calls(&declared, &answer).is_none() {
        return Ok(bare(StatusCode::FORBIDDEN, empty()));
    }
    Ok(Response::from_parts(parts, Full::new(answer)))
}
