//! Turns the parsed file into the runtime [`Config`], table by table in the order a user writes
//! them (one file each under `build/`): checks references between sections, merges each route's
//! plugin chain with the gateway-wide one, and builds every plugin from its settings. Collects
//! every problem rather than stopping at the first.

mod catalog;
mod chain;
mod routes;
mod server;
mod store;
mod tenants;
mod upstreams;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use toolgate_plugin::prometheus_client::registry::Registry;
use toolgate_plugin::schema::SchemaChecker;
use toolgate_plugin::{BuildContext, FactoryContext, MemoryStore, PluginFactory, StateStore};

use super::source::{ConfigErrors, Source};
use super::{Config, RawConfig};
use crate::router::Router;
use crate::telemetry::AuditOutput;

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
    let server = server::build_server(&raw, source, &mut errors);
    let upstreams = upstreams::build_upstreams(&raw, source, &mut errors);
    chain::check_gateway_entries(&raw, source, plugins, &mut errors);
    let catalog = Arc::new(catalog::build_catalog(&raw, source, &mut errors));
    let mut tenants = tenants::build_tenants(&raw, source, &mut errors);
    if let Some(jwt) = super::jwt::build_jwt(&raw, source, &catalog, &mut errors) {
        tenants = tenants.with_jwt(jwt);
    }
    let mcp = super::mcp::build_mcp(&raw, source, &mut errors);
    let mut context = BuildContext::default();
    context.catalog = catalog.clone();
    context.tenants = tenants.by_name().clone();
    if let Some((store, fail_mode)) = store::build_store(&raw, source, plugins, &mut errors) {
        context.store = store;
        context.store_fail_mode = fail_mode;
    }
    context.services = Arc::new(super::services::build_services(
        &raw.services,
        source,
        &mut errors,
    ));
    let routes = routes::build_routes(
        &raw,
        source,
        plugins,
        &upstreams,
        &tenants,
        &context,
        &mut errors,
    );
    let audit = match raw.audit.output.as_ref().map(|output| output.0.as_str()) {
        None | Some("stdout") => AuditOutput::Stdout,
        Some("stderr") => AuditOutput::Stderr,
        Some("off") => AuditOutput::Off,
        Some(path) => AuditOutput::File(path.into()),
    };
    let capture = server::build_capture(&raw.audit, source, &mut errors);

    match (server, errors.is_empty()) {
        (Some(server), true) => Ok(Config {
            server,
            router: Router::new(routes),
            audit,
            capture,
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
