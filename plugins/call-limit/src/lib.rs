//! toolgate_call_limit: the `call_limit` plugin. A model that answers with a burst of parallel
//! tool calls (a loop, a prompt injection fanning out) can do much in one turn before anyone
//! looks; this plugin bounds how many calls one answer may make (`max_calls`, over every
//! choice) and refuses an answer past it, naming each call beyond the bound.
//!
//! It is also the worked example of docs/writing-a-plugin.md: one crate, a `factories`
//! function, and a check kind of its own (`check: "call_limit"`) without editing the plugin API.
//!
//! Calls are counted in the batches the guard checks together: a whole JSON answer, and in a
//! stream the calls that complete together (every format releases an answer's parallel calls
//! together).

use std::sync::Arc;

use serde::Deserialize;
use toolgate_plugin::{
    BodyNeeds, Check, FactoryContext, Plugin, PluginFactory, Rejection, ResponseEdit,
    ResponseExchange, SettingsError, Verdict, Violation, async_trait, factory, parse_settings,
};

/// The name users write in `[[plugins]] name = "…"`.
const NAME: &str = "call_limit";
/// The check kind of this plugin's violations.
const CHECK: Check = Check::Custom("call_limit");

/// This crate's factories, for the gateway's registry. Before tool_selection (100): counting is
/// cheaper than checking schemas or asking a judge.
pub fn factories(_context: &mut FactoryContext<'_>) -> Vec<Arc<dyn PluginFactory>> {
    vec![factory(NAME, 50, |settings, _context| build(settings))]
}

/// `[plugins.settings]` of `call_limit`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    /// The most tool calls one answer may make, over all its choices.
    max_calls: usize,
}

fn build(settings: &serde_json::Value) -> Result<Arc<dyn Plugin>, SettingsError> {
    let settings: Settings = parse_settings(settings)?;
    if settings.max_calls == 0 {
        return Err(SettingsError::new(
            "max_calls",
            "must be at least 1 (to allow no calls, declare no tools with tool_selection strict)",
        ));
    }
    Ok(Arc::new(CallLimit {
        max_calls: settings.max_calls,
    }))
}

/// One route's `call_limit`.
struct CallLimit {
    max_calls: usize,
}

#[async_trait]
impl Plugin for CallLimit {
    fn body_needs(&self) -> BodyNeeds {
        BodyNeeds::RESPONSE
    }

    async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
        let calls = exchange.calls();
        let made = calls.len();
        if made <= self.max_calls {
            return Verdict::Continue;
        }
        let violations = calls[self.max_calls..]
            .iter()
            .map(|call| {
                Violation::on_call(
                    CHECK,
                    "too_many_calls",
                    call,
                    format!(
                        "the answer makes {made} tool calls; this route allows at most {} ('{}' is past the limit)",
                        self.max_calls, call.name
                    ),
                )
            })
            .collect();
        Verdict::Block(Rejection::forbidden(violations))
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;
    use serde_json::json;
    use toolgate_plugin::{Parsed, ToolCall, ToolResponse};

    use super::*;

    fn plugin(settings: serde_json::Value) -> Result<Arc<dyn Plugin>, SettingsError> {
        build(&settings)
    }

    async fn verdict(plugin: &dyn Plugin, calls: usize) -> Verdict<ResponseEdit> {
        let meta = toolgate_plugin::testing::meta("/v1/chat/completions");
        let calls = (0..calls)
            .map(|index| ToolCall::function(Some(format!("call_{index}")), "lookup", "{}".into()))
            .collect();
        let response = Parsed::Parsed(ToolResponse::from_calls(calls));
        let exchange =
            toolgate_plugin::testing::response_exchange(&meta, &Parsed::Absent, &response);
        plugin.pre_response(&exchange).await
    }

    #[tokio::test]
    async fn answers_within_the_limit_pass_and_the_calls_past_it_are_named() {
        let limit = plugin(json!({"max_calls": 2})).expect("valid");
        for calls in [0, 1, 2] {
            assert!(matches!(verdict(&*limit, calls).await, Verdict::Continue));
        }
        let Verdict::Block(rejection) = verdict(&*limit, 4).await else {
            panic!("four calls are past a limit of two");
        };
        assert_eq!(rejection.status, StatusCode::FORBIDDEN);
        let ids: Vec<_> = rejection
            .violations
            .iter()
            .map(|violation| violation.tool_call_id.as_deref())
            .collect();
        assert_eq!(ids, [Some("call_2"), Some("call_3")]);
        let first = &rejection.violations[0];
        assert_eq!(first.check.as_str(), "call_limit");
        assert_eq!(first.code, "too_many_calls");
        assert!(first.message.contains("4 tool calls"), "{}", first.message);
    }

    #[test]
    fn settings_are_read_strictly() {
        for (settings, path) in [
            (json!({}), ""),
            (json!({"max_calls": 0}), "max_calls"),
            (json!({"max_calls": "3"}), "max_calls"),
            (json!({"max_calls": 3, "per_choice": true}), "per_choice"),
        ] {
            let error = plugin(settings.clone()).err().expect("refused");
            assert_eq!(error.path, path, "{settings}: {}", error.message);
        }
    }
}
