//! The floor the benchmark reads toolgate against: the least reverse proxy hyper 1.x makes, with
//! the same choices as toolgate (HTTP/1.1 server, a pooled hyper-util client, mimalloc, the
//! `dist` profile) and nothing else: no routing, no request id, no header work, bodies streamed
//! through untouched. `hyper-hop --upstream ADDR [--listen ADDR]` prints `LISTEN <address>` once
//! bound and stops on SIGTERM or SIGINT.

use std::convert::Infallible;
use std::net::SocketAddr;

use http::Uri;
use http::uri::{Authority, Scheme};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Upstream = Client<HttpConnector, Incoming>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen = "127.0.0.1:0".to_owned();
    let mut upstream: Option<SocketAddr> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an address")?,
            "--upstream" => {
                upstream = Some(args.next().ok_or("--upstream needs an address")?.parse()?)
            }
            "-h" | "--help" => {
                println!("hyper-hop --upstream 127.0.0.1:PORT [--listen 127.0.0.1:0]");
                return Ok(());
            }
            other => return Err(format!("unknown argument '{other}'").into()),
        }
    }
    let upstream = upstream.ok_or("--upstream is required")?;
    let authority: Authority = upstream.to_string().parse()?;
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Upstream = Client::builder(TokioExecutor::new()).build(connector);

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
        let (client, authority) = (client.clone(), authority.clone());
        tokio::spawn(async move {
            let service =
                service_fn(move |request| forward(client.clone(), authority.clone(), request));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// The request goes to the upstream as it came (only its URI made absolute), the answer back as
/// it came; a failed hop is a bare 502.
async fn forward(
    client: Upstream,
    authority: Authority,
    request: Request<Incoming>,
) -> Result<
    Response<http_body_util::Either<Incoming, http_body_util::Empty<bytes::Bytes>>>,
    Infallible,
> {
    let (mut parts, body) = request.into_parts();
    let mut uri = parts.uri.into_parts();
    uri.scheme = Some(Scheme::HTTP);
    uri.authority = Some(authority);
    parts.uri = Uri::from_parts(uri).unwrap_or_default();
    match client.request(Request::from_parts(parts, body)).await {
        Ok(answer) => Ok(answer.map(http_body_util::Either::Left)),
        Err(_) => {
            let mut bad_gateway =
                Response::new(http_body_util::Either::Right(http_body_util::Empty::new()));
            *bad_gateway.status_mut() = http::StatusCode::BAD_GATEWAY;
            Ok(bad_gateway)
        }
    }
}
