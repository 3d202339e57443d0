//! The MCP proxy: a `kind = "mcp"` route where toolgate is one MCP server (Streamable HTTP,
//! served by the `rmcp` SDK on toolgate's own listener) in front of many backend MCP servers,
//! and every agent sees and calls only the tools its policy and the route's plugins allow.
//!
//! `tools/list` runs the route's `pre_request` stage with the backend tools as the declared
//! tools (a plugin's `RemoveDeclaredTools` hides one); `tools/call` runs `pre_request` on the
//! same list and `pre_response` with the call as one `ToolCall` (a `Block` refuses it). So the
//! catalog, groups, permissions, budgets and argument rules govern MCP tools by their
//! qualified names with no MCP-specific code in any plugin.
//!
//! # Layout
//! - [`names`]: qualified tool names (`server__tool`) and how a requested name is read.
//! - [`policy`]: seed 004's `exposed_tools`, agent policies and default policy.
//! - [`backend`]: one supervised connection per backend server (stdio child or Streamable
//!   HTTP), its tool list, restarts with backoff, call timeouts, progress and cancellation;
//!   the hub that holds them.
//! - [`progress`]: a backend's progress notifications, relayed to their callers before the
//!   answers of their calls.
//! - [`stdio`]: a stdio backend's child, its stderr logged, its stdout watched for what is not
//!   JSON-RPC.
//! - [`endpoint`]: the HTTP side — authentication, the message size cap, and the hand-over to
//!   rmcp's Streamable HTTP service.
//! - [`services`]: the Streamable HTTP service of each MCP route, kept across reloads, and
//!   the owner of each session.
//! - [`handler`]: the MCP server itself — `tools/list` and `tools/call` through the policy, the
//!   schema checks and the plugin pipeline, with audit lines and metrics.

pub mod backend;
pub mod endpoint;
pub mod handler;
pub mod names;
pub mod policy;
pub mod progress;
pub mod services;
pub mod stdio;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

pub use backend::McpHub;
pub use policy::{AgentPolicy, Caller, DefaultPolicy, Policy};

/// The header a tenant asserts one of its agents with.
pub use toolgate_plugin::directives::AGENT_HEADER;

/// `[mcp_servers]` and `[mcp]` of one configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpConfig {
    pub servers: BTreeMap<String, ServerSettings>,
    pub policy: Policy,
}

/// How toolgate reaches one backend server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    pub name: String,
    pub transport: Transport,
    /// The longest a `tools/call` may take before the caller gets a timeout error.
    pub call_timeout: Duration,
    /// The longest the start (spawn or connect, `initialize`, `tools/list`) may take.
    pub startup_timeout: Duration,
}

/// A backend's transport.
#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process started and supervised by toolgate, spoken to over stdin/stdout.
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP server.
    Http {
        url: String,
        headers: Vec<(http::HeaderName, http::HeaderValue)>,
    },
}

impl Transport {
    pub fn kind(&self) -> &'static str {
        match self {
            Transport::Stdio { .. } => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

/// Header values and environment values often are secrets: only their names are shown.
impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::Stdio {
                command, args, env, ..
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", &args.len())
                .field("env", &env.keys().collect::<Vec<_>>())
                .finish(),
            Transport::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field(
                    "headers",
                    &headers.iter().map(|(name, _)| name).collect::<Vec<_>>(),
                )
                .finish(),
        }
    }
}
