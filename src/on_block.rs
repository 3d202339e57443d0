//! What a route does when its chain blocks an answer (`on_block` of the blocking entry): answer
//! the 403 (`error`), ask the model again with the violations as the blocked calls' results
//! (`retry`), or answer a 200 whose assistant text says what was blocked (`message`). Here are
//! the policy, the words the model and the client read, and the re-sent request's head; the
//! attempt loop is the exchange's lifecycle (`proxy.rs` for whole answers, `streaming.rs` for
//! streams), and the shapes are the formats' (`toolgate_formats::on_block`).

use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use serde::Serialize;
use toolgate_formats::on_block::CallFeedback;
use toolgate_plugin::{Check, DeclaredTool, Rejection, ToolCall, Violation};

/// The header of a `message` answer that carries the violations.
pub const VIOLATIONS_HEADER: &str = "x-toolgate-violations";

/// How many times the model is asked again, by default.
pub const DEFAULT_MAX_RETRIES: u32 = 2;
/// How long after the request came a new attempt may still start, by default.
pub const DEFAULT_RETRY_DEADLINE: Duration = Duration::from_secs(120);

/// What a block of one chain entry does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnBlock {
    Error,
    Retry(RetryLimits),
    Message,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryLimits {
    pub max_retries: u32,
    pub deadline: Duration,
}

impl OnBlock {
    /// When several entries block one answer, the strictest choice wins: `error` over
    /// `message` over `retry`, and the smaller limits of two retries (fail closed).
    pub fn stricter(self, other: OnBlock) -> OnBlock {
        match (self, other) {
            (OnBlock::Error, _) | (_, OnBlock::Error) => OnBlock::Error,
            (OnBlock::Message, _) | (_, OnBlock::Message) => OnBlock::Message,
            (OnBlock::Retry(a), OnBlock::Retry(b)) => OnBlock::Retry(RetryLimits {
                max_retries: a.max_retries.min(b.max_retries),
                deadline: a.deadline.min(b.deadline),
            }),
        }
    }

    /// The choice for one entry's rejection: only a guard's 403 is recovered from; a budget's
    /// 429, a 503 of a service that could not answer, keep their status.
    pub fn for_rejection(self, rejection: &Rejection) -> OnBlock {
        if rejection.status == StatusCode::FORBIDDEN {
            self
        } else {
            OnBlock::Error
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            OnBlock::Error => "error",
            OnBlock::Retry(_) => "retry",
            OnBlock::Message => "message",
        }
    }
}

/// The head of the request as it went upstream, kept to send the conversation again.
#[derive(Debug, Clone)]
pub struct ResendHead {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
}

/// What an exchange on a chain that recovers from blocks keeps for it.
#[derive(Debug, Default)]
pub struct Recovery {
    /// The request's head as it went upstream; set once it went.
    pub head: Option<ResendHead>,
    /// The request body as it last went upstream: each retry continues it.
    pub body: bytes::Bytes,
    /// The attempts blocked and retried so far.
    pub attempts: Vec<AttemptRecord>,
    /// What became of each retry.
    pub outcomes: Vec<RetryOutcome>,
    /// The usage of the blocked attempts' answers, summed.
    pub usage: Option<serde_json::Value>,
    /// The block a retry under way answers, until the retry's answer is known: the client
    /// gets it if the retry has no usable answer.
    pub retrying: Option<Rejection>,
}

impl Recovery {
    /// Adds one answer's usage to the sum.
    pub fn add_usage(&mut self, usage: Option<serde_json::Value>) {
        let Some(usage) = usage else { return };
        match &mut self.usage {
            Some(total) => toolgate_formats::on_block::add_usage(total, &usage),
            None => self.usage = Some(usage),
        }
    }
}

/// One attempt that was blocked and retried, as the audit line lists it.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptRecord {
    /// 1 for the client's own request, 2 for the first retry, …
    pub attempt: u32,
    pub violations: Vec<Violation>,
}

/// What becomes of one retry, for `toolgate_block_retries_total{outcome}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryOutcome {
    /// The model's new answer passed and went to the client.
    Passed,
    /// The new answer was blocked again.
    Blocked,
    /// The upstream did not answer the retry usably (an error status, a cut, a timeout).
    Failed,
}

impl RetryOutcome {
    pub fn label(self) -> &'static str {
        match self {
            RetryOutcome::Passed => "passed",
            RetryOutcome::Blocked => "blocked",
            RetryOutcome::Failed => "failed",
        }
    }
}

/// The violations that concern `call`: its own (by id, else by name and choice) and those of
/// the exchange as a whole.
fn violations_of<'a>(call: &ToolCall, violations: &'a [Violation]) -> Vec<&'a Violation> {
    violations
        .iter()
        .filter(
            |violation| match (&violation.tool_call_id, &violation.tool) {
                (Some(id), _) => call.id.as_ref() == Some(id),
                (None, Some(tool)) => *tool == call.name && violation.choice == Some(call.choice),
                (None, None) => true,
            },
        )
        .collect()
}

/// What the model is told, as each blocked call's result: what was wrong, in the checks' own
/// words (the judge's reason included), and what would pass.
pub fn feedback<'a>(
    calls: &'a [ToolCall],
    rejection: &Rejection,
    declared: &[DeclaredTool],
) -> Vec<CallFeedback<'a>> {
    calls
        .iter()
        .map(|call| {
            let found = violations_of(call, &rejection.violations);
            let result = if found.is_empty() {
                "Not run: another tool call of the same turn was blocked by toolgate. Make this \
                 call again if it is still needed."
                    .to_owned()
            } else {
                let mut text =
                    String::from("Error: toolgate blocked this call, so it was not run.");
                for violation in &found {
                    text.push_str(&format!("\n- {}", violation.message));
                }
                for hint in hints(&found, declared) {
                    text.push('\n');
                    text.push_str(&hint);
                }
                text
            };
            CallFeedback { call, result }
        })
        .collect()
}

/// One line of advice per kind of check that failed.
fn hints(violations: &[&Violation], declared: &[DeclaredTool]) -> Vec<String> {
    let mut hints = Vec::new();
    let has = |check: Check| violations.iter().any(|violation| violation.check == check);
    if has(Check::Membership) {
        let names: Vec<&str> = declared.iter().map(|tool| tool.name.as_str()).collect();
        hints.push(if names.is_empty() {
            "No tool is available: answer without calling one.".to_owned()
        } else {
            format!("Call only the available tools: {}.", names.join(", "))
        });
    }
    if has(Check::Schema) || has(Check::Arguments) {
        hints.push(
            "Call the tool again with arguments that are valid JSON and match its parameters' \
             schema."
                .to_owned(),
        );
    }
    if violations.iter().any(|violation| {
        !matches!(
            violation.check,
            Check::Membership | Check::Schema | Check::Arguments
        )
    }) {
        hints.push(
            "This call is not permitted here: do not repeat it; use another permitted tool or \
             answer without it."
                .to_owned(),
        );
    }
    hints
}

/// The assistant text of a `message` answer.
pub fn message_text(rejection: &Rejection) -> String {
    let mut text = String::from(
        "toolgate blocked the tool call this answer would have made, so nothing was run:",
    );
    for violation in &rejection.violations {
        text.push_str(&format!("\n- {}", violation.message));
    }
    text
}

/// The most a violations header carries; past it, violations are left off (the body's
/// `toolgate` field has them all).
const HEADER_LIMIT: usize = 4096;

/// `x-toolgate-violations`: the violations as compact JSON, every character beyond ASCII
/// escaped, so the value is a valid header whatever a message says; as many as fit.
pub fn violations_header(violations: &[Violation]) -> Option<HeaderValue> {
    let mut text = String::from("[");
    for violation in violations {
        let item = ascii_json(&serde_json::json!(violation));
        if text.len() + item.len() + 2 > HEADER_LIMIT {
            break;
        }
        if text.len() > 1 {
            text.push(',');
        }
        text.push_str(&item);
    }
    text.push(']');
    HeaderValue::from_str(&text).ok()
}

/// Compact JSON with every non-ASCII character written as `\uXXXX` (control characters are
/// escaped by serde already), so it is visible ASCII.
fn ascii_json(value: &serde_json::Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall::function(Some(id.to_owned()), name, "{}".to_owned())
    }

    #[test]
    fn the_strictest_choice_wins() {
        let retry = |max_retries, secs| {
            OnBlock::Retry(RetryLimits {
                max_retries,
                deadline: Duration::from_secs(secs),
            })
        };
        assert_eq!(retry(2, 9).stricter(OnBlock::Message), OnBlock::Message);
        assert_eq!(OnBlock::Message.stricter(OnBlock::Error), OnBlock::Error);
        assert_eq!(retry(2, 9).stricter(retry(3, 5)), retry(2, 5));
        let budget = Rejection::forbidden(vec![])
            .with_status(StatusCode::TOO_MANY_REQUESTS, "tool_budget_exceeded");
        assert_eq!(OnBlock::Message.for_rejection(&budget), OnBlock::Error);
    }

    #[test]
    fn each_call_is_told_its_own_violations_and_what_would_pass() {
        let calls = [call("call_1", "delete_user"), call("call_2", "get_weather")];
        let rejection = Rejection::forbidden(vec![Violation::on_call(
            Check::Membership,
            "undeclared_tool",
            &calls[0],
            "'delete_user' is not a declared tool",
        )]);
        let declared = [DeclaredTool::function("get_weather", None)];
        let told = feedback(&calls, &rejection, &declared);
        assert!(
            told[0]
                .result
                .contains("'delete_user' is not a declared tool")
        );
        assert!(told[0].result.contains("available tools: get_weather"));
        assert!(told[1].result.starts_with("Not run"));
    }

    #[test]
    fn the_header_is_visible_ascii_and_bounded() {
        let many: Vec<Violation> = (0..200)
            .map(|n| Violation::new(Check::Rule, "rule", format!("rule {n} refused «é»")))
            .collect();
        let header = violations_header(&many).expect("a valid header");
        let text = header.to_str().expect("visible ASCII");
        assert!(text.len() <= HEADER_LIMIT);
        let parsed: Vec<serde_json::Value> = serde_json::from_str(text).expect("JSON");
        assert!(!parsed.is_empty() && parsed.len() < 200);
        assert_eq!(parsed[0]["message"], "rule 0 refused «é»");
    }
}
