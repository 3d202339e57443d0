//! `[store]`: where state shared by replicas is kept, and what happens when it is down.

use std::sync::Arc;
use std::time::Duration;

use toolgate_plugin::{StateStore, StoreFailMode};

use super::super::RawConfig;
use super::super::source::{ConfigError, KeyPath, Source};
use super::PluginRegistry;
use super::server::keyword;

/// `[store]`: the shared state store and what to do when it cannot answer.
pub(super) fn build_store(
    raw: &RawConfig,
    source: &Source,
    plugins: &PluginRegistry,
    errors: &mut Vec<ConfigError>,
) -> Option<(Arc<dyn StateStore>, StoreFailMode)> {
    let store_path = KeyPath::default().key("store");
    let fail_mode = keyword(
        raw.store.fail_mode.as_deref(),
        (&store_path, "fail_mode"),
        &[
            ("block", StoreFailMode::Block),
            ("allow", StoreFailMode::Allow),
        ],
        StoreFailMode::Block,
        source,
        errors,
    );
    let timeout_ms = raw.store.timeout_ms.unwrap_or(500);
    if timeout_ms == 0 {
        errors.push(source.error_at_key(
            &store_path.clone().key("timeout_ms"),
            "must be greater than 0",
        ));
    }
    let url = raw
        .store
        .url
        .as_ref()
        .map(|url| url.0.trim())
        .filter(|url| !url.is_empty() && *url != "memory");
    let root_certificate = match &raw.store.ca_file {
        None => None,
        Some(path) => {
            let path = source.relative_path(&path.0);
            match std::fs::read(&path) {
                Ok(pem) => Some(pem),
                Err(error) => {
                    errors.push(source.error_at_key(
                        &store_path.clone().key("ca_file"),
                        format!("cannot read {}: {error}", path.display()),
                    ));
                    return None;
                }
            }
        }
    };
    match plugins.store_for(
        url,
        Duration::from_millis(timeout_ms.max(1)),
        root_certificate,
    ) {
        Ok(store) => Some((store, fail_mode)),
        Err(message) => {
            let key = if message.contains("CA certificate") {
                "ca_file"
            } else {
                "url"
            };
            errors.push(source.error_at_key(&store_path.key(key), message));
            None
        }
    }
}
