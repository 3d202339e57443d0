//! The backend MCP servers: one supervisor task per server keeps a client connection open
//! (a child process over stdio, or a Streamable HTTP session), holds the server's tool list,
//! refreshes it when the server says it changed, and reconnects with backoff when the
//! connection ends — a child that dies is started again. A Streamable HTTP server has no
//! connection whose end would say it restarted (its session is simply gone), so its session is
//! probed with `ping` and a call that breaks or times out has it probed at once: a lost session
//! is reconnected like a dead child. Calls are bounded by the server's call timeout, so a hung
//! backend costs its caller an error, never the proxy a task.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientCapabilities, ClientConfig, ClientRequest, ErrorData, Implementation, JsonObject,
    PingRequest, ProgressNotificationParam, RequestId, ServerResult, Tool,
};
use rmcp::service::{NotificationContext, Peer, PeerRequestOptions, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, RoleServer, ServiceError, ServiceExt};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use toolgate_plugin::DeclaredTool;

use super::names::qualify;
pub use super::progress::ProgressRelay;
use super::progress::{CountingTransport, ProgressRoutes};
use super::stdio::StrayOutput;
use super::{McpConfig, ServerSettings, Transport};

/// The first pause before a restart; it doubles with each start that fails in a row.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection that lived this long was healthy: the next failure starts the backoff afresh.
const HEALTHY_RUN: Duration = Duration::from_secs(10);
/// How often a Streamable HTTP backend's session is probed, and how long a probe may take.
const HTTP_PROBE_EVERY: Duration = Duration::from_secs(2);
const HTTP_PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Every backend of the running configuration, and the MCP sessions to tell when the tools they
/// may see change.
#[derive(Default)]
pub struct McpHub {
    backends: ArcSwap<BTreeMap<String, Arc<Backend>>>,
    /// Guards reconciliation, so two reloads never start the same server twice.
    reconcile: Mutex<()>,
    sessions: Mutex<Vec<Peer<RoleServer>>>,
}

impl McpHub {
    /// Starts (or restarts, or stops) backends so that exactly `config.servers` run, keeping
    /// those whose settings did not change — and their connections — as they are.
    pub fn apply(self: &Arc<Self>, config: &McpConfig) {
        let _guard = self
            .reconcile
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let current = self.backends.load_full();
        let mut next = BTreeMap::new();
        for (name, settings) in &config.servers {
            match current.get(name) {
                Some(backend) if backend.settings == *settings => {
                    next.insert(name.clone(), backend.clone());
                }
                _ => {
                    next.insert(name.clone(), Backend::start(settings.clone(), self));
                }
            }
        }
        for (name, backend) in current.iter() {
            if next
                .get(name)
                .is_none_or(|kept| !Arc::ptr_eq(kept, backend))
            {
                backend.stop();
            }
        }
        let changed = current.keys().ne(next.keys())
            || current.iter().any(|(name, backend)| {
                next.get(name)
                    .is_none_or(|kept| !Arc::ptr_eq(kept, backend))
            });
        self.backends.store(Arc::new(next));
        if changed {
            self.tools_changed();
        }
    }

    /// Stops every backend (their children are killed).
    pub fn shutdown(&self) {
        for backend in self.backends.load().values() {
            backend.stop();
        }
        self.backends.store(Arc::new(BTreeMap::new()));
    }

    pub fn backends(&self) -> Arc<BTreeMap<String, Arc<Backend>>> {
        self.backends.load_full()
    }

    pub fn is_empty(&self) -> bool {
        self.backends.load().is_empty()
    }

    /// Remembers an initialized MCP session, to send it `notifications/tools/list_changed`.
    pub fn register_session(&self, peer: Peer<RoleServer>) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        sessions.retain(|session| !session.is_transport_closed());
        sessions.push(peer);
    }

    /// Tells every open session that its tool list may have changed (a backend came, went or
    /// changed its tools, or the policy was reloaded).
    pub fn tools_changed(&self) {
        let sessions: Vec<Peer<RoleServer>> = {
            let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            sessions.retain(|session| !session.is_transport_closed());
            sessions.clone()
        };
        if sessions.is_empty() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                for session in sessions {
                    if let Err(error) = session.notify_tool_list_changed().await {
                        tracing::debug!(%error, "a session missed tools/list_changed");
                    }
                }
            });
        }
    }

    /// Each backend's state, for `/health`.
    pub fn health(&self) -> BTreeMap<String, BackendStatus> {
        self.backends
            .load()
            .iter()
            .map(|(name, backend)| (name.clone(), backend.status()))
            .collect()
    }
}

/// One backend server under supervision.
pub struct Backend {
    pub settings: ServerSettings,
    /// Where the backend's progress notifications go: the callers' sessions, by the token
    /// toolgate gave each forwarded call.
    progress: Arc<ProgressRoutes>,
    status: Mutex<BackendStatus>,
    connection: ArcSwapOption<Connection>,
    supervisor: Mutex<Option<JoinHandle<()>>>,
}

/// A live connection to a backend and what it offered when it was listed.
pub struct Connection {
    peer: Peer<RoleClient>,
    pub tools: Vec<BackendTool>,
    /// Told when a call broke or timed out: the supervisor probes the session at once.
    suspect: Arc<tokio::sync::Notify>,
}

/// One tool of a backend, with the names and schemas the proxy works with.
pub struct BackendTool {
    /// The tool as the backend lists it, its name unqualified.
    pub tool: Tool,
    /// `server__tool`; `None` when that would not be a valid MCP name (the tool is not offered).
    pub qualified: Option<String>,
    /// The tool as the plugins see it: its qualified name and its `inputSchema`.
    pub declared: Option<DeclaredTool>,
    /// The `outputSchema` text, when the tool has one.
    pub output_schema: Option<String>,
}

/// What `/health` says about a backend.
#[derive(Debug, Clone, Serialize)]
pub struct BackendStatus {
    pub state: BackendState,
    pub transport: &'static str,
    /// The child's process id (stdio servers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    pub tools: usize,
    /// How many times the connection was started again after it ended or failed.
    pub restarts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendState {
    Starting,
    Ready,
    /// Waiting out the backoff before starting again.
    Restarting,
    Stopped,
}

/// Tells a backend that a call it is working on was abandoned, unless disarmed first.
struct CancelOnDrop(Option<(Peer<RoleClient>, RequestId)>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some((peer, id)) = self.0.take() else {
            return;
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let reason = Some("the caller cancelled the call, or it timed out".to_owned());
                let notice = CancelledNotificationParam::new(Some(id), reason);
                if let Err(error) = peer.notify_cancelled(notice).await {
                    tracing::debug!(%error, "a backend missed a cancellation");
                }
            });
        }
    }
}

/// Why a call did not reach a backend's answer.
#[derive(Debug)]
pub enum CallFailure {
    /// No connection right now (starting, restarting); the last error says why.
    Unavailable(Option<String>),
    TimedOut(Duration),
    /// The backend answered with a JSON-RPC error of its own: passed on as it is.
    Refused(ErrorData),
    /// The connection broke during the call (the backend died or went away): the backend is
    /// unavailable, as it is until it is back.
    Lost(String),
    /// The answer was not an MCP result.
    Broken(String),
}

/// A backend dropped with its configuration takes its connection (and child) with it.
impl Drop for Backend {
    fn drop(&mut self) {
        self.abort_supervisor();
    }
}

impl Backend {
    fn start(settings: ServerSettings, hub: &Arc<McpHub>) -> Arc<Backend> {
        let backend = Arc::new(Backend {
            status: Mutex::new(BackendStatus {
                state: BackendState::Starting,
                transport: settings.transport.kind(),
                pid: None,
                tools: 0,
                restarts: 0,
                last_error: None,
            }),
            settings,
            progress: Arc::new(ProgressRoutes::default()),
            connection: ArcSwapOption::empty(),
            supervisor: Mutex::new(None),
        });
        let task = tokio::spawn(supervise(Arc::downgrade(&backend), Arc::downgrade(hub)));
        *backend
            .supervisor
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(task);
        backend
    }

    /// Aborts the supervisor task if it still runs (a poisoned lock still holds its handle).
    fn abort_supervisor(&self) {
        let task = self
            .supervisor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(task) = task {
            task.abort();
        }
    }

    /// Ends supervision; dropping the connection kills a child process.
    fn stop(&self) {
        self.abort_supervisor();
        self.connection.store(None);
        self.update(|status| {
            status.state = BackendState::Stopped;
            status.pid = None;
        });
    }

    pub fn status(&self) -> BackendStatus {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn update(&self, change: impl FnOnce(&mut BackendStatus)) {
        change(&mut self.status.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// The live connection, if there is one.
    pub fn connection(&self) -> Option<Arc<Connection>> {
        self.connection.load_full()
    }

    /// Calls `tool` (its backend name) within the call timeout. The backend's progress on it
    /// goes to `progress`'s session, under the caller's own token. Dropping the future tells
    /// the backend the call is cancelled.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        progress: Option<ProgressRelay>,
    ) -> Result<CallToolResult, CallFailure> {
        let Some(connection) = self.connection() else {
            return Err(CallFailure::Unavailable(self.status().last_error));
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        let timeout = self.settings.call_timeout;
        let forwarded = self.forward(&connection, params, progress);
        let outcome = match tokio::time::timeout(timeout, forwarded).await {
            Err(_) => Err(CallFailure::TimedOut(timeout)),
            Ok(Ok(ServerResult::CallToolResult(result))) => Ok(result),
            Ok(Ok(ServerResult::InputRequiredResult(_) | ServerResult::CreateTaskResult(_))) => {
                Err(CallFailure::Broken(
                    "the server asked for client input or started a task; toolgate relays only complete results".into(),
                ))
            }
            Ok(Ok(_)) => Err(CallFailure::Broken(
                "the answer to tools/call is not a call result".into(),
            )),
            Ok(Err(ServiceError::McpError(error))) => Err(CallFailure::Refused(error)),
            Ok(Err(error @ (ServiceError::TransportClosed | ServiceError::TransportSend(_)))) => {
                Err(CallFailure::Lost(error.to_string()))
            }
            Ok(Err(error)) => Err(CallFailure::Broken(error.to_string())),
        };
        if matches!(
            outcome,
            Err(CallFailure::TimedOut(_) | CallFailure::Broken(_) | CallFailure::Lost(_))
        ) {
            // A permit is kept when the supervisor is busy: the probe runs when it looks.
            connection.suspect.notify_one();
        }
        outcome
    }

    /// Sends the call and waits for its answer, routing its progress (under the token rmcp
    /// gave the request) to the caller meanwhile. Dropped before the answer — the caller
    /// cancelled, or the call timed out — it tells the backend the call is cancelled.
    async fn forward(
        &self,
        connection: &Connection,
        params: CallToolRequestParams,
        progress: Option<ProgressRelay>,
    ) -> Result<ServerResult, ServiceError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = connection
            .peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await?;
        let route = progress.map(|relay| self.progress.open(handle.progress_token.clone(), relay));
        let mut abandoned = CancelOnDrop(Some((connection.peer.clone(), handle.id.clone())));
        let answer = handle.await_response().await;
        abandoned.0 = None;
        // Notifications for a call are relayed before its answer.
        if let Some(route) = route {
            route.close().await;
        }
        answer
    }
}

/// The client side toolgate presents to a backend: it listens for tool list changes and
/// relays the progress of forwarded calls to their callers.
struct BackendClient {
    refresh: mpsc::Sender<()>,
    progress: Arc<ProgressRoutes>,
}

impl ClientHandler for BackendClient {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // A full channel already holds a pending refresh.
        let _ = self.refresh.try_send(());
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.relay(params).await;
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toolgate", env!("CARGO_PKG_VERSION")),
        )
    }
}

type Running = RunningService<RoleClient, BackendClient>;

/// Keeps one backend connected for as long as the backend is part of the configuration.
async fn supervise(backend: std::sync::Weak<Backend>, hub: std::sync::Weak<McpHub>) {
    let mut failures: u32 = 0;
    loop {
        let Some(current) = backend.upgrade() else {
            return;
        };
        current.update(|status| status.state = BackendState::Starting);
        let settings = current.settings.clone();
        let progress = current.progress.clone();
        drop(current);
        let (refresh_sender, mut refresh) = mpsc::channel(1);
        let stray = Arc::new(Mutex::new(StrayOutput::default()));
        let client = BackendClient {
            refresh: refresh_sender,
            progress,
        };
        let started = tokio::time::timeout(
            settings.startup_timeout,
            connect(&settings, client, stray.clone()),
        )
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "did not start within {} ms",
                settings.startup_timeout.as_millis()
            ))
        })
        .map_err(|error| {
            let stray = stray.lock().unwrap_or_else(PoisonError::into_inner);
            match stray.describe() {
                Some(printed) => format!("{error}: {printed}"),
                None => error,
            }
        });
        let outcome = match started {
            Ok(Started {
                running,
                pid,
                child,
            }) => {
                let connected = Instant::now();
                let ended =
                    serve_connection(&backend, &hub, &settings, running, pid, &mut refresh).await;
                drop(child);
                if connected.elapsed() >= HEALTHY_RUN {
                    failures = 0;
                }
                ended
            }
            Err(error) => Err(error),
        };
        let Some(current) = backend.upgrade() else {
            return;
        };
        current.connection.store(None);
        let message = match outcome {
            Ok(reason) => reason,
            Err(error) => error,
        };
        tracing::warn!(server = %settings.name, error = %message, "MCP server unavailable; restarting");
        current.update(|status| {
            status.state = BackendState::Restarting;
            status.pid = None;
            status.tools = 0;
            status.restarts += 1;
            status.last_error = Some(message);
        });
        drop(current);
        if let Some(hub) = hub.upgrade() {
            hub.tools_changed();
        }
        let backoff = FIRST_BACKOFF
            .saturating_mul(1 << failures.min(16))
            .min(MAX_BACKOFF);
        failures = failures.saturating_add(1);
        tokio::time::sleep(backoff).await;
    }
}

/// Lists the tools of a fresh connection, publishes it, and keeps it listed until it ends.
/// `Ok` says why a healthy connection ended; `Err` is a failure before it was usable.
async fn serve_connection(
    backend: &std::sync::Weak<Backend>,
    hub: &std::sync::Weak<McpHub>,
    settings: &ServerSettings,
    running: Running,
    pid: Option<u32>,
    refresh: &mut mpsc::Receiver<()>,
) -> Result<String, String> {
    let peer = running.peer().clone();
    let suspect = Arc::new(tokio::sync::Notify::new());
    let tools = list_tools(&peer, settings).await?;
    publish(backend, hub, settings, &peer, &suspect, tools, pid)?;
    tracing::info!(server = %settings.name, ?pid, "MCP server ready");
    let waiting = running.waiting();
    tokio::pin!(waiting);
    // A child's end is seen on its pipes; only an HTTP session is probed.
    let probes = matches!(settings.transport, Transport::Http { .. });
    let mut probe = tokio::time::interval(HTTP_PROBE_EVERY);
    probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    probe.tick().await;
    loop {
        tokio::select! {
            quit = &mut waiting => {
                return Ok(match quit {
                    Ok(reason) => format!("the connection ended ({reason:?})"),
                    Err(error) => format!("the connection task failed: {error}"),
                });
            }
            Some(()) = refresh.recv() => {
                match list_tools(&peer, settings).await {
                    Ok(tools) => publish(backend, hub, settings, &peer, &suspect, tools, pid)?,
                    Err(error) => tracing::warn!(server = %settings.name, %error, "could not refresh the tool list"),
                }
            }
            _ = probe.tick(), if probes => {
                if let Err(error) = ping(&peer).await {
                    return Ok(format!("the session stopped answering: {error}"));
                }
            }
            () = suspect.notified(), if probes => {
                if let Err(error) = ping(&peer).await {
                    return Ok(format!("a call failed and the session stopped answering: {error}"));
                }
            }
        }
    }
}

/// One `ping` within [`HTTP_PROBE_TIMEOUT`]: a server that restarted answers its old session
/// with an error (or not at all).
async fn ping(peer: &Peer<RoleClient>) -> Result<(), String> {
    let request = ClientRequest::PingRequest(PingRequest::default());
    match tokio::time::timeout(HTTP_PROBE_TIMEOUT, peer.send_request(request)).await {
        Err(_) => Err(format!(
            "no answer to ping within {} ms",
            HTTP_PROBE_TIMEOUT.as_millis()
        )),
        Ok(Err(error)) => Err(error.to_string()),
        Ok(Ok(_)) => Ok(()),
    }
}

async fn list_tools(
    peer: &Peer<RoleClient>,
    settings: &ServerSettings,
) -> Result<Vec<Tool>, String> {
    match tokio::time::timeout(settings.startup_timeout, peer.list_all_tools()).await {
        Err(_) => Err(format!(
            "tools/list did not answer within {} ms",
            settings.startup_timeout.as_millis()
        )),
        Ok(Err(error)) => Err(format!("tools/list failed: {error}")),
        Ok(Ok(tools)) => Ok(tools),
    }
}

fn publish(
    backend: &std::sync::Weak<Backend>,
    hub: &std::sync::Weak<McpHub>,
    settings: &ServerSettings,
    peer: &Peer<RoleClient>,
    suspect: &Arc<tokio::sync::Notify>,
    tools: Vec<Tool>,
    pid: Option<u32>,
) -> Result<(), String> {
    let Some(backend) = backend.upgrade() else {
        return Err("the server was removed from the configuration".into());
    };
    let tools: Vec<BackendTool> = tools
        .into_iter()
        .map(|tool| backend_tool(&settings.name, tool))
        .collect();
    for tool in tools.iter().filter(|tool| tool.qualified.is_none()) {
        tracing::warn!(server = %settings.name, tool = %tool.tool.name, "not offered: its qualified name would not be a valid MCP tool name");
    }
    let count = tools.len();
    backend.connection.store(Some(Arc::new(Connection {
        peer: peer.clone(),
        tools,
        suspect: suspect.clone(),
    })));
    backend.update(|status| {
        status.state = BackendState::Ready;
        status.pid = pid;
        status.tools = count;
    });
    if let Some(hub) = hub.upgrade() {
        hub.tools_changed();
    }
    Ok(())
}

fn backend_tool(server: &str, tool: Tool) -> BackendTool {
    let qualified = qualify(server, &tool.name);
    let declared = qualified.as_ref().map(|name| {
        let schema = serde_json::Value::Object((*tool.input_schema).clone());
        DeclaredTool::function(name.clone(), Some(&schema))
    });
    let output_schema = tool
        .output_schema
        .as_ref()
        .and_then(|schema| serde_json::to_string(schema.as_ref()).ok());
    BackendTool {
        tool,
        qualified,
        declared,
        output_schema,
    }
}

/// A connection whose `initialize` succeeded, and the child behind it (dropping it kills it).
struct Started {
    running: Running,
    pid: Option<u32>,
    child: Option<tokio::process::Child>,
}

/// Starts the transport and runs MCP's `initialize` handshake. What a stdio child prints on
/// stdout that is not JSON-RPC is kept in `stray`.
async fn connect(
    settings: &ServerSettings,
    client: BackendClient,
    stray: Arc<Mutex<StrayOutput>>,
) -> Result<Started, String> {
    match &settings.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let spawned =
                super::stdio::spawn(&settings.name, command, args, env, cwd.as_deref(), stray)?;
            let pipes = rmcp::transport::async_rw::AsyncRwTransport::new_client(
                spawned.stdout,
                spawned.stdin,
            );
            initialize(client, pipes, Some(spawned.child)).await
        }
        Transport::Http { url, headers } => {
            let headers: HashMap<http::HeaderName, http::HeaderValue> =
                headers.iter().cloned().collect();
            // No silent re-initialisation: a server that restarted lost every session, and with
            // it perhaps the tools it offered; toolgate must see that (count it, list the tools
            // again, tell its callers) rather than have the library paper over it.
            let config = StreamableHttpClientTransportConfig::with_uri(url.clone())
                .custom_headers(headers)
                .reinit_on_expired_session(false);
            let transport = StreamableHttpClientTransport::from_config(config);
            initialize(client, transport, None).await
        }
    }
}

/// MCP's `initialize` over a started transport, its progress notifications counted for the
/// client's routes; `child` is the process behind a stdio transport.
async fn initialize<T>(
    client: BackendClient,
    transport: T,
    child: Option<tokio::process::Child>,
) -> Result<Started, String>
where
    T: rmcp::transport::Transport<RoleClient> + 'static,
{
    let pid = child.as_ref().and_then(tokio::process::Child::id);
    let routes = client.progress.clone();
    let running = client
        .serve(CountingTransport::new(transport, routes))
        .await
        .map_err(|error| format!("initialize failed: {error}"))?;
    Ok(Started {
        running,
        pid,
        child,
    })
}
