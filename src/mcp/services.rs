//! The Streamable HTTP services of the MCP routes, one per route path, kept across config
//! reloads so sessions outlive them. The MCP server type they run is named here, apart from its
//! handler, so what every exchange shares can hold the services without importing the handler.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// The MCP server of every MCP route (its `ServerHandler` is in [`super::handler`]). It holds
/// nothing: the configuration, the caller and the backends come with each request, so a
/// session outlives config reloads and sees the policy in force when it asks.
#[derive(Debug, Clone, Copy, Default)]
pub struct McpEndpoint;

pub(crate) type Service = StreamableHttpService<McpEndpoint, LocalSessionManager>;

/// The Streamable HTTP services of the MCP routes, by path.
#[derive(Default)]
pub struct Endpoints {
    services: Mutex<HashMap<String, Service>>,
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
                StreamableHttpService::new(
                    || Ok(McpEndpoint),
                    Arc::new(LocalSessionManager::default()),
                    config,
                )
            })
            .clone()
    }
}
