//! The listeners: the proxy and the admin endpoint, each connection served in its own task
//! (HTTP/1.1 and HTTP/2), and a graceful shutdown that stops accepting and drains in-flight
//! exchanges within a bound. The caller hands in the shutdown signal, so tests bind port 0 and
//! stop the gateway when they like.

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
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::admin;
use crate::config::Config;
use crate::mcp::McpHub;
use crate::mcp::services::Endpoints;
use crate::proxy;
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
    shutdown_grace: Duration,
    header_read_timeout: Duration,
    /// One permit per connection being served.
    connections: Arc<Semaphore>,
}

impl Gateway {
    /// Checks the state store, binds `server.listen` and `server.admin_listen` and opens the
    /// audit output.
    pub async fn bind(config: Config, runtime: Runtime) -> std::io::Result<Gateway> {
        config.check_store().await.map_err(std::io::Error::other)?;
        let listener = TcpListener::bind(config.server.listen).await?;
        let admin = match config.server.admin_listen {
            Some(address) => Some(TcpListener::bind(address).await?),
            None => None,
        };
        let audit = AuditLog::start(&config.audit)?;
        let shutdown_grace = config.server.shutdown_grace;
        let header_read_timeout = config.server.header_read_timeout;
        let max_connections = config.server.max_connections;
        let mcp = Arc::new(McpHub::default());
        mcp.apply(&config.mcp);
        let state = Arc::new(GatewayState {
            config: ArcSwap::from_pointee(config),
            metrics: runtime.metrics,
            audit,
            registry: runtime.registry,
            plugins: runtime.plugins,
            ready: AtomicBool::new(false),
            mcp,
            mcp_endpoints: Endpoints::default(),
        });
        Ok(Gateway {
            state,
            listener,
            admin,
            shutdown_grace,
            header_read_timeout,
            connections: Arc::new(Semaphore::new(max_connections)),
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
            shutdown_grace,
            header_read_timeout,
            connections,
        } = self;
        // Dropped last, however the run ends: backends outlive the drain of calls in flight.
        let _stop_backends = StopBackends(state.mcp.clone());
        let graceful = GracefulShutdown::new();
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout);
        if let Some(admin) = admin {
            tokio::spawn(admin::serve(admin, state.clone()));
        }
        state.ready.store(true, Ordering::Release);
        tracing::info!(listen = %listener.local_addr()?, "toolgate is serving");
        tokio::pin!(shutdown);
        loop {
            // At the connection cap, stop accepting: new clients wait in the kernel's backlog.
            let permit = tokio::select! {
                permit = connections.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                },
                () = &mut shutdown => break,
            };
            tokio::select! {
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(accepted) => accepted,
                        Err(error) => {
                            // Running out of file descriptors must not end the gateway.
                            tracing::warn!(%error, "accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let _ = stream.set_nodelay(true);
                    let state = state.clone();
                    let service = service_fn(move |request| {
                        // hyper keeps one slot the size of this future for the connection's
                        // whole life; boxed, the exchange's state (kilobytes) is freed as soon
                        // as the answer's head is out, which matters under many open streams.
                        let exchange = Box::pin(proxy::handle(state.clone(), request));
                        async move { Ok::<_, Infallible>(exchange.await) }
                    });
                    let connection = builder.serve_connection(TokioIo::new(stream), service).into_owned();
                    let connection = graceful.watch(connection);
                    tokio::spawn(async move {
                        if let Err(error) = connection.await {
                            tracing::debug!(%peer, %error, "connection ended with an error");
                        }
                        drop(permit);
                    });
                }
                () = &mut shutdown => break,
            }
        }
        state.ready.store(false, Ordering::Release);
        drop(listener);
        tracing::info!("shutting down: draining in-flight requests");
        if tokio::time::timeout(shutdown_grace, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(grace = ?shutdown_grace, "in-flight requests did not finish within the grace period");
        }
        Ok(())
    }
}
