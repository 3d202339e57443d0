//! toolgate-bench: the load benchmark of issue 6. One driver (`loadbench`) starts a scripted
//! upstream, nginx and toolgate on loopback, drives the same requests through each, and writes
//! a markdown report; `bench-upstream` is the scripted upstream as its own process.
//!
//! Design choices:
//! - Each server is its own process, so its CPU time (per thread, from /proc) divided by the
//!   requests it served is the cost of one request there, whatever else shares the 2 cores.
//! - The fixed-rate runs use oha (with latency correction); what oha cannot see — CPU per
//!   request, the time a text delta spends inside a proxy, 1,000 streams held at once — is
//!   measured by the driver's own client.
//! - Every child is killed when the driver ends, however it ends; every loop has a deadline.
//!
//! # Layout
//! - `workload`: the tools, requests and answers (JSON and SSE) the benchmark sends.
//! - `upstream`: the scripted upstream server, steered by `x-bench-*` headers.
//! - `client`: the driver's HTTP/1.1 client: closed-loop runs and timed SSE streams.
//! - `oha`: finding or installing oha, running it, reading its JSON.
//! - `stack`: starting the upstream, nginx and toolgate with generated configs.
//! - `procs`: child processes that die with the driver, and /proc readings (CPU, RSS).
//! - `report`: the markdown tables.
//! - `redis`: a real redis-server the soak kills, restarts, flips the password of and fails over.
//! - `rogue_service`: the soak's misbehaving validator service.
//! - `big_answers`: the soak's multi-megabyte answers and the checks that a client got them whole.
//! - `raw_http`: the soak's slow and stalled readers' sockets and the answers they read.
//! - `front`: the TCP front that "restarts" the soak's MCP backend by switching it.
//! - `mcp`: the soak's MCP backend (server-everything) and its JSON-RPC client.
//! - `callgrind`: the functions a callgrind profile saw run (for `link/hot-functions.txt`).
//! - `dist`: the `dist` build measured, and the check that its hot-function list is current.
//! - `revision`: what a report is stamped with: the commit measured, its dirty flag, the profile.
//! - `least_guard`: the least tool-call guard serde_json and jsonschema make (the guarded floor).
//! - `catalog`: a realistic 200-tool MCP-style catalog, for the disclosure measurement.
//! - `scripted_model`: an upstream playing a model that loads tools through `tool_disclosure`.

pub mod big_answers;
pub mod callgrind;
pub mod catalog;
pub mod client;
pub mod dist;
pub mod front;
pub mod least_guard;
pub mod mcp;
pub mod oha;
pub mod procs;
pub mod raw_http;
pub mod redis;
pub mod report;
pub mod revision;
pub mod rogue_service;
pub mod scripted_model;
pub mod stack;
pub mod upstream;
pub mod workload;
