//! A plugin with a bug: it panics when an answer calls the tool its settings name. It stands in
//! for any fault on a request path (a plugin's, a library's) for the tests that a client still
//! gets an answer, and nothing the guard was checking, when one happens.

use std::sync::Arc;

use serde_json::Value;
use toolgate_plugin::{
    BodyNeeds, BuildContext, Plugin, PluginFactory, ResponseEdit, ResponseExchange, SettingsError,
    Verdict, async_trait, parse_settings,
};

struct PanicsOnCall {
    tool: String,
}

#[async_trait]
impl Plugin for PanicsOnCall {
    fn body_needs(&self) -> BodyNeeds {
        BodyNeeds::RESPONSE
    }

    async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
        let calls = exchange.calls();
        if calls.iter().any(|call| call.name == self.tool) {
            panic!("the faulty plugin met a call to '{}'", self.tool);
        }
        Verdict::Continue
    }
}

/// Builds `panics_on_call` with `settings.tool`, the tool whose calls make it panic.
pub struct PanicsOnCallFactory;

#[derive(serde::Deserialize)]
struct Settings {
    tool: String,
}

impl PluginFactory for PanicsOnCallFactory {
    fn name(&self) -> &'static str {
        "panics_on_call"
    }

    fn build(
        &self,
        settings: &Value,
        _context: &BuildContext,
    ) -> Result<Arc<dyn Plugin>, SettingsError> {
        let settings: Settings = parse_settings(settings)?;
        Ok(Arc::new(PanicsOnCall {
            tool: settings.tool,
        }))
    }
}
