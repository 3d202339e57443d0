//! `[services.NAME]` into validated [`ServiceDescriptor`]s: an absolute http(s) URL, positive
//! timeouts and breaker numbers, distinct config param names, and headers that are valid HTTP
//! (marked sensitive, since they usually carry credentials).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue, Uri, header};
use toolgate_plugin::{BreakerSettings, ConfigParam, ServiceDescriptor};

use super::RawService;
use super::source::{ConfigError, KeyPath, Source};

/// `[services.NAME]`, each mistake said at its key.
pub(super) fn build_services(
    raw: &BTreeMap<String, RawService>,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> BTreeMap<String, Arc<ServiceDescriptor>> {
    let mut services = BTreeMap::new();
    for (name, entry) in raw {
        let path = KeyPath::default().key("services").key(name);
        let mut fail = |key: &str, message: String| {
            let at = if key.is_empty() {
                path.clone()
            } else {
                path.clone().dotted(key)
            };
            errors.push(source.error_at_key(&at, message));
        };
        if let Err(message) = check_url(&entry.url.0) {
            fail("url", message);
        }
        for (key, value) in [
            ("timeout_ms", entry.timeout_ms),
            ("breaker_failures", u64::from(entry.breaker_failures)),
            ("breaker_cool_down_ms", entry.breaker_cool_down_ms),
        ] {
            if value == 0 {
                fail(key, "must be greater than 0".to_owned());
            }
        }
        let mut seen = BTreeSet::new();
        for (index, param) in entry.config_params.iter().enumerate() {
            let key = format!("config-params[{index}]");
            if param.name.trim().is_empty() {
                fail(&key, "a config param needs a name".to_owned());
            } else if !seen.insert(param.name.as_str()) {
                fail(
                    &key,
                    format!("config param '{}' is declared twice", param.name),
                );
            }
        }
        let mut headers = http::HeaderMap::new();
        for (header_name, value) in &entry.headers {
            let key = format!("headers.{header_name}");
            match (
                HeaderName::from_bytes(header_name.as_bytes()),
                HeaderValue::from_str(&value.0),
            ) {
                (Ok(parsed), Ok(mut value)) => {
                    value.set_sensitive(true);
                    headers.insert(parsed, value);
                }
                (Err(_), _) => fail(&key, format!("'{header_name}' is not a valid header name")),
                (_, Err(_)) => fail(&key, "not a valid header value".to_owned()),
            }
        }
        // An empty token means none, so `${TOKEN:-}` makes authentication optional.
        if let Some(token) = entry.bearer_token.as_ref().map(|token| token.0.trim())
            && !token.is_empty()
        {
            if headers.contains_key(header::AUTHORIZATION) {
                fail(
                    "bearer_token",
                    "set either bearer_token or headers.authorization, not both".to_owned(),
                );
            }
            match HeaderValue::from_str(&format!("Bearer {token}")) {
                Ok(mut value) => {
                    value.set_sensitive(true);
                    headers.insert(header::AUTHORIZATION, value);
                }
                Err(_) => fail(
                    "bearer_token",
                    "the token is not a valid header value".to_owned(),
                ),
            }
        }
        let descriptor = ServiceDescriptor {
            name: name.clone(),
            url: entry.url.0.clone(),
            timeout: Duration::from_millis(entry.timeout_ms),
            config_params: entry
                .config_params
                .iter()
                .map(|param| ConfigParam {
                    name: param.name.clone(),
                    required: param.required,
                })
                .collect(),
            headers,
            breaker: BreakerSettings {
                failure_threshold: entry.breaker_failures,
                cool_down: Duration::from_millis(entry.breaker_cool_down_ms),
            },
        };
        services.insert(name.clone(), Arc::new(descriptor));
    }
    services
}

/// An absolute `http://` or `https://` URL with a host.
fn check_url(url: &str) -> Result<(), String> {
    let invalid =
        || format!("'{url}' is not an absolute http(s) URL (e.g. http://127.0.0.1:8181/validate)");
    let uri: Uri = url.parse().map_err(|_| invalid())?;
    match (uri.scheme_str(), uri.host()) {
        (Some("http" | "https"), Some(host)) if !host.is_empty() => Ok(()),
        _ => Err(invalid()),
    }
}

#[cfg(test)]
mod tests {
    use super::check_url;

    #[test]
    fn only_absolute_http_urls_are_services() {
        assert!(check_url("http://127.0.0.1:8181/validate").is_ok());
        assert!(check_url("https://checks.internal/v1/validate").is_ok());
        for bad in [
            "",
            "127.0.0.1:8181",
            "/validate",
            "ftp://host/x",
            "http://",
            "not a url",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }
}
