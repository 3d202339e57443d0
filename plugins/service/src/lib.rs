//! toolgate_service: the `service` plugin, which turns a check running as any HTTP service into
//! a guardrail through configuration alone (seed 002's two-tier model applied to guardrails).
//!
//! Tier 1 is the gateway-level descriptor `[services.NAME]` (url, timeout, config params,
//! headers, breaker), validated by the gateway and handed over in
//! [`BuildContext::services`](toolgate_plugin::BuildContext). Tier 2 is a chain entry
//! `name = "service"` whose settings name the service, give its config values, and say which
//! stages and tools it covers. One service can back many instances with different values.
//!
//! Design choices:
//! - All calls of one response in scope go to the service in one request; instances run
//!   concurrently with each other and with the judge because the gateway runs `pre_response`
//!   of a chain concurrently.
//! - One HTTP client (connection pool) and one circuit breaker per service, owned by the
//!   factory and shared by every instance and route; they survive a config reload as long as
//!   the descriptor is unchanged.
//! - A service that cannot answer (timeout, transport error, non-2xx, `error` set, garbage,
//!   open breaker) is handled by the instance's `fail_mode`: `block` (default) answers 403 with
//!   `service_unavailable`; `allow` lets the exchange through. The details go to the log only.
//! - A `modify` answer becomes the vocabulary's edits; a patch that cannot be applied in its
//!   stage is an invalid answer, never silently dropped.
//!
//! # Settings (unknown keys are refused)
//! - `service` (required): the `[services.NAME]` to call.
//! - `config`: the values of the service's config params; required ones must be set, unknown
//!   ones are refused.
//! - `stages` (`["pre_response"]`): `pre_request` and/or `pre_response`.
//! - `tools` (`["*"]`): tool-name patterns in scope (`*`, `?`, `[…]`; trimmed, case-folded).
//! - `fail_mode` (`"block"`): `"block"` or `"allow"`.
//!
//! # Layout
//! - `settings`: the instance's settings, checked against its descriptor; tool patterns.
//! - `envelope`: the request toolgate sends and the answer it reads, and their mapping to
//!   violations and edits.
//! - `client`: one service's pooled client, timeout, answer cap, breaker and metrics.
//! - `failure`: why a service gave no usable answer (`FailureKind`, `Failure`).
//! - `breaker`: the circuit breaker.
//! - `plugin`: the `Plugin` impl — scope, envelope, verdict, fail mode.
//! - `metrics`: the Prometheus series.

mod breaker;
mod client;
mod envelope;
mod failure;
mod metrics;
mod plugin;
mod settings;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::registry::Registry;
use toolgate_plugin::{
    BuildContext, FactoryContext, Plugin, PluginFactory, ServiceDescriptor, SettingsError,
};

use crate::client::ServiceClient;
use crate::metrics::Metrics;
use crate::plugin::ServicePlugin;
use crate::settings::Settings;

/// The name users write in `[[plugins]] name = "…"`.
const PLUGIN_NAME: &str = "service";

/// Builds `service` plugins. Create one per process: it registers the metrics and owns one
/// client (pool and breaker) per service.
pub struct ServiceFactory {
    metrics: Metrics,
    clients: Mutex<HashMap<String, Arc<ServiceClient>>>,
}

impl ServiceFactory {
    /// Registers `toolgate_service_calls_total{service,outcome}`,
    /// `toolgate_service_errors_total{service,kind}`, `toolgate_service_latency_seconds{service}`
    /// and `toolgate_service_breaker_state{service}` in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        ServiceFactory {
            metrics: Metrics::register(registry),
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// The client of this descriptor: the existing one while the descriptor is unchanged (so
    /// its pool and breaker carry over a reload), a new one otherwise.
    fn client(&self, descriptor: &Arc<ServiceDescriptor>) -> Arc<ServiceClient> {
        // A poisoned lock only means a panic elsewhere mid-insert; the map is still valid.
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        match clients.get(&descriptor.name) {
            Some(client) if client.descriptor().as_ref() == descriptor.as_ref() => client.clone(),
            _ => {
                self.metrics.prime(&descriptor.name);
                let client = Arc::new(ServiceClient::new(descriptor.clone(), self.metrics.clone()));
                clients.insert(descriptor.name.clone(), client.clone());
                client
            }
        }
    }
}

/// This crate's factories, for the gateway's registry.
pub fn factories(context: &mut FactoryContext<'_>) -> Vec<Arc<dyn PluginFactory>> {
    vec![Arc::new(ServiceFactory::new(context.metrics))]
}

impl PluginFactory for ServiceFactory {
    fn name(&self) -> &'static str {
        PLUGIN_NAME
    }

    /// Between policy plugins (which decide for nothing) and tool_selection (100): in
    /// pre_request a service's removals are seen by what runs after it.
    fn default_priority(&self) -> i32 {
        50
    }

    /// Checks the settings against the descriptor they name. Cheap and without I/O: the HTTP
    /// client is created on the first call.
    fn build(
        &self,
        settings: &serde_json::Value,
        context: &BuildContext,
    ) -> Result<Arc<dyn Plugin>, SettingsError> {
        let settings = Settings::parse(settings, context)?;
        let client = self.client(&settings.service);
        Ok(Arc::new(ServicePlugin::new(
            settings,
            client,
            self.metrics.clone(),
        )))
    }

    /// `services`: each called service's breaker (`closed`, `open`, `half_open`), as in
    /// `toolgate_service_breaker_state`.
    fn health(&self) -> Option<(&'static str, serde_json::Value)> {
        let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if clients.is_empty() {
            return None;
        }
        let services: serde_json::Map<String, serde_json::Value> = clients
            .iter()
            .map(|(name, client)| {
                let state = client.breaker_state().as_str();
                (name.clone(), serde_json::json!({ "breaker": state }))
            })
            .collect();
        Some(("services", serde_json::Value::Object(services)))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use serde_json::json;
    use toolgate_plugin::BreakerSettings;

    use super::*;

    fn context(url: &str) -> BuildContext {
        let descriptor = ServiceDescriptor {
            name: "check".into(),
            url: url.into(),
            timeout: Duration::from_millis(100),
            config_params: Vec::new(),
            headers: Default::default(),
            breaker: BreakerSettings::default(),
        };
        let mut context = BuildContext::default();
        context.services = Arc::new(BTreeMap::from([("check".to_owned(), Arc::new(descriptor))]));
        context
    }

    #[test]
    fn instances_of_one_service_share_its_client_until_the_descriptor_changes() {
        let factory = ServiceFactory::new(&mut Registry::default());
        assert_eq!(
            (factory.name(), factory.default_priority()),
            ("service", 50)
        );
        let settings = json!({"service": "check"});
        let first_load = context("http://127.0.0.1:1/v");
        factory.build(&settings, &first_load).expect("valid");
        let client = factory.client(&first_load.services["check"]);
        // A reload with the same descriptor keeps the pool and the breaker.
        let reload = context("http://127.0.0.1:1/v");
        factory.build(&settings, &reload).expect("valid");
        assert!(Arc::ptr_eq(
            &client,
            &factory.client(&reload.services["check"])
        ));
        // A changed descriptor gets a fresh client.
        let moved = context("http://127.0.0.1:2/v");
        factory.build(&settings, &moved).expect("valid");
        assert!(!Arc::ptr_eq(
            &client,
            &factory.client(&moved.services["check"])
        ));
    }
}
