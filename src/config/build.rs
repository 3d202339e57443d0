//! Turns the parsed file into the runtime [`Config`]: checks references between sections, merges
//! each route's plugin chain with the gateway-wide one, and builds every plugin from its
//! settings. Collects every problem rather than stopping at the first.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolgate_plugin::prometheus_client::registry::Registry;
use toolgate_plugin::schema::SchemaChecker;
use toolgate_plugin::{
    BuildContext, CatalogTool, FactoryContext, MemoryStore, PluginFactory, StateStore,
    StoreFailMode, Tenant, ToolCatalog, WireFormat,
};
use toolgate_plugin::{directives, taxonomy};

use super::source::{ConfigError, ConfigErrors, KeyPath, Source};
use super::{Config, OnBlockMode, RawConfig, RawPluginEntry, ServerConfig, settings_to_json};
use crate::on_block::{DEFAULT_MAX_RETRIES, DEFAULT_RETRY_DEADLINE, OnBlock, RetryLimits};
use crate::pipeline::Mode;
use crate::pipeline::{Chain, ChainEntry};
use crate::router::{Route, RouteFormat, Router, UnguardedCalls, UnreadableAnswers};
use crate::telemetry::AuditOutput;
use crate::tenants::{KeyDigest, RouteAuth, TenantDirectory, digest, parse_digest};
use crate::upstream::{Upstream, UpstreamAuth, UpstreamSettings};

/// The plugins this process can build, by name. Created once per process (plugins register
/// their metrics here), then used by every config load.
pub struct PluginRegistry {
    factories: BTreeMap<&'static str, Arc<dyn PluginFactory>>,
    /// The state store of the last load, reused while `[store]` names the same place, so a
    /// reload keeps the counters (memory) and the connection (Redis).
    store: Mutex<Option<(StoreKey, Arc<dyn StateStore>)>>,
    /// tool_selection's schema checks, for the MCP endpoint (arguments and results).
    schemas: SchemaChecker,
}

/// What identifies a store across loads: its URL (none = memory), timeout and CA certificate.
type StoreKey = (Option<String>, Duration, Option<Vec<u8>>);

impl PluginRegistry {
    /// An empty registry.
    pub fn empty() -> Self {
        PluginRegistry {
            factories: BTreeMap::new(),
            store: Mutex::new(None),
            schemas: SchemaChecker::standalone(),
        }
    }

    /// Every plugin shipped with toolgate: the factories of each crate in
    /// [`crate::plugins::BUILTIN`].
    pub fn builtin(metrics: &mut Registry) -> Self {
        let schemas = SchemaChecker::new(metrics);
        let mut context = FactoryContext {
            metrics,
            schemas: &schemas,
        };
        let factories: Vec<_> = crate::plugins::BUILTIN
            .iter()
            .flat_map(|crate_factories| crate_factories(&mut context))
            .collect();
        let mut registry = PluginRegistry::empty();
        registry.schemas = schemas.clone();
        factories
            .into_iter()
            .fold(registry, |registry, factory| registry.with(factory))
    }

    /// The process's JSON Schema checks, whose compiled schemas tool_selection shares.
    pub fn schema_checker(&self) -> &SchemaChecker {
        &self.schemas
    }

    /// Adds a factory (a user's own plugin, or a test's).
    pub fn with(mut self, factory: Arc<dyn PluginFactory>) -> Self {
        self.factories.insert(factory.name(), factory);
        self
    }

    fn get(&self, name: &str) -> Option<&Arc<dyn PluginFactory>> {
        self.factories.get(name)
    }

    /// The store `[store]` names: the one of the previous load when it names the same place,
    /// else a new one (which connects on first use, so loading never waits on the network).
    fn store_for(
        &self,
        url: Option<&str>,
        timeout: Duration,
        root_certificate: Option<Vec<u8>>,
    ) -> Result<Arc<dyn StateStore>, String> {
        let key: StoreKey = (url.map(str::to_owned), timeout, root_certificate.clone());
        let mut cached = self
            .store
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some((cached_key, store)) = cached.as_ref()
            && *cached_key == key
        {
            return Ok(store.clone());
        }
        let store: Arc<dyn StateStore> = match url {
            None => Arc::new(MemoryStore::default()),
            Some(url) => Arc::new(toolgate_store_redis::RedisStore::new(
                url,
                timeout,
                root_certificate,
            )?),
        };
        *cached = Some((key, store.clone()));
        Ok(store)
    }

    /// The `/health` sections of the factories that report one (validator services' breakers).
    pub fn health_sections(&self) -> Vec<(&'static str, serde_json::Value)> {
        self.factories
            .values()
            .filter_map(|factory| factory.health())
            .collect()
    }

    fn names(&self) -> String {
        self.factories
            .keys()
            .copied()
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub(super) fn build(
    raw: RawConfig,
    source: &Source,
    plugins: &PluginRegistry,
) -> Result<Config, ConfigErrors> {
    let mut errors = Vec::new();
    let server = build_server(&raw, source, &mut errors);

    let mut upstreams = BTreeMap::new();
    for (name, upstream) in &raw.upstreams {
        for (key, value) in [
            ("connect_timeout_ms", upstream.connect_timeout_ms),
            ("response_timeout_ms", upstream.response_timeout_ms),
            ("read_timeout_ms", upstream.read_timeout_ms),
        ] {
            if value == 0 {
                let path = KeyPath::default().key("upstreams").key(name).key(key);
                errors.push(source.error_at_key(&path, "must be greater than 0"));
            }
        }
        let auth = match upstream.auth.as_deref().map(UpstreamAuth::parse) {
            Some(Err(message)) => {
                let path = KeyPath::default().key("upstreams").key(name).key("auth");
                errors.push(source.error_at_key(&path, message));
                None
            }
            Some(Ok(auth)) => Some(auth),
            None => None,
        };
        let tenant_keys = raw
            .tenants
            .iter()
            .filter_map(|(tenant, entry)| {
                let key = entry.upstream_keys.get(name)?;
                Some((tenant.clone(), key.0.trim().to_owned()))
            })
            .collect();
        let settings = UpstreamSettings {
            name: name.clone(),
            url: upstream.url.0.clone(),
            api_key: upstream.api_key.as_ref().map(|key| key.0.clone()),
            auth,
            tenant_keys,
            connect_timeout: Duration::from_millis(upstream.connect_timeout_ms),
            response_timeout: Duration::from_millis(upstream.response_timeout_ms),
            read_timeout: Duration::from_millis(upstream.read_timeout_ms),
        };
        match Upstream::new(settings) {
            Ok(built) => {
                upstreams.insert(name.clone(), Arc::new(built));
            }
            Err(message) => errors.push(source.error_at_key(
                &KeyPath::default().key("upstreams").key(name).key("url"),
                message,
            )),
        }
    }

    let mut global_keys = HashSet::new();
    for (index, entry) in raw.plugins.iter().enumerate() {
        let entry_path = KeyPath::default().key("plugins").index(index);
        if plugins.get(&entry.name).is_none() {
            let path = entry_path.clone().key("name");
            errors.push(source.error_at_key(&path, unknown_plugin(&entry.name, plugins)));
        }
        if !global_keys.insert(entry.id.as_deref().unwrap_or(&entry.name)) {
            errors.push(duplicate_entry(entry, &entry_path, source));
        }
    }

    let catalog = Arc::new(build_catalog(&raw, source, &mut errors));
    let mut tenants = build_tenants(&raw, source, &mut errors);
    if let Some(jwt) = super::jwt::build_jwt(&raw, source, &catalog, &mut errors) {
        tenants = tenants.with_jwt(jwt);
    }
    let mcp = super::mcp::build_mcp(&raw, source, &mut errors);
    let mut context = BuildContext::default();
    context.catalog = catalog.clone();
    context.tenants = tenants.by_name().clone();
    if let Some((store, fail_mode)) = build_store(&raw, source, plugins, &mut errors) {
        context.store = store;
        context.store_fail_mode = fail_mode;
    }
    context.services = Arc::new(super::services::build_services(&raw, source, &mut errors));

    let mut routes = Vec::new();
    let mut seen_paths = HashSet::new();
    for (index, route) in raw.routes.iter().enumerate() {
        let route_path = KeyPath::default().key("routes").index(index);
        if !route.path.starts_with('/') {
            errors.push(source.error_at_key(
                &route_path.clone().key("path"),
                "a route path must start with '/'",
            ));
        } else if let Some(problem) = non_canonical_route_path(&route.path) {
            errors.push(source.error_at_key(&route_path.clone().key("path"), problem));
        } else if !seen_paths.insert(route.path.to_ascii_lowercase()) {
            errors.push(source.error_at_key(
                &route_path.clone().key("path"),
                format!("route '{}' is defined twice", route.path),
            ));
        }
        let is_mcp = keyword(
            route.kind.as_deref(),
            (&route_path, "kind"),
            &[("llm", false), ("mcp", true)],
            false,
            source,
            &mut errors,
        );
        let upstream = if is_mcp {
            check_mcp_route(route, &raw, &route_path, source, &mut errors);
            None
        } else {
            match &route.upstream {
                None => {
                    errors.push(source.error_at_key(
                        &route_path,
                        "an LLM route needs an upstream (or kind = \"mcp\")",
                    ));
                    None
                }
                Some(name) => {
                    let upstream = upstreams.get(name).cloned();
                    if upstream.is_none() && !raw.upstreams.contains_key(name) {
                        let known = raw.upstreams.keys().cloned().collect::<Vec<_>>().join(", ");
                        errors.push(source.error_at_key(
                            &route_path.clone().key("upstream"),
                            format!(
                                "unknown upstream '{name}' (defined: {})",
                                if known.is_empty() {
                                    "none".into()
                                } else {
                                    known
                                }
                            ),
                        ));
                    }
                    upstream
                }
            }
        };
        let format = match route.format.as_deref() {
            _ if is_mcp => RouteFormat::Auto,
            None | Some("auto") => RouteFormat::Auto,
            Some(name) => match WireFormat::from_name(name) {
                Some(format) => RouteFormat::Fixed(format),
                None => {
                    let known: Vec<&str> =
                        WireFormat::ALL.iter().map(|format| format.name()).collect();
                    errors.push(source.error_at_key(
                        &route_path.clone().key("format"),
                        format!(
                            "unknown format '{name}' (one of: auto, {})",
                            known.join(", ")
                        ),
                    ));
                    RouteFormat::Auto
                }
            },
        };
        let auth = match route.auth.as_deref() {
            None if tenants.is_empty() => RouteAuth::None,
            word => keyword(
                word,
                (&route_path, "auth"),
                &[("tenant", RouteAuth::Tenant), ("none", RouteAuth::None)],
                RouteAuth::Tenant,
                source,
                &mut errors,
            ),
        };
        let unreadable = keyword(
            route.unreadable_answers.as_deref(),
            (&route_path, "unreadable_answers"),
            &[
                ("block", UnreadableAnswers::Block),
                ("pass", UnreadableAnswers::Pass),
            ],
            UnreadableAnswers::Block,
            source,
            &mut errors,
        );
        let unguarded_calls = keyword(
            route.unguarded_calls.as_deref(),
            (&route_path, "unguarded_calls"),
            &[
                ("refuse", UnguardedCalls::Refuse),
                ("log", UnguardedCalls::Log),
                ("pass", UnguardedCalls::Pass),
            ],
            UnguardedCalls::Refuse,
            source,
            &mut errors,
        );
        if auth == RouteAuth::Tenant && tenants.is_empty() {
            errors.push(source.error_at_key(
                &route_path.clone().key("auth"),
                "auth = \"tenant\" needs at least one [tenants.NAME] with a key",
            ));
        }
        let mut route_context = context.clone();
        route_context.route = route.path.clone();
        route_context.mcp_route = is_mcp;
        let chain = build_chain(
            &raw.plugins,
            &route.plugins,
            &route_path,
            source,
            plugins,
            &route_context,
            &mut errors,
        );
        let built = match upstream {
            Some(upstream) => Some(Route::new(route.path.clone(), upstream, chain, format)),
            None if is_mcp => Some(Route::mcp(route.path.clone(), chain)),
            None => None,
        };
        if let Some(mut built) = built {
            built.auth = auth;
            built.unreadable = unreadable;
            built.unguarded_calls = unguarded_calls;
            routes.push(built);
        }
    }

    let audit = match raw.audit.output.as_ref().map(|output| output.0.as_str()) {
        None | Some("stdout") => AuditOutput::Stdout,
        Some("stderr") => AuditOutput::Stderr,
        Some("off") => AuditOutput::Off,
        Some(path) => AuditOutput::File(path.into()),
    };

    match (server, errors.is_empty()) {
        (Some(server), true) => Ok(Config {
            server,
            router: Router::new(routes),
            audit,
            catalog,
            tenants,
            mcp,
            store: context.store,
            store_fail_mode: context.store_fail_mode,
            origin: source.origin.to_owned(),
        }),
        _ => {
            // A gateway-wide entry is merged into every route, so its mistake would be found
            // once per route: each is said once, at its line.
            let mut said = Vec::with_capacity(errors.len());
            for error in errors {
                if !said.contains(&error) {
                    said.push(error);
                }
            }
            Err(ConfigErrors(said))
        }
    }
}

/// An MCP route is served by toolgate itself: it has no upstream and no LLM format, and it
/// needs backends to stand in front of.
/// Why a route path could never match a request: requests are routed on their canonical path
/// (decoded, no dot segments or repeated slashes), so a route must be written in that form.
fn non_canonical_route_path(path: &str) -> Option<String> {
    match crate::request_path::canonical(path) {
        Ok(canonical) if canonical == path => None,
        Ok(canonical) => Some(format!(
            "route path '{path}' is not in the form requests are routed on; write it as '{canonical}'"
        )),
        Err(refusal) => Some(format!("route path '{path}' can never match: {refusal}")),
    }
}

fn check_mcp_route(
    route: &super::RawRoute,
    raw: &RawConfig,
    route_path: &KeyPath,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) {
    for (key, present) in [
        ("upstream", route.upstream.is_some()),
        ("format", route.format.is_some()),
    ] {
        if present {
            errors.push(source.error_at_key(
                &route_path.clone().key(key),
                format!("an MCP route has no {key}: its backends are [mcp_servers.NAME]"),
            ));
        }
    }
    // Its answers are MCP results toolgate reads itself: there is no model answer to pass.
    for (key, set) in [
        ("unreadable_answers", route.unreadable_answers.is_some()),
        ("unguarded_calls", route.unguarded_calls.is_some()),
    ] {
        if set {
            errors.push(source.error_at_key(
                &route_path.clone().key(key),
                format!("an MCP route has no {key}: toolgate reads every MCP result itself"),
            ));
        }
    }
    if raw.mcp_servers.is_empty() {
        errors.push(source.error_at_key(
            &route_path.clone().key("kind"),
            "an MCP route needs at least one [mcp_servers.NAME]",
        ));
    }
}

fn build_server(
    raw: &RawConfig,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> Option<ServerConfig> {
    let server_path = KeyPath::default().key("server");
    let parse_address = |key: &str, text: &str, errors: &mut Vec<ConfigError>| match text
        .parse::<SocketAddr>()
    {
        Ok(address) => Some(address),
        Err(_) => {
            errors.push(source.error_at_key(
                &server_path.clone().key(key),
                format!("'{text}' is not a socket address (write host:port, e.g. 127.0.0.1:8080)"),
            ));
            None
        }
    };
    let listen = parse_address("listen", &raw.server.listen.0, errors);
    let admin_listen = match raw.server.admin_listen.as_ref().map(|text| text.0.as_str()) {
        None | Some("") | Some("off") => Some(None),
        Some(text) => parse_address("admin_listen", text, errors).map(Some),
    };
    for (key, value) in [
        ("max_request_body_bytes", raw.server.max_request_body_bytes),
        (
            "max_response_body_bytes",
            raw.server.max_response_body_bytes,
        ),
        ("max_connections", raw.server.max_connections),
    ] {
        if value == 0 {
            errors
                .push(source.error_at_key(&server_path.clone().key(key), "must be greater than 0"));
        }
    }
    let server = &raw.server;
    // A zero timeout would cut every connection or body at once; `request_body_deadline_ms`
    // is the one bound that may be off (0).
    for (key, value) in [
        ("shutdown_grace_ms", server.shutdown_grace_ms),
        ("header_read_timeout_ms", server.header_read_timeout_ms),
        ("request_body_timeout_ms", server.request_body_timeout_ms),
        ("first_byte_timeout_ms", server.first_byte_timeout_ms),
        ("handshake_timeout_ms", server.handshake_timeout_ms),
        ("idle_timeout_ms", server.idle_timeout_ms),
        ("write_timeout_ms", server.write_timeout_ms),
        (
            "http2_keep_alive_interval_ms",
            server.http2_keep_alive_interval_ms,
        ),
        (
            "http2_keep_alive_timeout_ms",
            server.http2_keep_alive_timeout_ms,
        ),
    ] {
        if value == 0 {
            errors.push(source.error_at_key(
                &server_path.clone().key(key),
                "must be greater than 0 (milliseconds)",
            ));
        }
    }
    if server.handshake_timeout_ms < server.first_byte_timeout_ms {
        errors.push(source.error_at_key(
            &server_path.clone().key("handshake_timeout_ms"),
            format!(
                "must be at least first_byte_timeout_ms ({} ms): the handshake starts with the first byte",
                server.first_byte_timeout_ms
            ),
        ));
    }
    let millis = Duration::from_millis;
    Some(ServerConfig {
        listen: listen?,
        admin_listen: admin_listen?,
        max_request_body_bytes: server.max_request_body_bytes,
        max_response_body_bytes: server.max_response_body_bytes,
        shutdown_grace: millis(server.shutdown_grace_ms),
        header_read_timeout: millis(server.header_read_timeout_ms),
        request_body_timeout: millis(server.request_body_timeout_ms),
        request_body_deadline: (server.request_body_deadline_ms > 0)
            .then(|| millis(server.request_body_deadline_ms)),
        max_connections: server.max_connections,
        first_byte_timeout: millis(server.first_byte_timeout_ms),
        handshake_timeout: millis(server.handshake_timeout_ms),
        idle_timeout: millis(server.idle_timeout_ms),
        write_timeout: millis(server.write_timeout_ms),
        http2_keep_alive_interval: millis(server.http2_keep_alive_interval_ms),
        http2_keep_alive_timeout: millis(server.http2_keep_alive_timeout_ms),
    })
}

/// A setting that is one of a few words: the value `choices` gives the word at `key` of
/// `table`, or `default` when the config leaves it out. A word that is none of them is an error
/// that lists them, and reads as `default` so the rest of the config is still checked.
fn keyword<T: Copy>(
    word: Option<&str>,
    (table, key): (&KeyPath, &str),
    choices: &[(&str, T)],
    default: T,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> T {
    let Some(word) = word else {
        return default;
    };
    if let Some((_, value)) = choices.iter().find(|(choice, _)| *choice == word) {
        return *value;
    }
    let words: Vec<&str> = choices.iter().map(|(choice, _)| *choice).collect();
    errors.push(source.error_at_key(
        &table.clone().key(key),
        format!("unknown {key} '{word}' (one of: {})", words.join(", ")),
    ));
    default
}

/// `[store]`: the shared state store and what to do when it cannot answer.
fn build_store(
    raw: &RawConfig,
    source: &Source,
    plugins: &PluginRegistry,
    errors: &mut Vec<ConfigError>,
) -> Option<(Arc<dyn StateStore>, StoreFailMode)> {
    let store_path = KeyPath::default().key("store");
    let fail_mode = keyword(
        raw.store.fail_mode.as_deref(),
        (&store_path, "fail_mode"),
        &[
            ("block", StoreFailMode::Block),
            ("allow", StoreFailMode::Allow),
        ],
        StoreFailMode::Block,
        source,
        errors,
    );
    let timeout_ms = raw.store.timeout_ms.unwrap_or(500);
    if timeout_ms == 0 {
        errors.push(source.error_at_key(
            &store_path.clone().key("timeout_ms"),
            "must be greater than 0",
        ));
    }
    let url = raw
        .store
        .url
        .as_ref()
        .map(|url| url.0.trim())
        .filter(|url| !url.is_empty() && *url != "memory");
    let root_certificate = match &raw.store.ca_file {
        None => None,
        Some(path) => {
            let path = source.relative_path(&path.0);
            match std::fs::read(&path) {
                Ok(pem) => Some(pem),
                Err(error) => {
                    errors.push(source.error_at_key(
                        &store_path.clone().key("ca_file"),
                        format!("cannot read {}: {error}", path.display()),
                    ));
                    return None;
                }
            }
        }
    };
    match plugins.store_for(
        url,
        Duration::from_millis(timeout_ms.max(1)),
        root_certificate,
    ) {
        Ok(store) => Some((store, fail_mode)),
        Err(message) => {
            let key = if message.contains("CA certificate") {
                "ca_file"
            } else {
                "url"
            };
            errors.push(source.error_at_key(&store_path.key(key), message));
            None
        }
    }
}

/// A second entry with the same key in one list of plugins.
fn duplicate_entry(entry: &RawPluginEntry, entry_path: &KeyPath, source: &Source) -> ConfigError {
    match &entry.id {
        Some(id) => source.error_at_key(
            &entry_path.clone().key("id"),
            format!("id '{id}' is used twice in this list of plugins"),
        ),
        None => source.error_at_key(
            &entry_path.clone().key("name"),
            format!(
                "plugin '{}' appears twice in this list: give each entry a distinct `id`",
                entry.name
            ),
        ),
    }
}

fn unknown_plugin(name: &str, plugins: &PluginRegistry) -> String {
    format!("unknown plugin '{name}' (available: {})", plugins.names())
}

/// One plugin of a route's chain, as merged from the gateway-wide and the route's entries.
struct MergedEntry<'a> {
    /// The merge key: the entry's `id`, or its plugin name.
    key: &'a str,
    name: &'a str,
    enabled: bool,
    mode: Mode,
    priority: Option<i32>,
    on_block: Option<OnBlockMode>,
    /// Whether the route's own entry set `on_block` (not only the gateway-wide one).
    on_block_from_route: bool,
    max_retries: Option<u32>,
    retry_deadline_ms: Option<u64>,
    hold_text: Option<bool>,
    /// Whether the route's own entry set `hold_text`.
    hold_text_from_route: bool,
    settings: toml::Table,
    /// Where each top-level settings key came from, to point errors at the right line.
    key_origins: BTreeMap<String, KeyPath>,
    entry_path: KeyPath,
}

/// Merges the gateway-wide entries and the route's into one chain: a route entry overrides the
/// gateway-wide entry with the same key (its `id`, else its plugin name). Within one list a key
/// may appear once, so two instances of a plugin need distinct ids.
fn build_chain(
    global: &[RawPluginEntry],
    local: &[RawPluginEntry],
    route_path: &KeyPath,
    source: &Source,
    plugins: &PluginRegistry,
    context: &BuildContext,
    errors: &mut Vec<ConfigError>,
) -> Chain {
    let mut merged: Vec<MergedEntry> = Vec::new();
    let global_path = KeyPath::default().key("plugins");
    let local_path = route_path.clone().key("plugins");
    for (list, list_path) in [(global, &global_path), (local, &local_path)] {
        let mut keys_in_list = HashSet::new();
        for (index, entry) in list.iter().enumerate() {
            let entry_path = list_path.clone().index(index);
            let key = entry.id.as_deref().unwrap_or(&entry.name);
            if !keys_in_list.insert(key) {
                // The gateway-wide list is reported once, in `build`, not once per route.
                if list_path == &local_path {
                    errors.push(duplicate_entry(entry, &entry_path, source));
                }
                continue;
            }
            let position = merged.iter().position(|existing| existing.key == key);
            let target = match position {
                Some(position) => &mut merged[position],
                None => {
                    merged.push(MergedEntry {
                        key,
                        name: &entry.name,
                        enabled: true,
                        mode: Mode::Enforce,
                        priority: None,
                        on_block: None,
                        on_block_from_route: false,
                        max_retries: None,
                        retry_deadline_ms: None,
                        hold_text: None,
                        hold_text_from_route: false,
                        settings: toml::Table::new(),
                        key_origins: BTreeMap::new(),
                        entry_path: entry_path.clone(),
                    });
                    let last = merged.len() - 1;
                    &mut merged[last]
                }
            };
            if target.name != entry.name {
                errors.push(source.error_at_key(
                    &entry_path.clone().key("name"),
                    format!(
                        "entry '{key}' is plugin '{}' in the gateway-wide chain, not '{}': an override must name the same plugin",
                        target.name, entry.name
                    ),
                ));
                continue;
            }
            target.enabled = entry.enabled.unwrap_or(target.enabled);
            target.mode = entry.mode.unwrap_or(target.mode);
            target.priority = entry.priority.or(target.priority);
            if let Some(error) = retry_keys_without_retry(entry, &entry_path, source) {
                errors.push(error);
            }
            target.on_block = entry.on_block.or(target.on_block);
            target.on_block_from_route |= entry.on_block.is_some() && list_path == &local_path;
            target.max_retries = entry.max_retries.or(target.max_retries);
            target.retry_deadline_ms = entry.retry_deadline_ms.or(target.retry_deadline_ms);
            target.hold_text = entry.hold_text.or(target.hold_text);
            target.hold_text_from_route |= entry.hold_text.is_some() && list_path == &local_path;
            for (setting, value) in entry.settings.iter().flatten() {
                target.settings.insert(setting.clone(), value.clone());
                target.key_origins.insert(
                    setting.clone(),
                    entry_path.clone().key("settings").key(setting),
                );
            }
            target.entry_path = entry_path;
        }
    }

    let mut chain = Vec::new();
    for entry in merged.into_iter().filter(|entry| entry.enabled) {
        let Some(factory) = plugins.get(entry.name) else {
            if entry.entry_path.0.len() > 2 {
                errors.push(source.error_at_key(
                    &entry.entry_path.clone().key("name"),
                    unknown_plugin(entry.name, plugins),
                ));
            }
            continue;
        };
        let locate = |dotted: &str| {
            let first = dotted.split(['.', '[']).next().unwrap_or_default();
            match entry.key_origins.get(first) {
                Some(origin) => {
                    let rest = dotted.strip_prefix(first).unwrap_or_default();
                    origin.clone().dotted(rest)
                }
                None => entry.entry_path.clone().key("settings").dotted(dotted),
            }
        };
        let settings = match settings_to_json(&entry.settings) {
            Ok(settings) => settings,
            Err((path, message)) => {
                errors.push(source.error_at_key(&locate(&path), message));
                continue;
            }
        };
        let on_block = match on_block(&entry, source) {
            // The client of an MCP call gets a JSON-RPC error: there is no model to ask again
            // and no answer to put a message in.
            // A gateway-wide choice is for the LLM routes; one the MCP route makes is a mistake.
            Ok(on_block) if context.mcp_route && on_block != OnBlock::Error => {
                if entry.on_block_from_route {
                    errors.push(source.error_at_key(
                        &entry.entry_path.clone().key("on_block"),
                        "on_block has no effect on an MCP route: a refused MCP call is a JSON-RPC error",
                    ));
                    continue;
                }
                OnBlock::Error
            }
            Ok(on_block) => on_block,
            Err(error) => {
                errors.push(error);
                continue;
            }
        };
        // Like on_block, a gateway-wide hold_text is for the LLM routes; the MCP route's own is
        // a setting that cannot take effect.
        if context.mcp_route && entry.hold_text_from_route {
            errors.push(source.error_at_key(
                &entry.entry_path.clone().key("hold_text"),
                "hold_text has no effect on an MCP route: an MCP call has no text stream to hold",
            ));
            continue;
        }
        let hold_text = entry.hold_text == Some(true) && !context.mcp_route;
        // Holding text only serves a recovery; without one it would delay every stream for
        // nothing. (A gateway-wide entry that an MCP route turns to `error` holds nothing.)
        if hold_text && on_block == OnBlock::Error && !context.mcp_route {
            errors.push(source.error_at_key(
                &entry.entry_path.clone().key("hold_text"),
                "hold_text applies only with on_block = \"retry\" or \"message\"",
            ));
            continue;
        }
        match factory.build(&settings, context) {
            Ok(plugin) => chain.push(ChainEntry {
                name: entry.key.to_owned(),
                plugin,
                mode: entry.mode,
                priority: entry.priority.unwrap_or_else(|| factory.default_priority()),
                on_block,
                hold_text,
            }),
            Err(error) => errors.extend(
                error
                    .each()
                    .into_iter()
                    .map(|error| source.error_at_key(&locate(&error.path), error.message)),
            ),
        }
    }
    Chain::new(chain)
}

/// `max_retries` or `retry_deadline_ms` on an entry that itself says its blocks are not
/// retried: a setting that would do nothing is an error, not a silent no-op.
fn retry_keys_without_retry(
    entry: &RawPluginEntry,
    entry_path: &KeyPath,
    source: &Source,
) -> Option<ConfigError> {
    let key = if entry.max_retries.is_some() {
        "max_retries"
    } else if entry.retry_deadline_ms.is_some() {
        "retry_deadline_ms"
    } else {
        return None;
    };
    match entry.on_block {
        Some(OnBlockMode::Retry) => None,
        Some(_) => Some(source.error_at_key(
            &entry_path.clone().key(key),
            format!("{key} applies only with on_block = \"retry\""),
        )),
        None => None,
    }
}

/// The merged entry's `on_block`, with its retry limits checked.
fn on_block(entry: &MergedEntry<'_>, source: &Source) -> Result<OnBlock, ConfigError> {
    let at = |key: &str| entry.entry_path.clone().key(key);
    // Set with no `on_block` at any level, the limits would do nothing (the default is
    // `error`); set beside an explicit other choice, `retry_keys_without_retry` said so.
    if entry.on_block.is_none() {
        let key = if entry.max_retries.is_some() {
            Some("max_retries")
        } else {
            entry.retry_deadline_ms.map(|_| "retry_deadline_ms")
        };
        if let Some(key) = key {
            return Err(source.error_at_key(
                &at(key),
                format!("{key} applies only with on_block = \"retry\" (the default is \"error\")"),
            ));
        }
    }
    match entry.on_block {
        None | Some(OnBlockMode::Error) => Ok(OnBlock::Error),
        Some(OnBlockMode::Message) => Ok(OnBlock::Message),
        Some(OnBlockMode::Retry) => {
            let max_retries = entry.max_retries.unwrap_or(DEFAULT_MAX_RETRIES);
            if !(1..=10).contains(&max_retries) {
                return Err(source.error_at_key(
                    &at("max_retries"),
                    format!("max_retries must be between 1 and 10, not {max_retries}"),
                ));
            }
            let deadline = match entry.retry_deadline_ms {
                None => DEFAULT_RETRY_DEADLINE,
                Some(0) => {
                    return Err(source.error_at_key(
                        &at("retry_deadline_ms"),
                        "retry_deadline_ms must be more than 0",
                    ));
                }
                Some(ms) => Duration::from_millis(ms),
            };
            Ok(OnBlock::Retry(RetryLimits {
                max_retries,
                deadline,
            }))
        }
    }
}

/// The error for a category the taxonomy does not know, naming the ones it does.
fn unknown_category(category: &str) -> String {
    format!(
        "unknown category '{category}' (one of: {})",
        taxonomy::CATEGORIES.join(", ")
    )
}

/// `[tools.NAME]` into the catalog. Names, groups and states are exact and case-sensitive, so
/// only what could never match (an empty string) is refused here.
fn build_catalog(raw: &RawConfig, source: &Source, errors: &mut Vec<ConfigError>) -> ToolCatalog {
    let mut tools = Vec::new();
    for (name, entry) in &raw.tools {
        let tool_path = KeyPath::default().key("tools").key(name);
        let mut tool = CatalogTool::new(name.clone());
        if let Some(groups) = &entry.groups {
            tool.groups = if groups.is_empty() {
                vec![toolgate_plugin::catalog::DEFAULT_GROUP.to_owned()]
            } else {
                groups.clone()
            };
        }
        if let Some(states) = &entry.available_in_states {
            tool.available_in_states = states.clone();
        }
        tool.transition = entry.state.clone();
        tool.category = entry.category.clone();
        tool.action = entry.action.clone();
        tool.description = entry.description.clone();
        // A name no request could carry in a header (or that a comma would split) would make
        // the tool unreachable by group or state: refused here rather than never matched.
        let transition = tool.transition.iter().cloned().collect::<Vec<_>>();
        for (key, values, wildcard_allowed) in [
            ("groups", &tool.groups, false),
            ("available_in_states", &tool.available_in_states, true),
            ("state", &transition, false),
        ] {
            let unnamable = values.iter().find(|value| {
                let wildcard = value.as_str() == toolgate_plugin::catalog::WILDCARD;
                (wildcard && !wildcard_allowed) || !directives::is_valid_name(value)
            });
            if let Some(name) = unnamable {
                errors.push(source.error_at_key(
                    &tool_path.clone().key(key),
                    format!(
                        "'{}' is not a name a request can give: use 1-64 of A-Z a-z 0-9 _ . : -{}",
                        name.escape_debug(),
                        if wildcard_allowed { " (or *)" } else { "" }
                    ),
                ));
            }
        }
        if let Some(category) = &tool.category
            && !taxonomy::is_category(category)
        {
            let category_path = tool_path.clone().key("category");
            errors.push(source.error_at_key(&category_path, unknown_category(category)));
        }
        if let Some(action) = &tool.action
            && !taxonomy::is_action_type(action)
        {
            errors.push(source.error_at_key(
                &tool_path.clone().key("action"),
                format!(
                    "unknown action type '{action}' (write category:action, one of: {})",
                    taxonomy::ACTION_TYPES.join(", ")
                ),
            ));
        }
        tools.push(tool);
    }
    let mut catalog = ToolCatalog::new(tools);
    // Every plugin means a tool by its trimmed, case-folded key: two entries with one key would
    // be one tool with two policies, whichever plugin runs.
    for collision in catalog.collisions() {
        let path = KeyPath::default().key("tools").key(&collision.dropped);
        errors.push(source.error_at_key(&path, collision.to_string()));
    }
    for (level, entry) in &raw.access_levels {
        for (index, category) in entry.categories.iter().enumerate() {
            if !taxonomy::is_category(category) {
                let path = KeyPath::default()
                    .key("access_levels")
                    .key(level)
                    .key("categories")
                    .index(index);
                errors.push(source.error_at_key(&path, unknown_category(category)));
            }
        }
        catalog = catalog.with_access_level(level.clone(), entry.categories.clone());
    }
    for (name, tenant) in &raw.tenants {
        // A group no tool is in (nor `default`, nor `*`) is a typo: the tenant could never be
        // offered a tool through it.
        for (index, group) in tenant.groups.iter().enumerate() {
            if !catalog.knows_group(group) {
                let path = KeyPath::default()
                    .key("tenants")
                    .key(name)
                    .key("groups")
                    .index(index);
                errors.push(source.error_at_key(
                    &path,
                    format!("unknown group '{group}': no [tools.NAME] is in it (groups are named by the tools' `groups`; `default` and `*` always exist)"),
                ));
            }
        }
        if let Some(level) = &tenant.access_level
            && catalog.access_level(level).is_none()
        {
            let path = KeyPath::default()
                .key("tenants")
                .key(name)
                .key("access_level");
            errors.push(source.error_at_key(
                &path,
                format!(
                    "unknown access level '{level}' (one of: {}; define more in [access_levels.NAME])",
                    catalog.access_levels().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    catalog
}

/// `[tenants.NAME]` into the key table. Every tenant needs a key, and no key may belong to two
/// tenants (the request could not say whose it is).
fn build_tenants(
    raw: &RawConfig,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> TenantDirectory {
    let mut owners: BTreeMap<KeyDigest, &str> = BTreeMap::new();
    let mut tenants = Vec::new();
    for (name, entry) in &raw.tenants {
        let tenant_path = KeyPath::default().key("tenants").key(name);
        let mut digests = Vec::new();
        for (index, key) in entry.api_keys.iter().enumerate() {
            let path = tenant_path.clone().key("api_keys").index(index);
            if key.0.trim().is_empty() {
                errors.push(source.error_at_key(&path, "an API key must not be empty"));
            } else {
                digests.push((digest(key.0.trim().as_bytes()), path));
            }
        }
        for (index, hex) in entry.api_key_sha256.iter().enumerate() {
            let path = tenant_path.clone().key("api_key_sha256").index(index);
            match parse_digest(hex) {
                Some(parsed) => digests.push((parsed, path)),
                None => errors.push(source.error_at_key(
                    &path,
                    "not a SHA-256 digest: write 64 hex digits (printf %s \"$KEY\" | sha256sum)",
                )),
            }
        }
        // With [auth.jwt] a tenant may be known only by the tokens that name it.
        if entry.api_keys.is_empty() && entry.api_key_sha256.is_empty() && raw.auth.jwt.is_none() {
            errors.push(source.error_at_key(
                &tenant_path,
                "a tenant needs a key: set api_keys or api_key_sha256 (or identify tenants by JWT in [auth.jwt])",
            ));
        }
        for (upstream, key) in &entry.upstream_keys {
            let path = tenant_path.clone().key("upstream_keys").key(upstream);
            if !raw.upstreams.contains_key(upstream) {
                let known = raw.upstreams.keys().cloned().collect::<Vec<_>>().join(", ");
                errors.push(source.error_at_key(
                    &path,
                    format!("unknown upstream '{upstream}' (defined: {known})"),
                ));
            } else if key.0.trim().is_empty() {
                errors.push(source.error_at_key(&path, "an upstream key must not be empty"));
            }
        }
        for (parsed, path) in &digests {
            if let Some(owner) = owners.insert(*parsed, name) {
                errors.push(source.error_at_key(
                    path,
                    format!("this key is also tenant '{owner}''s: a key identifies one tenant"),
                ));
            }
        }
        let tenant = Tenant {
            name: name.clone(),
            // A tenant that names no group holds the one every untagged tool is in.
            groups: if entry.groups.is_empty() {
                vec![toolgate_plugin::catalog::DEFAULT_GROUP.to_owned()]
            } else {
                entry.groups.clone()
            },
            access_level: entry.access_level.clone(),
            allowed_tools: entry.allowed_tools.clone(),
            denied_tools: entry.denied_tools.clone(),
            agents: entry.agents.clone(),
        };
        tenants.push((
            Arc::new(tenant),
            digests.into_iter().map(|(digest, _)| digest).collect(),
        ));
    }
    TenantDirectory::new(tenants)
}

#[cfg(test)]
mod tests {
    use toolgate_plugin::prometheus_client::registry::Registry;

    use super::*;
    use crate::config::Config;

    const HEAD: &str = "[upstreams.llm]\nurl = \"http://127.0.0.1:1\"\n\n\
        [services.check]\nurl = \"http://127.0.0.1:2/v\"\n\n";

    fn chains(body: &str) -> Result<Vec<(String, Vec<String>)>, String> {
        let registry = PluginRegistry::builtin(&mut Registry::default());
        let config = Config::from_toml(&format!("{HEAD}{body}"), "t.toml", &registry)
            .map_err(|errors| errors.to_string())?;
        Ok(config
            .router
            .routes()
            .map(|route| {
                let names = route.chain.names().map(str::to_owned).collect();
                (route.path.to_string(), names)
            })
            .collect())
    }

    #[test]
    fn entries_merge_by_id_and_a_route_may_override_one_instance() {
        let body = "[[plugins]]\nname = \"service\"\nid = \"a\"\n[plugins.settings]\nservice = \"check\"\n\n\
            [[plugins]]\nname = \"service\"\nid = \"b\"\n[plugins.settings]\nservice = \"check\"\n\n\
            [[routes]]\npath = \"/one\"\nupstream = \"llm\"\n\n\
            [[routes]]\npath = \"/two\"\nupstream = \"llm\"\n\
            [[routes.plugins]]\nname = \"service\"\nid = \"a\"\nenabled = false\n\
            [[routes.plugins]]\nname = \"service\"\nid = \"c\"\n[routes.plugins.settings]\nservice = \"check\"\n";
        let chains = chains(body).expect("loads");
        assert_eq!(
            chains,
            [
                ("/one".to_owned(), vec!["a".to_owned(), "b".to_owned()]),
                ("/two".to_owned(), vec!["b".to_owned(), "c".to_owned()]),
            ]
        );
    }

    #[test]
    fn duplicate_keys_and_overrides_of_another_plugin_are_located_errors() {
        let body = "[[plugins]]\nname = \"tool_selection\"\n\n[[plugins]]\nname = \"tool_selection\"\n\n\
            [[routes]]\npath = \"/one\"\nupstream = \"llm\"\n\
            [[routes.plugins]]\nname = \"service\"\nid = \"x\"\n[routes.plugins.settings]\nservice = \"check\"\n\
            [[routes.plugins]]\nname = \"service\"\nid = \"x\"\n[routes.plugins.settings]\nservice = \"check\"\n\
            [[routes.plugins]]\nname = \"service\"\nid = \"tool_selection\"\n";
        let errors = chains(body).expect_err("refused");
        for expected in [
            "t.toml:11:1: plugins[1].name: plugin 'tool_selection' appears twice in this list",
            "t.toml:23:1: routes[0].plugins[1].id: id 'x' is used twice in this list of plugins",
            "t.toml:27:1: routes[0].plugins[2].name: entry 'tool_selection' is plugin 'tool_selection' in the gateway-wide chain, not 'service'",
        ] {
            assert!(errors.contains(expected), "{expected}\nin\n{errors}");
        }
        assert_eq!(errors.lines().count(), 3, "each reported once:\n{errors}");
    }
}
