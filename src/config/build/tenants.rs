//! `[tenants.NAME]`: each tenant's key digests, groups and access level.

use std::collections::BTreeMap;
use std::sync::Arc;

use toolgate_plugin::Tenant;

use super::super::RawConfig;
use super::super::source::{ConfigError, KeyPath, Source};
use crate::tenants::{KeyDigest, TenantDirectory, digest, parse_digest};

/// `[tenants.NAME]` into the key table. Every tenant needs a key, and no key may belong to two
/// tenants (the request could not say whose it is).
pub(super) fn build_tenants(
    raw: &RawConfig,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> TenantDirectory {
    let mut owners: BTreeMap<KeyDigest, &str> = BTreeMap::new();
    let mut tenants = Vec::new();
    for (name, entry) in &raw.tenants {
        let tenant_path = KeyPath::default().key("tenants").key(name);
        let mut digests = Vec::new();
        for (index, key) in entry.api_keys.iter().enumerate() {
            let path = tenant_path.clone().key("api_keys").index(index);
            if key.0.trim().is_empty() {
                errors.push(source.error_at_key(&path, "an API key must not be empty"));
            } else {
                digests.push((digest(key.0.trim().as_bytes()), path));
            }
        }
        for (index, hex) in entry.api_key_sha256.iter().enumerate() {
            let path = tenant_path.clone().key("api_key_sha256").index(index);
            match parse_digest(hex) {
                Some(parsed) => digests.push((parsed, path)),
                None => errors.push(source.error_at_key(
                    &path,
                    "not a SHA-256 digest: write 64 hex digits (printf %s \"$KEY\" | sha256sum)",
                )),
            }
        }
        // With [auth.jwt] a tenant may be known only by the tokens that name it.
        if entry.api_keys.is_empty() && entry.api_key_sha256.is_empty() && raw.auth.jwt.is_none() {
            errors.push(source.error_at_key(
                &tenant_path,
                "a tenant needs a key: set api_keys or api_key_sha256 (or identify tenants by JWT in [auth.jwt])",
            ));
        }
        for (upstream, key) in &entry.upstream_keys {
            let path = tenant_path.clone().key("upstream_keys").key(upstream);
            if !raw.upstreams.contains_key(upstream) {
                let known = raw.upstreams.keys().cloned().collect::<Vec<_>>().join(", ");
                errors.push(source.error_at_key(
                    &path,
                    format!("unknown upstream '{upstream}' (defined: {known})"),
                ));
            } else if key.0.trim().is_empty() {
                errors.push(source.error_at_key(&path, "an upstream key must not be empty"));
            }
        }
        for (parsed, path) in &digests {
            if let Some(owner) = owners.insert(*parsed, name) {
                errors.push(source.error_at_key(
                    path,
                    format!("this key is also tenant '{owner}''s: a key identifies one tenant"),
                ));
            }
        }
        let tenant = Tenant {
            name: name.clone(),
            // A tenant that names no group holds the one every untagged tool is in.
            groups: if entry.groups.is_empty() {
                vec![toolgate_plugin::catalog::DEFAULT_GROUP.to_owned()]
            } else {
                entry.groups.clone()
            },
            access_level: entry.access_level.clone(),
            allowed_tools: entry.allowed_tools.clone(),
            denied_tools: entry.denied_tools.clone(),
            agents: entry.agents.clone(),
        };
        tenants.push((
            Arc::new(tenant),
            digests.into_iter().map(|(digest, _)| digest).collect(),
        ));
    }
    TenantDirectory::new(tenants)
}
