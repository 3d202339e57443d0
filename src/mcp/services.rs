//! The Streamable HTTP services of the MCP routes, one per route path, kept across config
//! reloads so sessions outlive them, and who opened each of their sessions. The MCP server type
//! they run is named here, apart from its handler, so what every exchange shares can hold the
//! services without importing the handler.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// The MCP server of every MCP route (its `ServerHandler` is in [`super::handler`]). It holds
/// nothing: the configuration, the caller and the backends come with each request, so a
/// session outlives config reloads and sees the policy in force when it asks.
#[derive(Debug, Clone, Copy, Default)]
pub struct McpEndpoint;

pub(crate) type Service = StreamableHttpService<McpEndpoint, LocalSessionManager>;

/// Who opened a session: the tenant it authenticated as and the agent it asserted. A session id
/// is a bearer secret only to its owner; anyone else presenting it is answered as if it did not
/// exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionOwner {
    pub tenant: Option<String>,
    pub agent: Option<String>,
}

/// The Streamable HTTP services of the MCP routes, by path, and the owners of their sessions.
#[derive(Default)]
pub struct Endpoints {
    services: Mutex<HashMap<String, (Service, Arc<LocalSessionManager>)>>,
    owners: Mutex<Owners>,
}

/// Session owners by (route, session id). Sessions rmcp ended on its own (idle, closed
/// transport) are pruned whenever the table has doubled since the last pruning.
#[derive(Default)]
struct Owners {
    by_session: HashMap<(String, String), SessionOwner>,
    pruned_at: usize,
}

impl Endpoints {
    pub(crate) fn service(&self, route: &str, max_message_bytes: usize) -> Service {
        self.services
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(route.to_owned())
            .or_insert_with(|| {
                // toolgate authenticates callers by tenant key and sits behind whatever name
                // it is deployed under: rmcp's loopback-only Host check (a guard for local
                // servers against DNS rebinding) would refuse every real deployment.
                let config = StreamableHttpServerConfig::default()
                    .disable_allowed_hosts()
                    .with_max_request_body_bytes(max_message_bytes);
                let sessions = Arc::new(LocalSessionManager::default());
                let service =
                    StreamableHttpService::new(|| Ok(McpEndpoint), sessions.clone(), config);
                (service, sessions)
            })
            .0
            .clone()
    }

    /// Whether `owner` may use `session` on `route`: a session opened by someone else is not
    /// theirs. A session toolgate holds no owner for is left to rmcp, which knows it or not.
    pub(crate) fn may_use(&self, route: &str, session: &str, owner: &SessionOwner) -> bool {
        let owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        owners
            .by_session
            .get(&(route.to_owned(), session.to_owned()))
            .is_none_or(|opener| opener == owner)
    }

    /// Records who opened `session`.
    pub(crate) async fn bind(&self, route: &str, session: &str, owner: SessionOwner) {
        let stale = {
            let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
            owners
                .by_session
                .insert((route.to_owned(), session.to_owned()), owner);
            let size = owners.by_session.len();
            (size >= 64 && size >= owners.pruned_at * 2).then(|| {
                owners.pruned_at = size;
                owners.by_session.keys().cloned().collect::<Vec<_>>()
            })
        };
        let Some(candidates) = stale else { return };
        let mut ended = Vec::new();
        for (route, session) in candidates {
            let manager = self
                .services
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&route)
                .map(|(_, sessions)| sessions.clone());
            let alive = match manager {
                Some(manager) => manager
                    .has_session(&Arc::from(session.as_str()))
                    .await
                    .unwrap_or(true),
                None => false,
            };
            if !alive {
                ended.push((route, session));
            }
        }
        let mut owners = self.owners.lock().unwrap_or_else(PoisonError::into_inner);
        for key in ended {
            owners.by_session.remove(&key);
        }
        owners.pruned_at = owners.by_session.len();
    }

    /// Forgets the owner of an ended session.
    pub(crate) fn release(&self, route: &str, session: &str) {
        self.owners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_session
            .remove(&(route.to_owned(), session.to_owned()));
    }
}
