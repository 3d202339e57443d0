//! The access-control metrics of seed 000 §8.1, registered once per process. Labels carry only
//! names the configuration knows (groups, states, tools of the catalog, tenants), so a client
//! cannot grow the label sets by inventing names.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use toolgate_plugin::{ToolCatalog, registered};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct GroupLabel {
    pub group: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct StateLabel {
    pub state: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TransitionLabels {
    pub tool: String,
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TenantLabel {
    pub tenant: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct DenialLabels {
    pub tenant: String,
    /// `request` (removed from the declared tools) or `response` (a call blocked).
    pub stage: &'static str,
}

/// Every access-control metric.
pub(crate) struct AccessMetrics {
    pub group_requests: Family<GroupLabel, Counter>,
    pub group_availability: Family<GroupLabel, Gauge>,
    pub filtered_tools: Histogram,
    pub state_transitions: Family<TransitionLabels, Counter>,
    pub state_availability: Family<StateLabel, Gauge>,
    pub group_access_denied: Family<GroupLabel, Counter>,
    pub invalid_state_transitions: Counter,
    pub privilege_escalation_attempts: Family<TenantLabel, Counter>,
    pub permission_denied: Family<DenialLabels, Counter>,
}

impl AccessMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        AccessMetrics {
            group_requests: registered(
                registry,
                "agent_tool_group_requests",
                "Requests by requested tool group",
                Family::default(),
            ),
            group_availability: registered(
                registry,
                "agent_tool_group_availability",
                "Catalog tools in each group",
                Family::default(),
            ),
            filtered_tools: registered(
                registry,
                "agent_filtered_tools_count",
                "Declared tools left after group and state filtering",
                Histogram::new([0.0, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 500.0]),
            ),
            state_transitions: registered(
                registry,
                "agent_state_transitions",
                "Workflow state transitions by tool, each counted once: by the request that brought its call's result",
                Family::default(),
            ),
            state_availability: registered(
                registry,
                "agent_state_availability",
                "Catalog tools available in each named state",
                Family::default(),
            ),
            group_access_denied: registered(
                registry,
                "agent_group_access_denied",
                "Requests for a tool group the tenant does not hold",
                Family::default(),
            ),
            invalid_state_transitions: registered(
                registry,
                "agent_invalid_state_transition",
                "Completed calls to a tool not available in the state it was called in, counted once",
                Counter::default(),
            ),
            privilege_escalation_attempts: registered(
                registry,
                "agent_privilege_escalation_attempts",
                "Requests for groups beyond the tenant's and calls to tools the request was not offered",
                Family::default(),
            ),
            permission_denied: registered(
                registry,
                "toolgate_permission_denied",
                "Tools removed or calls blocked by tool_permission",
                Family::default(),
            ),
        }
    }

    /// Sets the per-group and per-state gauges from a freshly loaded catalog.
    pub fn describe_catalog(&self, catalog: &ToolCatalog) {
        let mut groups = std::collections::BTreeMap::<&str, i64>::new();
        let mut states = std::collections::BTreeSet::<&str>::new();
        for tool in catalog.tools() {
            for group in &tool.groups {
                *groups.entry(group).or_default() += 1;
            }
            states.extend(tool.available_in_states.iter().map(String::as_str));
            states.extend(tool.transition.as_deref());
        }
        states.remove(toolgate_plugin::catalog::WILDCARD);
        states.insert(toolgate_plugin::catalog::INITIAL_STATE);
        for (group, count) in groups {
            self.group_availability
                .get_or_create(&GroupLabel {
                    group: group.to_owned(),
                })
                .set(count);
        }
        for state in states {
            let available = catalog
                .tools()
                .filter(|tool| tool.available_in(state))
                .count();
            self.state_availability
                .get_or_create(&StateLabel {
                    state: state.to_owned(),
                })
                .set(i64::try_from(available).unwrap_or(i64::MAX));
        }
    }
}

/// A name for a metric label: the name itself when the catalog knows it, else `other`.
pub(crate) fn known_or_other(name: &str, known: impl FnOnce(&str) -> bool) -> String {
    if known(name) {
        name.to_owned()
    } else {
        "other".to_owned()
    }
}
