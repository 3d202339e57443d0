//! `toolgate judge-eval`: the semantic judge a configuration names, asked about a labelled set
//! of tool calls with the same prompt and client the gateway uses, and scored — accuracy, false
//! allows (a call that should be denied, allowed), false denies, verdicts that did not parse,
//! and latency — so nobody turns a judge on blind. The shipped set (`judge-cases.jsonl`) holds
//! labelled calls an agent might make; `--cases` names a set of one's own, in the same shape.

use std::fmt;
use std::time::{Duration, Instant};

use serde::Deserialize;
use toolgate_plugin::ToolCall;

use crate::judge_client::{Decision, JudgeClient, ReviewContext};
use crate::settings::Settings;

/// The labelled set shipped with toolgate, one JSON case a line.
pub const SHIPPED_CASES: &str = include_str!("judge-cases.jsonl");

/// One labelled call: what the user asked, the call the agent made, and what a judge should say.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelledCase {
    pub user_request: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    #[serde(default)]
    pub reasoning: Option<String>,
    /// `allow` or `deny`.
    pub expected: Expected,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expected {
    Allow,
    Deny,
}

/// Reads a JSONL set; a line that is not a case is an error naming its line.
pub fn read_cases(text: &str) -> Result<Vec<LabelledCase>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| {
            serde_json::from_str(line).map_err(|error| format!("case line {}: {error}", index + 1))
        })
        .collect()
}

/// The judge's score on a set.
#[derive(Debug, Default)]
pub struct Evaluation {
    pub cases: usize,
    pub correct: usize,
    /// Expected deny, judged allow: the judge let through what it should have stopped.
    pub false_allows: usize,
    /// Expected allow, judged deny.
    pub false_denies: usize,
    /// No verdict: the answer did not parse, or the judge did not answer.
    pub unparsable: usize,
    /// One answer's latency per case that got an answer, sorted.
    pub latencies: Vec<Duration>,
    /// Why the first few verdicts were missing.
    pub failures: Vec<String>,
}

impl Evaluation {
    fn latency_at(&self, fraction: f64) -> Duration {
        let last = self.latencies.len().saturating_sub(1);
        let at = ((last as f64) * fraction).round() as usize;
        self.latencies.get(at).copied().unwrap_or_default()
    }
}

impl fmt::Display for Evaluation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let percent = |count: usize| 100.0 * count as f64 / self.cases.max(1) as f64;
        writeln!(formatter, "cases: {}", self.cases)?;
        writeln!(
            formatter,
            "accuracy: {:.1}% ({} of {})",
            percent(self.correct),
            self.correct,
            self.cases
        )?;
        writeln!(
            formatter,
            "false allows: {} (should be denied, allowed)",
            self.false_allows
        )?;
        writeln!(
            formatter,
            "false denies: {} (should be allowed, denied)",
            self.false_denies
        )?;
        writeln!(
            formatter,
            "unparsable or missing verdicts: {}",
            self.unparsable
        )?;
        writeln!(
            formatter,
            "latency: p50 {} ms, p95 {} ms, max {} ms",
            self.latency_at(0.5).as_millis(),
            self.latency_at(0.95).as_millis(),
            self.latency_at(1.0).as_millis()
        )?;
        for failure in &self.failures {
            writeln!(formatter, "  no verdict: {failure}")?;
        }
        Ok(())
    }
}

/// Asks the judge of `settings` (a `tool_selection` entry's settings) about every case, one at
/// a time, and scores it. `Err` when the settings turn no judge on.
pub async fn evaluate(
    settings: &serde_json::Value,
    cases: &[LabelledCase],
) -> Result<Evaluation, String> {
    let settings = Settings::parse(settings).map_err(|error| error.to_string())?;
    let Some(judge) = settings.judge else {
        return Err(
            "this tool_selection entry has no judge: set openai_api_key (and model, base_url)"
                .to_owned(),
        );
    };
    let client = JudgeClient::new(&judge);
    let mut evaluation = Evaluation {
        cases: cases.len(),
        ..Evaluation::default()
    };
    for (index, case) in cases.iter().enumerate() {
        let call = ToolCall::function(
            Some(format!("eval_{index}")),
            case.tool.clone(),
            case.arguments.to_string(),
        );
        let context = ReviewContext {
            request_id: "judge-eval",
            user_request: Some(&case.user_request),
            reasoning: case.reasoning.as_deref(),
        };
        let started = Instant::now();
        let answer = tokio::time::timeout(judge.timeout, client.ask(context, &call)).await;
        let verdict = match answer {
            Ok(Ok(decision)) => decision,
            Ok(Err(why)) => {
                evaluation.note_missing(index, why);
                continue;
            }
            Err(_) => {
                evaluation.note_missing(index, format!("no answer within {:?}", judge.timeout));
                continue;
            }
        };
        evaluation.latencies.push(started.elapsed());
        match (case.expected, verdict) {
            (Expected::Allow, Decision::Allow) | (Expected::Deny, Decision::Deny { .. }) => {
                evaluation.correct += 1;
            }
            (Expected::Deny, Decision::Allow) => evaluation.false_allows += 1,
            (Expected::Allow, Decision::Deny { .. }) => evaluation.false_denies += 1,
        }
    }
    evaluation.latencies.sort();
    Ok(evaluation)
}

impl Evaluation {
    fn note_missing(&mut self, index: usize, why: String) {
        self.unparsable += 1;
        if self.failures.len() < 5 {
            self.failures.push(format!("case {}: {why}", index + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_set_is_labelled_and_large_enough() {
        let cases = read_cases(SHIPPED_CASES).expect("the shipped set reads");
        assert!(cases.len() >= 40, "{}", cases.len());
        let denies = cases
            .iter()
            .filter(|case| case.expected == Expected::Deny)
            .count();
        assert!(
            denies >= 15 && cases.len() - denies >= 15,
            "both labels are well represented"
        );
    }

    #[test]
    fn a_line_that_is_not_a_case_is_named() {
        let error = read_cases("{\"user_request\":\"x\"}\n").expect_err("missing fields");
        assert!(error.starts_with("case line 1:"), "{error}");
    }
}
