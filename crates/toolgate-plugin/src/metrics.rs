//! Registering a metric where its handle is made, so a plugin's metrics struct is one
//! expression per series instead of a default value and a `register` call kept apart.

use prometheus_client::registry::{Metric, Registry, Unit};

/// Puts `metric` in `/metrics` under `name` and gives back the handle (handles share series).
pub fn registered<M: Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
}

/// As [`registered`], for a metric measured in seconds (the name gains `_seconds`).
pub fn registered_seconds<M: Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register_with_unit(name, help, Unit::Seconds, metric.clone());
    metric
}
