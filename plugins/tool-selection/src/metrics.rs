//! The plugin's Prometheus metrics: judge outcomes and latency (schema compilations are the
//! shared schema checker's).
//! Registered once by the factory; every plugin instance it builds shares the handles.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use toolgate_plugin::{registered, registered_seconds};

/// How one judge review ended, the `outcome` label of `toolgate_judge_calls_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgeOutcome {
    Allow,
    Deny,
    CachedAllow,
    CachedDeny,
    /// Transport error, error status, or an answer that is not a verdict.
    Error,
    Timeout,
}

impl JudgeOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            JudgeOutcome::Allow => "allow",
            JudgeOutcome::Deny => "deny",
            JudgeOutcome::CachedAllow => "cached_allow",
            JudgeOutcome::CachedDeny => "cached_deny",
            JudgeOutcome::Error => "error",
            JudgeOutcome::Timeout => "timeout",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JudgeCallLabels {
    outcome: &'static str,
}

/// Handles to the plugin's metrics. Cloning shares the underlying series.
#[derive(Debug, Clone)]
pub struct Metrics {
    judge_calls: Family<JudgeCallLabels, Counter>,
    judge_latency: Histogram,
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Metrics {
            judge_calls: registered(
                registry,
                "toolgate_judge_calls",
                "Semantic judge reviews of tool calls, by outcome",
                Family::default(),
            ),
            // 5 ms … ~10 s: a cached-nothing judge call to a hosted model sits in the middle.
            judge_latency: registered_seconds(
                registry,
                "toolgate_judge_latency",
                "Time the semantic judge added to a tool call it was asked about (cache misses)",
                Histogram::new(exponential_buckets(0.005, 2.0, 12)),
            ),
        };
        // Every outcome at zero from the start: a judge that has not failed yet reads 0.
        use JudgeOutcome::*;
        for outcome in [Allow, Deny, CachedAllow, CachedDeny, Error, Timeout] {
            metrics.judge_calls.get_or_create_owned(&JudgeCallLabels {
                outcome: outcome.as_str(),
            });
        }
        metrics
    }

    pub fn judge_call(&self, outcome: JudgeOutcome) {
        self.judge_calls
            .get_or_create(&JudgeCallLabels {
                outcome: outcome.as_str(),
            })
            .inc();
    }

    pub fn judge_latency(&self, seconds: f64) {
        self.judge_latency.observe(seconds);
    }

    #[cfg(test)]
    pub fn judge_calls(&self, outcome: JudgeOutcome) -> u64 {
        self.judge_calls
            .get_or_create(&JudgeCallLabels {
                outcome: outcome.as_str(),
            })
            .get()
    }
}

#[cfg(test)]
mod tests {
    use toolgate_plugin::testing::{assert_exposes, registered};

    use super::*;

    #[test]
    fn series_are_exposed_under_their_documented_names() {
        let (metrics, registry) = registered(Metrics::register);
        metrics.judge_call(JudgeOutcome::CachedDeny);
        metrics.judge_call(JudgeOutcome::CachedDeny);
        metrics.judge_latency(0.2);
        assert_exposes(
            &registry,
            &[
                "toolgate_judge_calls_total{outcome=\"cached_deny\"} 2",
                "toolgate_judge_latency_seconds_count 1",
            ],
        );
        assert_eq!(metrics.judge_calls(JudgeOutcome::CachedDeny), 2);
        assert_eq!(metrics.judge_calls(JudgeOutcome::Allow), 0);
    }
}
