//! `tool_disclosure`'s settings: seed 003's budgets, when to disclose at all, how far one
//! exchange's discovery may go, and how long a conversation's loaded tools are kept.

use serde::Deserialize;
use toolgate_plugin::SettingsError;

/// `[plugins.settings]` of `tool_disclosure`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Settings {
    /// A request declaring fewer (permitted) tools goes as declared.
    #[serde(default = "default_min_tools")]
    pub min_tools: usize,
    /// The most tokens of the index in the system prompt.
    #[serde(default = "default_l1_budget")]
    pub l1_token_budget: usize,
    /// The most tokens of loaded definitions.
    #[serde(default = "default_l2_budget")]
    pub l2_token_budget: usize,
    /// Past the threshold, the earliest loaded definitions are unloaded; without it, a load
    /// that would pass the budget is refused.
    #[serde(default = "yes")]
    pub auto_unload_on_budget_pressure: bool,
    /// The share of `l2_token_budget` that loaded definitions may fill before unloading.
    #[serde(default = "default_threshold")]
    pub unload_threshold_percent: f64,
    /// The most discovery rounds in one exchange.
    #[serde(default = "default_max_rounds")]
    pub max_rounds: u32,
    /// No discovery round starts after this long into the exchange.
    #[serde(default = "default_deadline_ms")]
    pub round_deadline_ms: u64,
    /// How long a conversation's loaded tools are kept after its last request.
    #[serde(default = "default_ttl_s")]
    pub loaded_ttl_s: u64,
}

fn default_min_tools() -> usize {
    30
}
fn default_l1_budget() -> usize {
    3000
}
fn default_l2_budget() -> usize {
    15000
}
fn yes() -> bool {
    true
}
fn default_threshold() -> f64 {
    80.0
}
fn default_max_rounds() -> u32 {
    4
}
fn default_deadline_ms() -> u64 {
    60_000
}
fn default_ttl_s() -> u64 {
    86_400
}

impl Settings {
    /// Values that read but mean nothing, refused with the key they are at.
    pub(crate) fn check(&self) -> Result<(), SettingsError> {
        let mut errors = Vec::new();
        if !(self.unload_threshold_percent > 0.0 && self.unload_threshold_percent <= 100.0) {
            errors.push(SettingsError::new(
                "unload_threshold_percent",
                "must be more than 0 and at most 100",
            ));
        }
        for (key, value) in [
            ("l1_token_budget", self.l1_token_budget),
            ("l2_token_budget", self.l2_token_budget),
            ("max_rounds", self.max_rounds as usize),
            ("round_deadline_ms", self.round_deadline_ms as usize),
            ("loaded_ttl_s", self.loaded_ttl_s as usize),
        ] {
            if value == 0 {
                errors.push(SettingsError::new(key, "must be at least 1"));
            }
        }
        SettingsError::all(errors).map_or(Ok(()), Err)
    }

    /// The tokens loaded definitions may fill before the earliest is unloaded.
    pub(crate) fn unload_at(&self) -> usize {
        (self.l2_token_budget as f64 * self.unload_threshold_percent / 100.0) as usize
    }
}
