//! The optional semantic judge: an OpenAI-compatible model asked, for each tool call that passed
//! the deterministic checks, whether the call is appropriate and safe for the user's request.
//! Calls are reviewed concurrently, bounded by a semaphore and a timeout, and real verdicts are
//! cached; a judge that cannot answer blocks unless `semantic_fail_mode = "allow"`.

use std::hash::{BuildHasher, RandomState};
use std::time::Instant;

use futures_util::future::join_all;
use quick_cache::sync::Cache;
use tokio::sync::Semaphore;
use toolgate_plugin::{Check, ToolCall, Unavailable, Violation};

use crate::judge_client::{Decision, JudgeClient, ReviewContext};
use crate::metrics::{JudgeOutcome, Metrics};
use crate::settings::{JudgeSettings, SemanticFailMode};
use toolgate_plugin::schema::truncate;

/// Why the judge gave no verdict. Details go to the log, never to the client.
enum Failure {
    Timeout,
    Error(String),
}

/// One plugin instance's judge: its client, concurrency bound and verdict cache.
pub struct Judge {
    settings: JudgeSettings,
    client: JudgeClient,
    permits: Semaphore,
    /// Keyed by a hash of the review's inputs rather than the inputs themselves, which may be
    /// large. The hasher is randomly seeded per instance, so nobody outside the process can
    /// craft a call that collides with a cached "allow".
    verdicts: Option<Cache<u64, Decision>>,
    cache_keys: RandomState,
    metrics: Metrics,
}

impl Judge {
    pub fn new(settings: JudgeSettings, metrics: Metrics) -> Self {
        Judge {
            permits: Semaphore::new(settings.concurrency),
            verdicts: (settings.cache_size > 0).then(|| Cache::new(settings.cache_size)),
            cache_keys: RandomState::new(),
            client: JudgeClient::new(&settings),
            settings,
            metrics,
        }
    }

    /// Reviews every call at once and returns the violations (denials, and failures when they
    /// block). Empty means every call was allowed.
    pub async fn review(&self, context: ReviewContext<'_>, calls: &[ToolCall]) -> Vec<Violation> {
        let reviews = calls.iter().map(|call| self.review_call(context, call));
        join_all(reviews).await.into_iter().flatten().collect()
    }

    async fn review_call(&self, context: ReviewContext<'_>, call: &ToolCall) -> Option<Violation> {
        let key = self.cache_keys.hash_one((
            &self.settings.model,
            context.user_request,
            &call.name,
            &call.arguments,
            context.reasoning,
        ));
        if let Some(decision) = self.verdicts.as_ref().and_then(|cache| cache.get(&key)) {
            self.metrics.judge_call(match decision {
                Decision::Allow => JudgeOutcome::CachedAllow,
                Decision::Deny { .. } => JudgeOutcome::CachedDeny,
            });
            return denial(&decision, call);
        }

        // The timeout covers the wait for a permit too: it bounds what the judge adds to a
        // response, whether the time goes to the model or to the queue in front of it.
        let started = Instant::now();
        let answer = tokio::time::timeout(self.settings.timeout, async {
            let _permit = self
                .permits
                .acquire()
                .await
                .map_err(|_| "the judge's semaphore is closed".to_owned())?;
            self.client.ask(context, call).await
        })
        .await;
        self.metrics.judge_latency(started.elapsed().as_secs_f64());

        match answer {
            Ok(Ok(decision)) => {
                self.metrics.judge_call(match decision {
                    Decision::Allow => JudgeOutcome::Allow,
                    Decision::Deny { .. } => JudgeOutcome::Deny,
                });
                if let Some(cache) = &self.verdicts {
                    cache.insert(key, decision.clone());
                }
                denial(&decision, call)
            }
            Ok(Err(error)) => {
                self.metrics.judge_call(JudgeOutcome::Error);
                self.unavailable(context, call, Failure::Error(error))
            }
            Err(_elapsed) => {
                self.metrics.judge_call(JudgeOutcome::Timeout);
                self.unavailable(context, call, Failure::Timeout)
            }
        }
    }

    fn unavailable(
        &self,
        context: ReviewContext<'_>,
        call: &ToolCall,
        failure: Failure,
    ) -> Option<Violation> {
        let (summary, cause) = match failure {
            Failure::Timeout => (
                format!("no answer within {} ms", self.settings.timeout.as_millis()),
                "timeout".to_owned(),
            ),
            // A server may echo what it was sent; the key is scrubbed before anything is logged.
            Failure::Error(error) => (
                "no usable answer".to_owned(),
                truncate(error.replace(&self.settings.api_key, "[redacted]")),
            ),
        };
        let (outcome, violation) = match self.settings.fail_mode {
            SemanticFailMode::Block => (
                "blocking the call",
                Some(Unavailable::Judge.on_call(
                    Check::Semantic,
                    call,
                    format!(
                        "the semantic judge could not review '{}' ({summary}), so the call is \
                         blocked",
                        call.name
                    ),
                )),
            ),
            SemanticFailMode::Allow => ("allowing the call (semantic_fail_mode = allow)", None),
        };
        tracing::warn!(
            request_id = context.request_id,
            tool = %call.name,
            %cause,
            "semantic judge unavailable; {outcome}"
        );
        violation
    }
}

fn denial(decision: &Decision, call: &ToolCall) -> Option<Violation> {
    match decision {
        Decision::Allow => None,
        Decision::Deny { reason } => Some(Violation::on_call(
            Check::Semantic,
            "semantic_denied",
            call,
            truncate(format!(
                "the semantic judge denied '{}': {reason}",
                call.name
            )),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};
    use toolgate_plugin::{Parsed, Verdict};

    use super::*;
    use crate::testing::{
        API_KEY, FakeJudge, Harness, Reply, USER_REQUEST, calling, parse_response,
        response_with_calls, sole_violation, violations,
    };

    const TO_BOB: &str = r#"{"to":"bob@example.com","subject":"Q3"}"#;

    #[tokio::test]
    async fn an_allowed_call_continues_and_the_judge_sees_the_whole_story() {
        let judge = FakeJudge::deciding("allow", "matches the request").await;
        let harness = Harness::new(judge.settings(json!({})));
        let mut body = response_with_calls(&[("send_email", TO_BOB)]);
        body["choices"][0]["message"]["reasoning_content"] = json!("the user wants the report");
        let verdict = harness.run(&Parsed::Parsed(parse_response(&body))).await;
        assert!(matches!(verdict, Verdict::Continue), "{verdict:?}");

        let received = judge.received();
        assert_eq!(received.len(), 1);
        let request = &received[0];
        assert!(
            request.head.starts_with("post /v1/chat/completions "),
            "{}",
            request.head
        );
        assert!(
            request
                .head
                .contains(&format!("authorization: bearer {API_KEY}"))
        );
        assert!(
            !request.head.contains("openai-organization"),
            "{}",
            request.head
        );
        assert_eq!(request.body["model"], "judge-model");
        let format = &request.body["response_format"];
        assert_eq!(format["type"], "json_schema");
        assert_eq!(format["json_schema"]["name"], "tool_call_verdict");
        assert_eq!(format["json_schema"]["strict"], true);
        let content = request.body["messages"][1]["content"]
            .as_str()
            .unwrap_or_default();
        let subject: Value = serde_json::from_str(content).unwrap_or_default();
        assert_eq!(
            subject,
            json!({"user_request": USER_REQUEST, "tool": "send_email", "arguments": TO_BOB,
                   "reasoning": "the user wants the report"})
        );
        assert_eq!(harness.outcomes(JudgeOutcome::Allow), 1);
    }

    #[tokio::test]
    async fn a_denied_call_is_blocked_with_the_judges_reason() {
        let judge = FakeJudge::deciding("deny", "the user did not ask to email Mallory").await;
        let harness = Harness::new(judge.settings(json!({})));
        let verdict = harness
            .run(&calling(&[(
                "send_email",
                r#"{"to":"mallory@evil.example"}"#,
            )]))
            .await;
        let found = sole_violation(&verdict, Check::Semantic, "semantic_denied");
        assert_eq!(found.tool_call_id.as_deref(), Some("call_0"));
        assert!(
            found.message.contains("did not ask to email Mallory"),
            "{}",
            found.message
        );
        assert_eq!(harness.outcomes(JudgeOutcome::Deny), 1);
    }

    #[tokio::test]
    async fn every_call_is_reviewed_concurrently_within_the_concurrency_bound() {
        let allow = json!({"decision": "allow", "reason": "ok"}).to_string();
        let calls = [
            ("send_email", TO_BOB),
            ("send_email", "{\"to\":\"a\"}"),
            ("send_email", "{\"to\":\"b\"}"),
        ];
        for (concurrency, expect_overlap) in [(3, true), (1, false)] {
            let judge =
                FakeJudge::start(Reply::Content(allow.clone()), Duration::from_millis(300)).await;
            let harness = Harness::new(judge.settings(json!({"judge_concurrency": concurrency})));
            let verdict = harness.run(&calling(&calls)).await;
            assert!(matches!(verdict, Verdict::Continue), "{verdict:?}");
            assert_eq!(judge.received().len(), 3);
            if expect_overlap {
                assert!(judge.max_in_flight() > 1, "calls were reviewed one by one");
            } else {
                assert_eq!(judge.max_in_flight(), 1, "the semaphore let calls overlap");
            }
        }
    }

    #[tokio::test]
    async fn a_judge_that_times_out_blocks_by_default() {
        let allow = json!({"decision": "allow", "reason": "late"}).to_string();
        let judge = FakeJudge::start(Reply::Content(allow), Duration::from_secs(2)).await;
        let harness = Harness::new(judge.settings(json!({"judge_timeout_ms": 200})));
        let verdict = harness.run(&calling(&[("send_email", TO_BOB)])).await;
        let found = sole_violation(&verdict, Check::Semantic, "semantic_unavailable");
        assert!(found.message.contains("200 ms"), "{}", found.message);
        assert_eq!(harness.outcomes(JudgeOutcome::Timeout), 1);
    }

    #[tokio::test]
    async fn fail_mode_allow_lets_calls_through_when_the_judge_is_down() {
        let allow = json!({"decision": "allow", "reason": "late"}).to_string();
        let judge = FakeJudge::start(Reply::Content(allow), Duration::from_secs(2)).await;
        let harness = Harness::new(
            judge.settings(json!({"judge_timeout_ms": 200, "semantic_fail_mode": "allow"})),
        );
        let verdict = harness.run(&calling(&[("send_email", TO_BOB)])).await;
        assert!(matches!(verdict, Verdict::Continue), "{verdict:?}");
        assert_eq!(harness.outcomes(JudgeOutcome::Timeout), 1);
    }

    #[tokio::test]
    async fn errors_and_non_verdicts_are_unavailable_and_never_cached() {
        let unauthorized = json!({"error": {"message": format!("bad key {API_KEY}"),
            "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}});
        let replies = [
            Reply::Raw(401, unauthorized.to_string()),
            Reply::Content("I think it is fine".to_owned()),
            Reply::Content(json!({"decision": "maybe", "reason": "?"}).to_string()),
        ];
        for reply in replies {
            let judge = FakeJudge::start(reply.clone(), Duration::ZERO).await;
            let harness = Harness::new(judge.settings(json!({})));
            for _ in 0..2 {
                let verdict = harness.run(&calling(&[("send_email", TO_BOB)])).await;
                let found = violations(&verdict);
                assert_eq!(found[0].code, "semantic_unavailable", "{reply:?}");
                assert!(!found[0].message.contains(API_KEY), "{}", found[0].message);
            }
            assert_eq!(
                judge.received().len(),
                2,
                "{reply:?}: a failure must not be cached"
            );
            assert_eq!(harness.outcomes(JudgeOutcome::Error), 2, "{reply:?}");
        }
    }

    #[tokio::test]
    async fn verdicts_are_cached_per_call_and_context() {
        let judge = FakeJudge::deciding("deny", "no").await;
        let harness = Harness::new(judge.settings(json!({})));
        for _ in 0..2 {
            let verdict = harness.run(&calling(&[("send_email", TO_BOB)])).await;
            assert_eq!(violations(&verdict)[0].code, "semantic_denied");
        }
        assert_eq!(
            judge.received().len(),
            1,
            "the second identical call reached the judge"
        );
        assert_eq!(harness.outcomes(JudgeOutcome::Deny), 1);
        assert_eq!(harness.outcomes(JudgeOutcome::CachedDeny), 1);

        // Different arguments are a different question.
        harness
            .run(&calling(&[("send_email", r#"{"to":"eve"}"#)]))
            .await;
        assert_eq!(judge.received().len(), 2);

        // A cache size of 0 turns caching off.
        let uncached = Harness::new(judge.settings(json!({"judge_cache_size": 0})));
        uncached.run(&calling(&[("send_email", TO_BOB)])).await;
        uncached.run(&calling(&[("send_email", TO_BOB)])).await;
        assert_eq!(judge.received().len(), 4);
    }

    #[tokio::test]
    async fn the_judge_is_not_asked_about_a_blocked_response() {
        let judge = FakeJudge::deciding("allow", "ok").await;
        let harness = Harness::new(judge.settings(json!({})));
        let verdict = harness
            .run(&calling(&[("send_email", TO_BOB), ("delete_user", "{}")]))
            .await;
        assert_eq!(violations(&verdict)[0].code, "undeclared_tool");
        let verdict = harness
            .run(&calling(&[("send_email", r#"{"to":1}"#)]))
            .await;
        assert_eq!(violations(&verdict)[0].code, "schema_violation");
        assert_eq!(judge.received().len(), 0);
    }
}
