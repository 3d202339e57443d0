//! What every exchange shares: the process's `Runtime` (plugin factories, the metrics registry)
//! and the `GatewayState` each connection holds (the live config, metrics, audit, MCP backends).
//! It sits apart from the listeners so the request path imports it without importing them.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use arc_swap::ArcSwap;
use toolgate_plugin::DeclaredToolsCache;
use toolgate_plugin::prometheus_client::registry::Registry;

use crate::config::{Config, PluginRegistry};
use crate::mcp::McpHub;
use crate::mcp::services::Endpoints;
use crate::shutdown::GraceOver;
use crate::telemetry::{AuditLog, Metrics};

/// What lives as long as the process: the plugin factories and the metrics they registered,
/// and the declared tools already read.
pub struct Runtime {
    pub plugins: PluginRegistry,
    pub(crate) registry: Registry,
    pub(crate) metrics: Metrics,
    pub(crate) declared_tools: Arc<DeclaredToolsCache>,
}

impl Runtime {
    /// The built-in plugins.
    pub fn new() -> Self {
        Runtime::with_plugins(PluginRegistry::builtin)
    }

    /// A custom set of plugins (`PluginRegistry::builtin(registry).with(…)` adds your own).
    pub fn with_plugins(plugins: impl FnOnce(&mut Registry) -> PluginRegistry) -> Self {
        crate::crypto::install();
        let mut registry = Registry::default();
        let plugins = plugins(&mut registry);
        let metrics = Metrics::new(&mut registry);
        let declared_tools = Arc::new(DeclaredToolsCache::new());
        crate::telemetry::register_declared_tools_cache(&mut registry, declared_tools.clone());
        Runtime {
            plugins,
            registry,
            metrics,
            declared_tools,
        }
    }
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime::new()
    }
}

/// Shared by every connection. The config sits behind an `ArcSwap`: an exchange loads it once
/// and finishes on that version even if a new one is swapped in meanwhile.
pub struct GatewayState {
    pub config: ArcSwap<Config>,
    pub metrics: Metrics,
    pub audit: AuditLog,
    /// The captured exchanges (`[audit] capture`); set at start, like the audit output.
    pub captures: crate::capture::CaptureStore,
    /// The latest audit lines, for the console.
    pub recent: crate::recent::RecentExchanges,
    pub registry: Registry,
    pub plugins: PluginRegistry,
    pub ready: AtomicBool,
    /// The backend MCP servers, kept in step with the configuration.
    pub mcp: Arc<McpHub>,
    /// The MCP routes' Streamable HTTP services (and their sessions).
    pub mcp_endpoints: Endpoints,
    /// Fires when the shutdown grace runs out: exchanges still running answer with an error.
    pub grace_over: GraceOver,
    /// The declared tools of `tools` arrays already read. The gateway's, not a route's: an
    /// entry is a pure function of the array's bytes, so it stays right across reloads and
    /// routes, and one bound covers the process.
    pub declared_tools: Arc<DeclaredToolsCache>,
}
