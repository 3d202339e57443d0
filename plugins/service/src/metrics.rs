//! The plugin's Prometheus series, labelled by service name (a config-defined, bounded set).
//! Registered once by the factory; every instance and every service shares the families.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use toolgate_plugin::{registered, registered_seconds};

use crate::breaker::BreakerState;
use crate::failure::FailureKind;

/// How one consultation of a service ended, the `outcome` label of `toolgate_service_calls_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    Allow,
    Deny,
    Modify,
    /// No usable answer (the kind is in `toolgate_service_errors_total`).
    Unavailable,
}

impl CallOutcome {
    fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Allow => "allow",
            CallOutcome::Deny => "deny",
            CallOutcome::Modify => "modify",
            CallOutcome::Unavailable => "unavailable",
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    service: String,
    outcome: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    service: String,
    kind: &'static str,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServiceLabels {
    service: String,
}

fn latency_histogram() -> Histogram {
    // 1 ms … ~4 s: a validator on the same network answers in the first buckets.
    Histogram::new(exponential_buckets(0.001, 2.0, 13))
}

/// Handles to the series. Cloning shares them.
#[derive(Clone)]
pub struct Metrics {
    calls: Family<CallLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    latency: Family<ServiceLabels, Histogram, fn() -> Histogram>,
    breaker_state: Family<ServiceLabels, Gauge>,
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Self {
        Metrics {
            calls: registered(
                registry,
                "toolgate_service_calls",
                "Validator service consultations, by service and outcome (deny = a denial)",
                Family::default(),
            ),
            errors: registered(
                registry,
                "toolgate_service_errors",
                "Validator service calls without a usable answer, by service and kind",
                Family::default(),
            ),
            latency: registered_seconds(
                registry,
                "toolgate_service_latency",
                "Time a validator service took to answer (calls actually sent)",
                Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            ),
            breaker_state: registered(
                registry,
                "toolgate_service_breaker_state",
                "Circuit breaker of each validator service: 0 closed, 1 open, 2 half-open",
                Family::default(),
            ),
        }
    }

    /// Every series of `service` at zero (its breaker closed), so its panels and alerts read 0
    /// before its first call rather than nothing.
    pub fn prime(&self, service: &str) {
        use CallOutcome::*;
        for outcome in [Allow, Deny, Modify, Unavailable] {
            self.calls.get_or_create_owned(&CallLabels {
                service: service.to_owned(),
                outcome: outcome.as_str(),
            });
        }
        for kind in FailureKind::ALL {
            self.errors.get_or_create_owned(&ErrorLabels {
                service: service.to_owned(),
                kind: kind.as_str(),
            });
        }
        let labels = ServiceLabels {
            service: service.to_owned(),
        };
        self.latency.get_or_create_owned(&labels);
        self.breaker_state.get_or_create_owned(&labels);
    }

    pub fn call(&self, service: &str, outcome: CallOutcome) {
        self.calls
            .get_or_create(&CallLabels {
                service: service.to_owned(),
                outcome: outcome.as_str(),
            })
            .inc();
    }

    pub fn error(&self, service: &str, kind: FailureKind) {
        self.errors
            .get_or_create(&ErrorLabels {
                service: service.to_owned(),
                kind: kind.as_str(),
            })
            .inc();
    }

    pub fn latency(&self, service: &str, seconds: f64) {
        self.latency
            .get_or_create(&ServiceLabels {
                service: service.to_owned(),
            })
            .observe(seconds);
    }

    pub fn breaker_state(&self, service: &str, state: BreakerState) {
        self.breaker_state
            .get_or_create(&ServiceLabels {
                service: service.to_owned(),
            })
            .set(state as i64);
    }
}

#[cfg(test)]
mod tests {
    use toolgate_plugin::testing::{assert_exposes, registered};

    use super::*;

    #[test]
    fn series_are_exposed_under_their_documented_names() {
        let (metrics, registry) = registered(Metrics::register);
        metrics.call("argcheck", CallOutcome::Deny);
        metrics.error("argcheck", FailureKind::Timeout);
        metrics.latency("argcheck", 0.02);
        metrics.breaker_state("argcheck", BreakerState::Open);
        assert_exposes(
            &registry,
            &[
                "toolgate_service_calls_total{service=\"argcheck\",outcome=\"deny\"} 1",
                "toolgate_service_errors_total{service=\"argcheck\",kind=\"timeout\"} 1",
                "toolgate_service_latency_seconds_count{service=\"argcheck\"} 1",
                "toolgate_service_breaker_state{service=\"argcheck\"} 1",
            ],
        );
    }
}
