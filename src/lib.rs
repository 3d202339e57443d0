//! toolgate: a reverse proxy for OpenAI-format LLM APIs that enforces tool-call guardrails.
//!
//! A client points its base URL at toolgate; each route forwards to an upstream and runs a chain
//! of plugins on the exchange. The gateway knows no plugin's rules and a plugin never touches a
//! socket: they meet in the vocabulary crate `toolgate_plugin` (stages, views, verdicts, wire
//! formats). Bodies are read only when a plugin on the route needs them, and an allowed body is
//! forwarded as the bytes it arrived as.
//!
//! # Layout
//! - [`cli`]: the `toolgate` command (`serve`, `check`, `explain`, `demo`).
//! - [`config`]: `gateway.toml` — format, `${VAR}` expansion, located errors, runtime `Config`.
//! - [`state`]: what every exchange shares — `Runtime` and `GatewayState`.
//! - [`server`]: listeners, connection tasks, graceful shutdown; `Gateway` and `Runtime`.
//! - [`connections`]: each connection's phases bounded, and idle ones reclaimed at the cap.
//! - [`shutdown`]: what exchanges still running answer when the shutdown grace runs out.
//! - [`request_body`]: the client's body under the limits (size, silence, deadline) on every
//!   route, its fault answered as the client's.
//! - [`request_path`]: the one reading of a request path, routed on and forwarded as is.
//! - [`proxy`]: the request path: route, read, `pre_request`, forward, check, answer.
//! - [`reload`]: hot reload on SIGHUP and on a change of the config file.
//! - [`streaming`]: the stream guard that holds tool calls back until they are checked.
//! - [`plugins`]: the plugin crates built in, one line each.
//! - [`pipeline`]: a route's plugin chain and how its verdicts are enforced.
//! - [`router`]: longest-prefix routes.
//! - [`route_table`]: the route table `serve` logs, and the generation endpoints it leaves
//!   unguarded.
//! - [`upstream`]: pooled HTTP/TLS clients per upstream, and header hygiene.
//! - [`on_block`]: what a block does (`error`, `retry`, `message`), the feedback the model
//!   reads and the notice the client reads.
//! - [`exchange`]: one exchange's record and how it is closed (audit, metrics, `post_response`).
//! - [`error`]: who is to blame, the status, and the OpenAI error envelope.
//! - [`telemetry`]: Prometheus metrics and the audit log.
//! - [`admin`]: `/health` (with each MCP backend's state), `/ready`, `/metrics`.
//! - [`capture`]: the captured exchanges of `[audit] capture`, in a ring and a directory.
//! - [`console`]: the operator's console on the admin listener, and the audit ring it reads.
//! - [`mcp`]: the MCP proxy — one MCP endpoint in front of many MCP servers, filtered per agent.
//! - [`body`]: the body type used both ways.
//! - [`crypto`]: ring as the process's TLS and JWT provider.
//! - [`explain`], [`demo`]: offline verdicts on recorded exchanges, and a guided tour.
//! - `microbench` (feature `microbench` only): the close of an exchange as
//!   `benches/capture.rs` measures it.

mod admin;
mod body;
mod capture;
mod cli;
mod config;
mod connections;
mod console;
mod crypto;
mod demo;
mod discovery;
mod error;
mod exchange;
mod explain;
mod health;
mod mcp;
#[cfg(feature = "microbench")]
pub mod microbench;
mod on_block;
mod panics;
mod pipeline;
mod plugins;
mod proxy;
mod recent;
mod reload;
mod request_body;
mod request_path;
mod rounds;
mod route_table;
mod router;
mod server;
mod shutdown;
mod state;
mod streaming;
mod telemetry;
mod tenants;
mod upstream;

// The surface the binary and the tests use; everything else is the gateway's own.
pub use cli::main;
pub use config::{Config, ConfigErrors, PluginRegistry};
pub use reload::{reload, watch};
pub use server::Gateway;
pub use state::{GatewayState, Runtime};
pub use tenants::digest;
