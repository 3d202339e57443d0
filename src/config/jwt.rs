//! `[auth.jwt]` into the verifier of tenant JWTs: the rules a token must meet and the keys of
//! its JWKS file, read when the configuration is (re)loaded, so a rotated JWKS takes effect on
//! the next reload without a restart.

use std::sync::Arc;

use toolgate_plugin::ToolCatalog;

use super::RawConfig;
use super::source::{ConfigError, KeyPath, Source};
use crate::tenants::{JwtAuth, JwtRules, parse_jwks};

/// The verifier `[auth.jwt]` describes, or `None` (with errors pushed) when there is none or it
/// is unusable.
pub(super) fn build_jwt(
    raw: &RawConfig,
    source: &Source,
    catalog: &Arc<ToolCatalog>,
    errors: &mut Vec<ConfigError>,
) -> Option<JwtAuth> {
    let jwt = raw.auth.jwt.as_ref()?;
    let path = KeyPath::default().key("auth").key("jwt");
    let before = errors.len();
    if jwt.audience.0.trim().is_empty() {
        errors.push(source.error_at_key(
            &path.clone().key("audience"),
            "the audience must not be empty: tokens minted for other services must not be accepted",
        ));
    }
    for (key, claim) in [
        ("tenant_claim", Some(&jwt.tenant_claim)),
        ("groups_claim", jwt.groups_claim.as_ref()),
        ("access_level_claim", jwt.access_level_claim.as_ref()),
    ] {
        if claim.is_some_and(|claim| claim.trim().is_empty()) {
            errors.push(
                source.error_at_key(&path.clone().key(key), "a claim name must not be empty"),
            );
        }
    }
    let keys = match &jwt.jwks_file {
        None => {
            errors.push(source.error_at_key(
                &path,
                "[auth.jwt] needs jwks_file: the JWKS whose keys sign tenant tokens",
            ));
            None
        }
        Some(file) => {
            let file_path = source.relative_path(&file.0);
            let read = std::fs::read_to_string(&file_path)
                .map_err(|error| format!("cannot read {}: {error}", file_path.display()))
                .and_then(|text| {
                    parse_jwks(&text).map_err(|error| format!("{}: {error}", file_path.display()))
                });
            match read {
                Ok(keys) => Some(keys),
                Err(message) => {
                    errors.push(source.error_at_key(&path.clone().key("jwks_file"), message));
                    None
                }
            }
        }
    };
    let keys = keys.filter(|_| errors.len() == before)?;
    let rules = JwtRules {
        audience: jwt.audience.0.trim().to_owned(),
        issuer: jwt.issuer.as_ref().map(|issuer| issuer.0.trim().to_owned()),
        leeway_secs: jwt.leeway_secs,
        tenant_claim: jwt.tenant_claim.clone(),
        groups_claim: jwt.groups_claim.clone(),
        access_level_claim: jwt.access_level_claim.clone(),
    };
    Some(JwtAuth::new(rules, keys, catalog.clone()))
}
