//! Validator services end to end with services that answer: the `service` plugin calling the
//! reference validator from `examples/` (and scripted services) over loopback, and `toolgate
//! check` on malformed descriptors. The shared set-up is in `common/services.rs`; misbehaving
//! services are in `service_failures.rs`.

mod config;
mod envelope;
mod hostile;
mod instances;
mod verdicts;
