//! `[upstreams.NAME]`: each upstream's URL, auth, per-tenant keys and timeouts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::super::RawConfig;
use super::super::source::{ConfigError, KeyPath, Source};
use crate::upstream::{Upstream, UpstreamAuth, UpstreamSettings};

/// Every upstream that can be built; each mistake is said at its key.
pub(super) fn build_upstreams(
    raw: &RawConfig,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> BTreeMap<String, Arc<Upstream>> {
    let mut upstreams = BTreeMap::new();
    for (name, upstream) in &raw.upstreams {
        for (key, value) in [
            ("connect_timeout_ms", upstream.connect_timeout_ms),
            ("response_timeout_ms", upstream.response_timeout_ms),
            ("read_timeout_ms", upstream.read_timeout_ms),
        ] {
            if value == 0 {
                let path = KeyPath::default().key("upstreams").key(name).key(key);
                errors.push(source.error_at_key(&path, "must be greater than 0"));
            }
        }
        let auth = match upstream.auth.as_deref().map(UpstreamAuth::parse) {
            Some(Err(message)) => {
                let path = KeyPath::default().key("upstreams").key(name).key("auth");
                errors.push(source.error_at_key(&path, message));
                None
            }
            Some(Ok(auth)) => Some(auth),
            None => None,
        };
        let tenant_keys = raw
            .tenants
            .iter()
            .filter_map(|(tenant, entry)| {
                let key = entry.upstream_keys.get(name)?;
                Some((tenant.clone(), key.0.trim().to_owned()))
            })
            .collect();
        let settings = UpstreamSettings {
            name: name.clone(),
            url: upstream.url.0.clone(),
            api_key: upstream.api_key.as_ref().map(|key| key.0.clone()),
            auth,
            tenant_keys,
            connect_timeout: Duration::from_millis(upstream.connect_timeout_ms),
            response_timeout: Duration::from_millis(upstream.response_timeout_ms),
            read_timeout: Duration::from_millis(upstream.read_timeout_ms),
        };
        match Upstream::new(settings) {
            Ok(built) => {
                upstreams.insert(name.clone(), Arc::new(built));
            }
            Err(message) => errors.push(source.error_at_key(
                &KeyPath::default().key("upstreams").key(name).key("url"),
                message,
            )),
        }
    }
    upstreams
}
