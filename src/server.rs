//! The listeners: the proxy and the admin endpoint, each connection served in its own task
//! (HTTP/1.1 and HTTP/2) with its phases bounded (`connections`), and a graceful shutdown that
//! stops accepting and drains in-flight exchanges within a bound; those still running when it
//! runs out get an error answer in their format (`shutdown`). The caller hands in the shutdown
//! signal, so tests bind port 0 and stop the gateway when they like.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::admin;
use crate::config::{Config, ServerConfig};
use crate::connections::{Connections, DrainSignal, PhaseDeadlines, WatchedStream};
use crate::mcp::McpHub;
use crate::mcp::services::Endpoints;
use crate::proxy;
use crate::shutdown::GraceEnd;
pub use crate::state::{GatewayState, Runtime};
use crate::telemetry::AuditLog;

/// Stops the MCP backends when the gateway's run ends, however it ends.
struct StopBackends(Arc<McpHub>);

impl Drop for StopBackends {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

/// A gateway bound to its listeners, not yet serving.
pub struct Gateway {
    state: Arc<GatewayState>,
    listener: TcpListener,
    admin: Option<TcpListener>,
    /// The listener's settings as bound: a reload does not change them.
    server: ServerConfig,
    /// One permit per connection being served.
    slots: Arc<Semaphore>,
    grace_end: GraceEnd,
}

/// How long exchanges cut at the end of the grace get to write their error answers.
const CUT_ANSWER_WINDOW: Duration = Duration::from_secs(1);

/// Binds one listener; a failure says which address, which setting gave it and the variable
/// the shipped gateway.toml reads it from, so "address already in use" says what to change.
async fn bind_listener(
    address: SocketAddr,
    key: &str,
    variable: &str,
) -> std::io::Result<TcpListener> {
    TcpListener::bind(address).await.map_err(|error| {
        std::io::Error::new(
            error.kind(),
            format!(
                "cannot listen on {address} ({key}; the shipped gateway.toml reads it from \
                 ${variable}): {error}"
            ),
        )
    })
}

impl Gateway {
    /// Checks the state store, binds `server.listen` and `server.admin_listen` and opens the
    /// audit output.
    pub async fn bind(config: Config, mut runtime: Runtime) -> std::io::Result<Gateway> {
        config.check_store().await.map_err(std::io::Error::other)?;
        let listener =
            bind_listener(config.server.listen, "[server] listen", "TOOLGATE_LISTEN").await?;
        let admin = match config.server.admin_listen {
            Some(address) => {
                Some(bind_listener(address, "[server] admin_listen", "TOOLGATE_ADMIN").await?)
            }
            None => None,
        };
        let audit = AuditLog::start(&config.audit)?;
        let server = config.server.clone();
        let (grace_end, grace_over) = GraceEnd::new();
        let mcp = Arc::new(McpHub::default());
        mcp.apply(&config.mcp);
        config.tenants.start_jwks(None);
        config.prime_metrics(&runtime.metrics);
        let captures =
            crate::capture::CaptureStore::new(config.capture.clone(), &mut runtime.registry);
        let state = Arc::new(GatewayState {
            config: ArcSwap::from_pointee(config),
            metrics: runtime.metrics,
            audit,
            captures,
            recent: Default::default(),
            registry: runtime.registry,
            plugins: runtime.plugins,
            ready: AtomicBool::new(false),
            mcp,
            mcp_endpoints: Endpoints::default(),
            grace_over,
            declared_tools: runtime.declared_tools,
        });
        Ok(Gateway {
            state,
            listener,
            admin,
            slots: Arc::new(Semaphore::new(server.max_connections)),
            server,
            grace_end,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
            .as_ref()
            .and_then(|admin| admin.local_addr().ok())
    }

    pub fn state(&self) -> Arc<GatewayState> {
        self.state.clone()
    }

    /// Serves until `shutdown` completes, then drains in-flight exchanges for at most the
    /// configured grace period.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let Gateway {
            state,
            listener,
            admin,
            server,
            slots,
            grace_end,
        } = self;
        // Dropped last, however the run ends: backends outlive the drain of calls in flight.
        let _stop_backends = StopBackends(state.mcp.clone());
        let builder = connection_builder(&server);
        let phases = PhaseDeadlines::of(&server);
        let connections = Connections::new();
        if let Some(admin) = admin {
            tokio::spawn(admin::serve(admin, state.clone()));
        }
        state.ready.store(true, Ordering::Release);
        tracing::info!(listen = %listener.local_addr()?, "toolgate is serving");
        tokio::pin!(shutdown);
        loop {
            let admitted = tokio::select! {
                admitted = admit(&listener, &slots, &connections) => admitted,
                () = &mut shutdown => break,
            };
            let Some((stream, peer, permit)) = admitted else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let registered = connections.register();
            let connection_state = registered.state().clone();
            let drain = DrainSignal::of(&registered);
            let state = state.clone();
            let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let busy = connection_state.begin_exchange();
                let http1 = request.version() < hyper::Version::HTTP_2;
                // hyper keeps one slot the size of this future for the connection's whole
                // life; boxed, the exchange's state (kilobytes) is freed as soon as the
                // answer's head is out, which matters under many open streams.
                let exchange = Box::pin(proxy::handle(state.clone(), request, drain.clone()));
                async move { Ok::<_, Infallible>(busy.answer(exchange.await, http1)) }
            });
            let stream = WatchedStream::new(stream, &registered);
            let connection = builder
                .serve_connection(TokioIo::new(stream), service)
                .into_owned();
            let connection = Box::pin(connection);
            tokio::spawn(async move {
                crate::connections::drive(connection, registered, phases, peer).await;
                drop(permit);
            });
        }
        state.ready.store(false, Ordering::Release);
        drop(listener);
        tracing::info!(
            open = connections.count(),
            "shutting down: draining in-flight requests"
        );
        let grace = server.shutdown_grace;
        let drained = connections.drain();
        tokio::pin!(drained);
        if tokio::time::timeout(grace, &mut drained).await.is_err() {
            tracing::warn!(
                ?grace,
                open = connections.count(),
                "in-flight requests did not finish within the grace period: cutting them with an error answer"
            );
            grace_end.fire();
            if tokio::time::timeout(CUT_ANSWER_WINDOW, &mut drained)
                .await
                .is_err()
            {
                tracing::warn!("some connections were still open after their error answers");
            }
        }
        // The captures of the last exchanges reach capture_dir before the process ends.
        let captures = state.clone();
        let _ = tokio::task::spawn_blocking(move || {
            captures.captures.flush(std::time::Duration::from_secs(2));
        })
        .await;
        Ok(())
    }
}

/// The next client to serve and the slot it takes; `None` when accepting failed.
///
/// With a slot free, the listener accepts as before. At the cap it still accepts one client, so
/// the wait is for a client that exists, and frees the idlest connection for it; further clients
/// wait in the kernel's backlog.
async fn admit(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
    connections: &Connections,
) -> Option<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    let free = slots.clone().try_acquire_owned().ok();
    let (stream, peer) = match listener.accept().await {
        Ok(accepted) => accepted,
        Err(error) => {
            // Running out of file descriptors must not end the gateway.
            tracing::warn!(%error, "accept failed");
            tokio::time::sleep(Duration::from_millis(50)).await;
            return None;
        }
    };
    let permit = match free {
        Some(permit) => permit,
        None => connections.make_room(slots).await.ok()?,
    };
    Some((stream, peer, permit))
}

/// HTTP/1.1 and HTTP/2 as the server settings bound them (with `connections::PhaseDeadlines`).
fn connection_builder(server: &ServerConfig) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // No timer for HTTP/1: `header_read_timeout` is kept by `connections::drive` with the
    // connection's other deadlines, instead of a timer hyper would arm for every head.
    builder.http1().header_read_timeout(None);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(server.http2_keep_alive_interval)
        .keep_alive_timeout(server.http2_keep_alive_timeout);
    builder
}
