//! Validator services, the first tier of seed 002's two-tier model applied to guardrails: a
//! `[services.NAME]` descriptor says where a check running as an HTTP service lives, how long it
//! may take, how to authenticate to it, and which config params its plugin instances supply.
//! The gateway validates descriptors at load; plugin factories read them from the
//! [`BuildContext`](crate::BuildContext).

use std::time::Duration;

use http::HeaderMap;

/// One `[services.NAME]` entry, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceDescriptor {
    /// The name plugin instances refer to (`service = "NAME"`).
    pub name: String,
    /// An absolute `http` or `https` URL the envelope is POSTed to.
    pub url: String,
    /// The longest one call may take, connection included.
    pub timeout: Duration,
    /// The params an instance may (or must) set in its `config` table; no other is accepted.
    pub config_params: Vec<ConfigParam>,
    /// Headers sent with every call, authentication included. Every value is marked sensitive,
    /// so `Debug` never prints a token.
    pub headers: HeaderMap,
    /// When calls stop being made after failures, and when one is tried again.
    pub breaker: BreakerSettings,
}

impl ServiceDescriptor {
    /// The declared param with this name, if any (exact match).
    pub fn config_param(&self, name: &str) -> Option<&ConfigParam> {
        self.config_params.iter().find(|param| param.name == name)
    }
}

/// A config param a service declares (seed 002's `config-params`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigParam {
    /// The param's name, as an instance writes it in `config`.
    pub name: String,
    /// Whether every instance must set it.
    pub required: bool,
}

/// When a service's circuit breaker opens and when it tries again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerSettings {
    /// Consecutive failed calls that open the breaker (at least 1).
    pub failure_threshold: u32,
    /// How long the breaker stays open before one probe call is let through.
    pub cool_down: Duration,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings {
            failure_threshold: 5,
            cool_down: Duration::from_secs(30),
        }
    }
}
