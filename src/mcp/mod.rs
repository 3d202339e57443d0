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

pub use backend::McpHub;
pub use policy::Caller;

/// The MCP configuration is the config's: the proxy reads it.
pub use crate::config::mcp::{McpConfig, Policy, ServerSettings, Transport};

/// The header a tenant asserts one of its agents with.
pub use toolgate_plugin::directives::AGENT_HEADER;
