//! toolgate_tool_budget: the `tool_budget` plugin. Expensive or dangerous tools get budgets:
//! at most N calls per window (one or more fixed windows, e.g. 10 per minute and 100 per day),
//! per tenant, for the tools a name pattern covers.
//!
//! Design choices:
//! - Counting `executed` (default): a call counts when its result comes back in the client's
//!   history, once per `tool_call_id` (the id is marked in the store), so a history sent again
//!   never counts twice. The model's next call to a spent tool is refused (or the tool is
//!   stripped from the request before the model can pick it; when that leaves no tool,
//!   `on_empty` decides as for tool_permission — by default the tool fields go, never
//!   `"tools": []`). Counting `proposed`: each call
//!   the model proposes is admitted atomically against the limits, so replicas sharing a store
//!   admit exactly N between them, however their requests interleave.
//! - A budget of N allows exactly N: a response whose calls would take a window past N is
//!   refused whole (429), with `Retry-After` and `x-ratelimit-*` headers naming the window that
//!   frees up last.
//! - Counters live in the gateway's state store (`[store]`): memory by default, Redis to share
//!   them between replicas. When the store cannot answer, `[store] fail_mode` decides (503
//!   `state_store_unavailable`, or let through).
//!
//! # Layout
//! - `settings`: budgets, windows (`"10/minute"`, `{ calls, window }`), behaviours, counting.
//! - `plugin`: the `Plugin` impl: counting, strip, reject, observe.

mod plugin;
mod settings;

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use toolgate_plugin::{FactoryContext, PluginFactory, factory, registered};

pub use settings::{Behaviour, Counting, Settings};

/// This crate's factories, for the gateway's registry. Before tool_selection (100): a stripped
/// tool is gone before anything else looks.
pub fn factories(context: &mut FactoryContext<'_>) -> Vec<Arc<dyn PluginFactory>> {
    let metrics = Metrics::register(context.metrics);
    vec![factory(plugin::NAME, 50, move |settings, context| {
        let settings = Settings::parse(settings)?;
        settings.check_tenants(|name| context.tenants.contains_key(name))?;
        Ok(Arc::new(plugin::ToolBudget {
            settings,
            store: context.store.clone(),
            fail_mode: context.store_fail_mode,
            metrics: metrics.clone(),
        }))
    })]
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct SpentLabels {
    budget: String,
    behaviour: String,
}

/// `toolgate_budget_spent_total{budget, behaviour}`: exchanges that met a spent budget;
/// `toolgate_state_store_errors_total`: store calls that failed.
#[derive(Clone)]
pub(crate) struct Metrics {
    spent: Family<SpentLabels, Counter>,
    pub(crate) store_errors: Counter,
}

impl Metrics {
    fn register(registry: &mut Registry) -> Self {
        Metrics {
            spent: registered(
                registry,
                "toolgate_budget_spent",
                "Exchanges that met a spent tool budget, by budget and behaviour",
                Family::default(),
            ),
            store_errors: registered(
                registry,
                "toolgate_state_store_errors",
                "Calls to the state store that failed or timed out",
                Counter::default(),
            ),
        }
    }

    pub(crate) fn record_spent(&self, budget: &str, behaviour: &str) {
        self.spent
            .get_or_create(&SpentLabels {
                budget: budget.to_owned(),
                behaviour: behaviour.to_owned(),
            })
            .inc();
    }
}
