//! The gateway's end-to-end tests, in one test binary: each module below is one area (its own
//! comment says which), all on the shared harness in `common/`. One binary instead of one per file
//! because each test binary links the whole gateway; linking them was much of CI's time. The tests
//! share this process and run in parallel, so none may depend on process-global state (env vars, a
//! global subscriber, fixed ports): each uses its own loopback ports, temp files and runtime.

mod common;

mod access_control;
mod arguments;
mod budgets;
mod call_limit;
mod captures;
mod cli;
mod connections;
mod console;
mod console_browser;
mod dashboards;
mod disclosure;
mod fixtures;
mod formats;
mod gemini;
mod judge_and_telemetry;
mod mcp;
mod on_block;
mod operator_messages;
mod pipeline;
mod proxy;
mod real_traffic;
mod reliability;
mod request_paths;
mod sdks;
mod service_failures;
mod services;
mod shipped_routes;
mod store;
mod streaming;
mod tenants;
mod tenants_jwks_url;
mod tenants_jwt;
mod tool_selection;
mod upstream_credentials;
mod upstream_selfcheck;
