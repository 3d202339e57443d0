//! The `tool_selection` plugin itself: the order in which its checks run on a response, and
//! what an unreadable body or a request without tools means under `strict`.

use async_trait::async_trait;
use toolgate_plugin::plugin::BodyNeeds;
use toolgate_plugin::{
    Check, Parsed, Plugin, Rejection, ResponseEdit, ResponseExchange, Unavailable, Verdict,
    Violation,
};

use toolgate_plugin::schema::{SchemaChecker, truncate};

use crate::checks::{check_calls, no_tools_declared};
use crate::judge::Judge;
use crate::judge_client::ReviewContext;
use crate::metrics::Metrics;
use crate::settings::Settings;

/// One configured instance of the plugin (one per route entry and config load).
pub struct ToolSelection {
    strict: bool,
    schemas: SchemaChecker,
    judge: Option<Judge>,
}

impl ToolSelection {
    pub fn new(settings: Settings, schemas: SchemaChecker, metrics: Metrics) -> Self {
        ToolSelection {
            strict: settings.strict,
            schemas,
            judge: settings.judge.map(|judge| Judge::new(judge, metrics)),
        }
    }
}

fn block(violations: Vec<Violation>) -> Verdict<ResponseEdit> {
    Verdict::Block(Rejection::forbidden(violations))
}

#[async_trait]
impl Plugin for ToolSelection {
    fn body_needs(&self) -> BodyNeeds {
        BodyNeeds::BOTH
    }

    /// Membership, then arguments and schema, then (only if all of those pass) the judge.
    async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> Verdict<ResponseEdit> {
        let response = match exchange.response {
            Parsed::Parsed(response) if response.has_calls() => response,
            Parsed::Unparsable(error) if self.strict => {
                return block(vec![Violation::new(
                    Check::Parse,
                    "unparsable_response",
                    truncate(format!(
                        "the upstream response could not be parsed: {error}"
                    )),
                )]);
            }
            // Seed 001: what cannot be read, or holds no call, passes through unchanged.
            _ => return Verdict::Continue,
        };

        let request = match exchange.request.as_parsed() {
            Some(request) if request.declares_tools() => request,
            _ if self.strict => return block(no_tools_declared(&response.calls)),
            _ => return Verdict::Continue,
        };

        let violations = check_calls(request, &response.calls, &self.schemas);
        if !violations.is_empty() {
            // The judge is not asked about a response that is already blocked: it would cost
            // time and money without changing the answer.
            return block(violations);
        }

        let Some(judge) = &self.judge else {
            return Verdict::Continue;
        };
        let user_request = request.user_request();
        let context = ReviewContext {
            request_id: &exchange.meta.request_id,
            user_request: user_request.as_deref(),
            reasoning: response.reasoning.as_deref(),
        };
        let violations = judge.review(context, &response.calls).await;
        if violations.is_empty() {
            Verdict::Continue
        } else if violations
            .iter()
            .all(|violation| Unavailable::Judge.reported_by(violation))
        {
            // Only the judge's silence: answered as the failure table says. A denial among
            // them is a finding, and a finding is the guard's 403 whatever the table says.
            Verdict::Block(Unavailable::Judge.rejection(violations))
        } else {
            block(violations)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_plugin::ParseError;

    use super::*;
    use crate::testing::{
        calling, declared, parse_request, parse_response, run, sole_violation, violations,
    };

    fn plugin(settings: serde_json::Value) -> ToolSelection {
        let metrics = Metrics::register(&mut Default::default());
        let settings = Settings::parse(&settings).expect("valid settings");
        ToolSelection::new(settings, SchemaChecker::standalone(), metrics)
    }

    fn unparsable<T>() -> Parsed<T> {
        Parsed::Unparsable(ParseError::new("invalid JSON body: EOF"))
    }

    #[tokio::test]
    async fn an_unparsable_response_passes_unless_strict() {
        let verdict = run(&plugin(json!({})), &declared(), &unparsable()).await;
        assert!(matches!(verdict, Verdict::Continue));

        let verdict = run(&plugin(json!({"strict": true})), &declared(), &unparsable()).await;
        let found = sole_violation(&verdict, Check::Parse, "unparsable_response");
        assert!(found.message.contains("EOF"), "{}", found.message);
    }

    #[tokio::test]
    async fn absent_responses_and_responses_without_calls_pass_even_when_strict() {
        let strict = plugin(json!({"strict": true}));
        assert!(matches!(
            run(&strict, &declared(), &Parsed::Absent).await,
            Verdict::Continue
        ));
        let no_calls = Parsed::Parsed(parse_response(&json!({"choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hello"}}]})));
        assert!(matches!(
            run(&strict, &declared(), &no_calls).await,
            Verdict::Continue
        ));
    }

    #[tokio::test]
    async fn calls_without_declared_tools_pass_unless_strict() {
        let no_tools = Parsed::Parsed(parse_request(&json!({
            "model": "m", "messages": [{"role": "user", "content": "hi"}]})));
        let response = calling(&[("delete_user", "{}"), ("drop_table", "{}")]);
        for request in [&no_tools, &unparsable(), &Parsed::Absent] {
            assert!(matches!(
                run(&plugin(json!({})), request, &response).await,
                Verdict::Continue
            ));

            let verdict = run(&plugin(json!({"strict": true})), request, &response).await;
            let found = violations(&verdict);
            assert_eq!(found.len(), 2, "every call is named");
            for violation in found {
                assert_eq!(violation.check, Check::Membership);
                assert_eq!(violation.code, "no_tools_declared");
                assert!(
                    violation.message.contains("declared no tools"),
                    "{}",
                    violation.message
                );
            }
        }
    }

    #[tokio::test]
    async fn all_violations_of_all_calls_are_collected_in_a_403() {
        let response = calling(&[
            ("send_email", r#"{"to":"a@b.c"}"#),
            ("delete_user", r#"{"id":1}"#),
            ("send_email", r#"{"to":5}"#),
            ("send_email", "{oops"),
        ]);
        let verdict = run(&plugin(json!({})), &declared(), &response).await;
        let Verdict::Block(rejection) = &verdict else {
            panic!("expected a block, got {verdict:?}");
        };
        assert_eq!(rejection.status, http::StatusCode::FORBIDDEN);
        assert_eq!(rejection.error_type, "tool_call_blocked");
        let codes: Vec<(&str, Option<&str>)> = rejection
            .violations
            .iter()
            .map(|v| (v.code.as_str(), v.tool_call_id.as_deref()))
            .collect();
        assert_eq!(
            codes,
            vec![
                ("undeclared_tool", Some("call_1")),
                ("schema_violation", Some("call_2")),
                ("invalid_arguments", Some("call_3")),
            ]
        );
        assert_eq!(
            rejection.violations[1].instance_path.as_deref(),
            Some("/to")
        );
        assert_eq!(rejection.violations[1].keyword.as_deref(), Some("type"));
    }

    #[tokio::test]
    async fn valid_calls_continue_without_a_judge() {
        let response = calling(&[("send_email", r#"{"to":"a@b.c","subject":"hi"}"#)]);
        let verdict = run(&plugin(json!({"strict": true})), &declared(), &response).await;
        assert!(matches!(verdict, Verdict::Continue), "{verdict:?}");
    }

    #[test]
    fn the_plugin_reads_both_bodies() {
        let plugin = plugin(json!({}));
        assert_eq!(plugin.body_needs(), BodyNeeds::BOTH);
    }
}
