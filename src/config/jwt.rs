//! `[auth.jwt]` into the verifier of tenant JWTs: the rules a token must meet and where its
//! keys come from — a JWKS file, read when the configuration is (re)loaded, so a rotated JWKS
//! takes effect on the next reload without a restart; or a JWKS URL, fetched once the gateway
//! runs (no I/O while loading: `toolgate check` loads configurations too).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use toolgate_plugin::ToolCatalog;

use super::RawConfig;
use super::source::{ConfigError, KeyPath, Source};
use crate::tenants::{JwtAuth, JwtRules, RemoteJwks, SigningKeys, parse_jwks};

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
    let keys = match (&jwt.jwks_file, &jwt.jwks_url) {
        (None, None) | (Some(_), Some(_)) => {
            errors.push(source.error_at_key(
                &path,
                "[auth.jwt] needs exactly one of jwks_file and jwks_url: where the keys that sign tenant tokens are",
            ));
            None
        }
        (Some(file), None) => {
            let file_path = source.relative_path(&file.0);
            let read = std::fs::read_to_string(&file_path)
                .map_err(|error| format!("cannot read {}: {error}", file_path.display()))
                .and_then(|text| {
                    parse_jwks(&text).map_err(|error| format!("{}: {error}", file_path.display()))
                });
            match read {
                Ok(keys) => Some(SigningKeys::File {
                    path: file_path,
                    keys: Arc::new(keys),
                }),
                Err(message) => {
                    errors.push(source.error_at_key(&path.clone().key("jwks_file"), message));
                    None
                }
            }
        }
        (None, Some(url)) => {
            if jwt.jwks_refresh_secs == 0 {
                errors.push(source.error_at_key(
                    &path.clone().key("jwks_refresh_secs"),
                    "jwks_refresh_secs must be at least 1",
                ));
            }
            match jwks_url(url.0.trim()) {
                Ok(url) => Some(SigningKeys::Url(Arc::new(RemoteJwks::new(
                    url,
                    Duration::from_secs(jwt.jwks_refresh_secs.max(1)),
                )))),
                Err(message) => {
                    errors.push(source.error_at_key(&path.clone().key("jwks_url"), message));
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

/// A JWKS URL toolgate may fetch keys from: https, or http to a loopback host (a sidecar, a
/// test) where nobody on the network can swap the keys.
fn jwks_url(text: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text).map_err(|error| format!("not a URL: {error}"))?;
    let loopback = url.host_str().is_some_and(|host| {
        host.eq_ignore_ascii_case("localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        "http" => Err(
            "the JWKS URL must be https (http only to a loopback host): whoever can change the keys in transit can mint tokens".to_owned(),
        ),
        other => Err(format!("the JWKS URL's scheme must be https, not {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::jwks_url;

    #[test]
    fn a_jwks_url_is_https_or_loopback_http() {
        for good in [
            "https://idp.example.com/.well-known/jwks.json",
            "http://127.0.0.1:8081/jwks",
            "http://[::1]/jwks",
            "http://localhost/jwks",
        ] {
            assert!(jwks_url(good).is_ok(), "{good}");
        }
        for bad in [
            "http://idp.example.com/jwks",
            "file:///etc/jwks.json",
            "not a url",
        ] {
            assert!(jwks_url(bad).is_err(), "{bad}");
        }
    }
}
