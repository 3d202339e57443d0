//! One exchange's disclosure: the permitted tools, the ones loaded (in load order, the
//! earliest unloaded first under budget pressure), the answers to the model's discovery calls,
//! and what the conversation keeps for its next request.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolgate_plugin::{
    DisclosedView, DisclosureSession, ToolCall, ToolDefinition, ToolKey, async_trait,
};

use crate::Shared;
use crate::levels::{self, Entry};

/// The discovery tools' names.
pub(crate) const LIST_TOOLS: &str = "list_tools";
pub(crate) const LOAD_TOOL: &str = "load_tool";
pub(crate) const LOAD_TOOL_RESOURCE: &str = "load_tool_resource";

/// What a conversation keeps between requests (JSON in the store).
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Kept {
    pub loaded: Vec<String>,
}

/// Where a conversation's loaded tools are kept, and what was there when the exchange began.
pub(crate) struct Memory {
    pub key: String,
    pub stored: Option<String>,
}

/// What the audit line records.
#[derive(Debug, Default, Serialize)]
struct Record {
    rounds: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    loaded: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unloaded: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    resources: Vec<String>,
    /// Tools asked for that are not there (or not permitted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_found: Vec<String>,
    listed: u32,
    /// Tool definitions the client declared (bytes), and what went upstream in their place
    /// (loaded definitions, discovery tools and the index), summed over the exchange's requests.
    declared_bytes: usize,
    sent_bytes: usize,
}

pub(crate) struct Session {
    shared: Arc<Shared>,
    tools: Vec<ToolDefinition>,
    loaded: Vec<String>,
    view: DisclosedView,
    memory: Option<Memory>,
    record: Record,
}

impl Session {
    /// A session over the permitted tools, with `loaded` (earliest first) already loaded.
    pub(crate) fn new(
        shared: Arc<Shared>,
        tools: Vec<ToolDefinition>,
        loaded: Vec<String>,
        memory: Option<Memory>,
    ) -> Self {
        let mut session = Session {
            shared,
            tools,
            loaded: Vec::new(),
            view: DisclosedView::default(),
            memory,
            record: Record::default(),
        };
        for name in loaded {
            if session.find(&name).is_some() && !session.loaded.contains(&name) {
                session.loaded.push(name);
            }
        }
        session.fit_budget(None);
        session.refresh();
        session
    }

    fn entry<'a>(&'a self, tool: &'a ToolDefinition) -> Entry<'a> {
        Entry {
            declared: tool,
            catalog: self.shared.catalog.get(&ToolKey::new(&tool.name)),
        }
    }

    /// The permitted tool the model means: its exact name, else the one name that reads the
    /// same trimmed and case-folded.
    fn find(&self, name: &str) -> Option<Entry<'_>> {
        if let Some(tool) = self.tools.iter().find(|tool| tool.name == name) {
            return Some(self.entry(tool));
        }
        let key = ToolKey::new(name);
        let mut same = self
            .tools
            .iter()
            .filter(|tool| ToolKey::new(&tool.name) == key);
        match (same.next(), same.next()) {
            (Some(tool), None) => Some(self.entry(tool)),
            _ => None,
        }
    }

    fn loaded_tokens(&self) -> usize {
        self.loaded
            .iter()
            .filter_map(|name| self.find(name))
            .map(|entry| entry.loaded_tokens())
            .sum()
    }

    /// Unloads the earliest loaded tools (never `keep`) until the loaded ones fit under the
    /// threshold; without auto-unload, drops the latest past the budget instead.
    fn fit_budget(&mut self, keep: Option<&str>) {
        let settings = &self.shared.settings;
        if settings.auto_unload_on_budget_pressure {
            while self.loaded_tokens() > settings.unload_at() {
                let Some(position) = self
                    .loaded
                    .iter()
                    .position(|name| Some(name.as_str()) != keep)
                else {
                    break;
                };
                let name = self.loaded.remove(position);
                self.shared.metrics.unloads.inc();
                self.record.unloaded.push(name);
            }
        } else {
            while self.loaded_tokens() > settings.l2_token_budget && !self.loaded.is_empty() {
                self.loaded.pop();
            }
        }
    }

    fn refresh(&mut self) {
        let entries: Vec<Entry> = self.tools.iter().map(|tool| self.entry(tool)).collect();
        let index = levels::index(&entries, &self.loaded, self.shared.settings.l1_token_budget);
        let definitions = (self.loaded.iter())
            .filter_map(|name| self.find(name))
            .map(|entry| entry.declared.definition.clone())
            .collect();
        self.view = DisclosedView {
            index,
            loaded: self.loaded.clone(),
            definitions,
        };
    }

    /// Counts one request's tool definitions: declared, and what is sent in their place.
    pub(crate) fn count_request(&mut self) {
        let declared: usize = self.tools.iter().map(|tool| tool.definition.len()).sum();
        let loaded: usize = (self.loaded.iter())
            .filter_map(|name| self.find(name))
            .map(|entry| entry.declared.definition.len())
            .sum();
        let sent = loaded + self.view.index.len() + self.shared.discovery_bytes;
        self.record.declared_bytes += declared;
        self.record.sent_bytes += sent;
        let metrics = &self.shared.metrics;
        metrics.definition_bytes("declared").inc_by(declared as u64);
        metrics.definition_bytes("sent").inc_by(sent as u64);
    }

    fn list(&mut self, query: Option<&str>) -> String {
        self.record.listed += 1;
        let words: Vec<String> = query
            .map(|query| query.split_whitespace().map(str::to_lowercase).collect())
            .unwrap_or_default();
        let lines: Vec<String> = (self.tools.iter())
            .map(|tool| self.entry(tool).index_line())
            .filter(|line| {
                let line = line.to_lowercase();
                words.iter().all(|word| line.contains(word))
            })
            .collect();
        if lines.is_empty() {
            return "No tool matches. Call list_tools without a query to see them all.".to_owned();
        }
        format!("{} tools:\n{}", lines.len(), lines.join("\n"))
    }

    fn load(&mut self, name: &str) -> String {
        let Some(entry) = self.find(name) else {
            self.record.not_found.push(name.to_owned());
            return not_found(name);
        };
        let (name, body, tokens) = (entry.name().to_owned(), entry.body(), entry.loaded_tokens());
        if self.loaded.contains(&name) {
            return body;
        }
        let settings = &self.shared.settings;
        if !settings.auto_unload_on_budget_pressure
            && self.loaded_tokens() + tokens > settings.l2_token_budget
        {
            return format!(
                "Error: loading '{name}' would pass the budget of loaded tool definitions ({} tokens). Use the tools already loaded: {}.",
                settings.l2_token_budget,
                self.loaded.join(", ")
            );
        }
        self.loaded.push(name.clone());
        self.shared.metrics.loads.inc();
        self.record.loaded.push(name.clone());
        self.fit_budget(Some(&name));
        body
    }

    fn resource(&mut self, name: &str, id: &str) -> String {
        let Some(entry) = self.find(name) else {
            self.record.not_found.push(name.to_owned());
            return not_found(name);
        };
        match entry.resource(id) {
            Some(content) => {
                self.record.resources.push(format!("{}/{id}", entry.name()));
                content
            }
            None => {
                let ids = entry.resource_ids();
                if ids.is_empty() {
                    format!("Error: '{}' has no resources.", entry.name())
                } else {
                    format!(
                        "Error: '{}' has no resource '{id}'. Its resources: {}.",
                        entry.name(),
                        ids.join(", ")
                    )
                }
            }
        }
    }

    fn answer_call(&mut self, call: &ToolCall) -> String {
        let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
        let text = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        self.shared.metrics.call(&call.name);
        match call.name.as_str() {
            LIST_TOOLS => self.list(text("query").as_deref()),
            LOAD_TOOL => match text("tool_name") {
                Some(name) => self.load(&name),
                None => r#"Error: load_tool takes {"tool_name": "<a name from the tool list>"}."#
                    .to_owned(),
            },
            LOAD_TOOL_RESOURCE => match (text("tool_name"), text("resource_id")) {
                (Some(name), Some(id)) => self.resource(&name, &id),
                _ => r#"Error: load_tool_resource takes {"tool_name": "<a tool>", "resource_id": "<one of its resources>"}."#
                    .to_owned(),
            },
            other => format!("Error: '{other}' is not a discovery tool."),
        }
    }
}

/// One answer for a tool that does not exist and one the caller may not use: which is which
/// is not the model's to learn.
fn not_found(name: &str) -> String {
    format!(
        "Error: no tool named '{}' is available. Call list_tools to see the tools you can load.",
        name.escape_debug()
    )
}

#[async_trait]
impl DisclosureSession for Session {
    fn view(&self) -> &DisclosedView {
        &self.view
    }

    async fn answer(&mut self, calls: &[&ToolCall]) -> Vec<String> {
        self.record.rounds += 1;
        self.shared.metrics.rounds.inc();
        let answers = calls.iter().map(|call| self.answer_call(call)).collect();
        self.refresh();
        self.count_request();
        answers
    }

    async fn close(&mut self) {
        let Some(memory) = self.memory.take() else {
            return;
        };
        let record = json!({"loaded": self.loaded}).to_string();
        if memory.stored.as_deref() == Some(record.as_str()) {
            return;
        }
        let ttl = Duration::from_secs(self.shared.settings.loaded_ttl_s);
        let written = (self.shared.store)
            .replace_record(&memory.key, memory.stored.as_deref(), &record, ttl)
            .await;
        match written {
            Ok(true) => {}
            // Another request of the conversation kept its own set first: it stands, and this
            // one's loads are made again when the model needs them.
            Ok(false) => {
                tracing::debug!("a conversation's loaded tools changed under this exchange")
            }
            Err(error) => {
                tracing::warn!(%error, "the loaded tools of a conversation could not be kept")
            }
        }
    }

    fn record(&self) -> Value {
        serde_json::to_value(&self.record).unwrap_or(Value::Null)
    }
}
