//! `tool_disclosure`'s metrics, registered once per process: loads, unloads, discovery rounds
//! and calls, and the bytes of tool definitions declared against those sent in their place.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use toolgate_plugin::registered;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabel {
    /// `declared` or `sent`.
    pub kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ToolLabel {
    /// One of the discovery tools (a name the model invents is `other`).
    pub tool: &'static str,
}

pub(crate) struct DisclosureMetrics {
    pub loads: Counter,
    pub unloads: Counter,
    pub rounds: Counter,
    calls: Family<ToolLabel, Counter>,
    bytes: Family<KindLabel, Counter>,
}

impl DisclosureMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        DisclosureMetrics {
            loads: registered(
                registry,
                "toolgate_disclosure_loads",
                "Tool definitions loaded by a model through load_tool",
                Counter::default(),
            ),
            unloads: registered(
                registry,
                "toolgate_disclosure_unloads",
                "Loaded tool definitions unloaded under the L2 budget's pressure",
                Counter::default(),
            ),
            rounds: registered(
                registry,
                "toolgate_disclosure_rounds",
                "Discovery rounds answered by toolgate (each one more upstream request)",
                Counter::default(),
            ),
            calls: registered(
                registry,
                "toolgate_disclosure_calls",
                "Discovery calls answered by toolgate, by tool",
                Family::default(),
            ),
            bytes: registered(
                registry,
                "toolgate_disclosure_definition_bytes",
                "Bytes of tool definitions: declared by clients, and sent upstream in their place",
                Family::default(),
            ),
        }
    }

    pub fn call(&self, tool: &str) {
        let tool = match tool {
            crate::session::LIST_TOOLS => crate::session::LIST_TOOLS,
            crate::session::LOAD_TOOL => crate::session::LOAD_TOOL,
            crate::session::LOAD_TOOL_RESOURCE => crate::session::LOAD_TOOL_RESOURCE,
            _ => "other",
        };
        self.calls.get_or_create(&ToolLabel { tool }).inc();
    }

    pub fn definition_bytes(&self, kind: &'static str) -> Counter {
        self.bytes.get_or_create(&KindLabel { kind }).clone()
    }
}
