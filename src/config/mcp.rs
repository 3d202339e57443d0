//! `[mcp_servers.NAME]` and `[mcp]` into the runtime [`McpConfig`]: one transport per server,
//! valid names, and policies that refer only to servers and identities that exist. Nothing is
//! started here (`toolgate check` loads configs too); the gateway's hub starts the backends.
//! The types are the config's, and the MCP proxy reads them: the arrow runs mcp → config.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::source::{ConfigError, KeyPath, Source};
use super::{RawConfig, RawMcpServer};
use std::fmt;
use std::path::PathBuf;

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

/// `[mcp.default_policy]`: what happens where no list decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DefaultPolicy {
    pub allow_unknown_tools: bool,
    pub allow_unknown_servers: bool,
}

/// `[mcp.agent_policies.ID]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentPolicy {
    pub allowed_servers: Option<BTreeSet<String>>,
    pub tool_overrides: BTreeMap<String, BTreeSet<String>>,
    /// Tools, by server, whose calls by this caller a person confirms first.
    pub require_confirmation: BTreeMap<String, BTreeSet<String>>,
}

/// The whole MCP policy of one configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    pub default: DefaultPolicy,
    pub agents: BTreeMap<String, AgentPolicy>,
    /// `exposed_tools` of each server that has the list.
    pub exposed: BTreeMap<String, BTreeSet<String>>,
    /// `require_confirmation` of each server: tools whose every call a person confirms first.
    pub confirmed: BTreeMap<String, BTreeSet<String>>,
}

/// Between the server's name and the tool's.
pub const SEPARATOR: &str = "__";
/// The longest tool name MCP allows.
pub const MAX_TOOL_NAME: usize = 128;
/// The longest server name: leaves room for the separator and a tool name.
pub const MAX_SERVER_NAME: usize = 48;

/// Why a server name cannot be used, or `None` when it can. A server name never contains the
/// separator nor ends with `_`, so `server__tool` splits at its first `__` without doubt.
pub fn server_name_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_SERVER_NAME {
        return Some(format!(
            "a server name has 1 to {MAX_SERVER_NAME} characters"
        ));
    }
    if !name
        .bytes()
        .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
    {
        return Some("a server name is made of A-Z, a-z, 0-9, '_' and '-'".into());
    }
    if name.contains(SEPARATOR) || name.ends_with('_') {
        return Some(format!(
            "a server name must not contain '{SEPARATOR}' nor end with '_': it is the separator in qualified tool names"
        ));
    }
    None
}

pub(super) fn build_mcp(
    raw: &RawConfig,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> McpConfig {
    let mut servers = BTreeMap::new();
    let mut exposed = BTreeMap::new();
    let mut confirmed = BTreeMap::new();
    for (name, server) in &raw.mcp_servers {
        let path = KeyPath::default().key("mcp_servers").key(name);
        if let Some(problem) = server_name_problem(name) {
            errors.push(source.error_at_key(&path, problem));
        }
        for (key, value) in [
            ("call_timeout_ms", server.call_timeout_ms),
            ("startup_timeout_ms", server.startup_timeout_ms),
        ] {
            if value == 0 {
                errors.push(source.error_at_key(&path.clone().key(key), "must be greater than 0"));
            }
        }
        if let Some(tools) = &server.exposed_tools {
            check_names(tools, &path.clone().key("exposed_tools"), source, errors);
            exposed.insert(name.clone(), tools.iter().cloned().collect());
        }
        if !server.require_confirmation.is_empty() {
            let tools = &server.require_confirmation;
            check_names(
                tools,
                &path.clone().key("require_confirmation"),
                source,
                errors,
            );
            confirmed.insert(name.clone(), tools.iter().cloned().collect());
        }
        if let Some(transport) = transport(server, &path, source, errors) {
            servers.insert(
                name.clone(),
                ServerSettings {
                    name: name.clone(),
                    transport,
                    call_timeout: Duration::from_millis(server.call_timeout_ms),
                    startup_timeout: Duration::from_millis(server.startup_timeout_ms),
                },
            );
        }
    }

    let identities: BTreeSet<&str> = raw
        .tenants
        .iter()
        .flat_map(|(name, tenant)| {
            std::iter::once(name.as_str()).chain(tenant.agents.iter().map(String::as_str))
        })
        .collect();
    let mut agents = BTreeMap::new();
    for (identity, entry) in &raw.mcp.agent_policies {
        let path = KeyPath::default()
            .key("mcp")
            .key("agent_policies")
            .key(identity);
        if !identities.contains(identity.as_str()) {
            errors.push(source.error_at_key(
                &path,
                format!(
                    "'{identity}' is neither a tenant nor an agent a tenant holds: no caller could ever have this policy"
                ),
            ));
        }
        agents.insert(
            identity.clone(),
            agent_policy(entry, &path, raw, source, errors),
        );
    }

    McpConfig {
        servers,
        policy: Policy {
            default: DefaultPolicy {
                allow_unknown_tools: raw.mcp.default_policy.allow_unknown_tools,
                allow_unknown_servers: raw.mcp.default_policy.allow_unknown_servers,
            },
            agents,
            exposed,
            confirmed,
        },
    }
}

/// `[mcp.agent_policies.ID]`: servers and tools it names must exist, and an override must be
/// for a server the policy allows.
fn agent_policy(
    entry: &super::RawAgentPolicy,
    path: &KeyPath,
    raw: &RawConfig,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> AgentPolicy {
    let known = |server: &str| raw.mcp_servers.contains_key(server);
    let mut policy = AgentPolicy::default();
    if let Some(allowed) = &entry.allowed_servers {
        for (index, server) in allowed.iter().enumerate() {
            if !known(server) {
                errors.push(source.error_at_key(
                    &path.clone().key("allowed_servers").index(index),
                    unknown_server(server, raw),
                ));
            }
        }
        policy.allowed_servers = Some(allowed.iter().cloned().collect());
    }
    for (server, tools) in &entry.tool_overrides {
        let override_path = path.clone().key("tool_overrides").key(server);
        if !known(server) {
            errors.push(source.error_at_key(&override_path, unknown_server(server, raw)));
        } else if entry
            .allowed_servers
            .as_ref()
            .is_some_and(|allowed| !allowed.contains(server))
        {
            errors.push(source.error_at_key(
                &override_path,
                format!("'{server}' is not in this policy's allowed_servers: the override could never apply"),
            ));
        }
        check_names(tools, &override_path, source, errors);
        policy
            .tool_overrides
            .insert(server.clone(), tools.iter().cloned().collect());
    }
    for (server, tools) in &entry.require_confirmation {
        let confirm_path = path.clone().key("require_confirmation").key(server);
        if !known(server) {
            errors.push(source.error_at_key(&confirm_path, unknown_server(server, raw)));
        }
        check_names(tools, &confirm_path, source, errors);
        policy
            .require_confirmation
            .insert(server.clone(), tools.iter().cloned().collect());
    }
    policy
}

/// A server has exactly one transport: `command` (stdio) or `url` (Streamable HTTP), and only
/// the keys of that transport.
fn transport(
    server: &RawMcpServer,
    path: &KeyPath,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> Option<Transport> {
    match (&server.command, &server.url) {
        (Some(_), Some(_)) => {
            errors.push(source.error_at_key(
                &path.clone().key("url"),
                "set either command (a stdio server) or url (a Streamable HTTP server), not both",
            ));
            None
        }
        (None, None) => {
            errors.push(source.error_at_key(
                path,
                "an MCP server needs command (a stdio server) or url (a Streamable HTTP server)",
            ));
            None
        }
        (Some(command), None) => {
            if !server.headers.is_empty() {
                errors.push(source.error_at_key(
                    &path.clone().key("headers"),
                    "headers are for url servers; a command server gets env",
                ));
            }
            if command.0.trim().is_empty() {
                errors.push(source.error_at_key(&path.clone().key("command"), "must not be empty"));
                return None;
            }
            Some(Transport::Stdio {
                command: command.0.clone(),
                args: server.args.iter().map(|arg| arg.0.clone()).collect(),
                env: server
                    .env
                    .iter()
                    .map(|(key, value)| (key.clone(), value.0.clone()))
                    .collect(),
                cwd: server.cwd.as_ref().map(|cwd| cwd.0.clone().into()),
            })
        }
        (None, Some(url)) => {
            for (key, present) in [
                ("args", !server.args.is_empty()),
                ("env", !server.env.is_empty()),
                ("cwd", server.cwd.is_some()),
            ] {
                if present {
                    errors.push(source.error_at_key(
                        &path.clone().key(key),
                        format!("{key} is for command servers; a url server gets headers"),
                    ));
                }
            }
            let url_path = path.clone().key("url");
            match url.0.parse::<http::Uri>() {
                Ok(uri)
                    if matches!(uri.scheme_str(), Some("http" | "https"))
                        && uri.host().is_some() => {}
                _ => {
                    errors.push(
                        source
                            .error_at_key(&url_path, format!("'{}' is not an http(s) URL", url.0)),
                    );
                    return None;
                }
            }
            let mut headers = Vec::new();
            for (name, value) in &server.headers {
                let header_path = path.clone().key("headers").key(name);
                match (
                    http::HeaderName::from_bytes(name.as_bytes()),
                    http::HeaderValue::from_str(&value.0),
                ) {
                    (Ok(name), Ok(mut value)) => {
                        value.set_sensitive(true);
                        headers.push((name, value));
                    }
                    (Err(_), _) => {
                        errors.push(source.error_at_key(&header_path, "not a valid header name"))
                    }
                    (_, Err(_)) => errors.push(source.error_at_key(
                        &header_path,
                        "not a valid header value (visible ASCII only)",
                    )),
                }
            }
            Some(Transport::Http {
                url: url.0.clone(),
                headers,
            })
        }
    }
}

fn check_names(names: &[String], path: &KeyPath, source: &Source, errors: &mut Vec<ConfigError>) {
    for (index, name) in names.iter().enumerate() {
        if name.trim().is_empty() {
            errors.push(
                source.error_at_key(&path.clone().index(index), "a tool name must not be empty"),
            );
        }
    }
}

fn unknown_server(server: &str, raw: &RawConfig) -> String {
    let known: Vec<&str> = raw.mcp_servers.keys().map(String::as_str).collect();
    format!(
        "unknown MCP server '{server}' (declared: {})",
        if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        }
    )
}
