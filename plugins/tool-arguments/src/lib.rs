//! toolgate_tool_arguments: the `tool_arguments` plugin. Rules that a JSON Schema cannot say,
//! on the argument values of the model's tool calls, addressed by JSON Pointer: a full-match
//! regex, a deny-list of substrings, numeric bounds, allowed values. Each rule either refuses
//! the call (403, `check: rule`, naming the rule, the pointer and the kind of offence, never the
//! value) or redacts the value (the arguments are then serialized again, so the client always
//! gets valid JSON), on complete and streamed answers alike.
//!
//! Design choices:
//! - A pointer that meets a string holding a JSON object or array looks inside it (models send
//!   nested objects as JSON text); a string it cannot look into is "unreadable": a reject rule
//!   refuses the call, a redact rule replaces the string whole. What cannot be read is not
//!   vouched for. A pointer into a value that another rule of the same tools checks as a string
//!   or a number is a load error.
//! - A rule whose pointer addresses nothing (an absent, null, number or boolean in the way)
//!   does not apply: presence is the schema's business (`tool_selection`).
//! - `*` in a pointer addresses every member or element (`/recipients/*`).
//!
//! # Layout
//! - `settings`: rules and their load-time checks.
//! - `pointer`: JSON Pointers and the walk over arguments.
//! - `plugin`: the checks, the offences, redaction, and the `Plugin` impl.

mod plugin;
mod pointer;
mod settings;

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use toolgate_plugin::{FactoryContext, PluginFactory, factory, registered};

pub use plugin::{CallFindings, Offence, apply_rules};
pub use settings::{Action, Rule, parse as parse_rules};

/// This crate's factories, for the gateway's registry. After tool_selection (100): a call that
/// is not even declared is refused before its values are looked at.
pub fn factories(context: &mut FactoryContext<'_>) -> Vec<Arc<dyn PluginFactory>> {
    let metrics = Metrics::register(context.metrics);
    vec![factory(plugin::NAME, 150, move |settings, _context| {
        Ok(Arc::new(plugin::ToolArguments {
            rules: Arc::new(settings::parse(settings)?),
            metrics: metrics.clone(),
        }))
    })]
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RuleLabels {
    rule: String,
    action: String,
}

/// `toolgate_argument_rule_hits_total{rule, action}`: values that offended a rule.
#[derive(Clone)]
pub struct Metrics {
    hits: Family<RuleLabels, Counter>,
}

impl Metrics {
    fn register(registry: &mut Registry) -> Self {
        Metrics {
            hits: registered(
                registry,
                "toolgate_argument_rule_hits",
                "Argument values that offended a tool_arguments rule, by rule and action",
                Family::default(),
            ),
        }
    }

    fn record(&self, rule: &str, action: Action) {
        let action = match action {
            Action::Reject => "reject",
            Action::Redact => "redact",
        };
        self.hits
            .get_or_create(&RuleLabels {
                rule: rule.to_owned(),
                action: action.to_owned(),
            })
            .inc();
    }
}
