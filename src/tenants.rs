//! Tenant authentication: the table from key digests to tenants, reading a client's key from
//! the headers every OpenAI and Anthropic SDK sends, and removing it before the request goes
//! upstream. Keys are held only as SHA-256 digests, so no key can reach a log or a dump. A
//! bearer value shaped like a JWT is verified as one when `[auth.jwt]` is configured (`jwt`).

mod jwks;
mod jwks_url;
mod jwt;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use http::HeaderMap;
use http::header::{self, HeaderName};
use toolgate_plugin::Tenant;

pub use jwks::parse_jwks;
pub use jwks_url::RemoteJwks;
pub use jwt::{JwtAuth, JwtRules, SigningKeys, TokenRejection, looks_like_jwt};

/// The headers a client's key may arrive in: OpenAI SDKs send `Authorization: Bearer`,
/// Anthropic's `x-api-key`, Azure-style clients `api-key`, Google's Gen AI SDKs
/// `x-goog-api-key`. A tenant's key in any of them identifies it and never goes upstream.
static KEY_HEADERS: [HeaderName; 4] = [
    header::AUTHORIZATION,
    HeaderName::from_static("x-api-key"),
    HeaderName::from_static("api-key"),
    HeaderName::from_static("x-goog-api-key"),
];

pub type KeyDigest = [u8; 32];

/// Who may talk to a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteAuth {
    /// Anyone; a tenant key that is presented still identifies its tenant.
    None,
    /// Only clients presenting a tenant's key (401 otherwise).
    Tenant,
}

/// Why a request could not be authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    MissingKey,
    UnknownKey,
    /// A JWT that `[auth.jwt]` refused, and why.
    Token(TokenRejection),
}

/// Every tenant of one configuration, by name and by key digest.
#[derive(Debug, Default)]
pub struct TenantDirectory {
    by_name: Arc<BTreeMap<String, Arc<Tenant>>>,
    by_digest: HashMap<KeyDigest, Arc<Tenant>>,
    jwt: Option<Arc<JwtAuth>>,
}

impl TenantDirectory {
    /// `tenants` with the digests of their keys; a digest listed twice is refused by the
    /// config loader before this is built.
    pub fn new(tenants: Vec<(Arc<Tenant>, Vec<KeyDigest>)>) -> Self {
        let mut by_name = BTreeMap::new();
        let mut by_digest = HashMap::new();
        for (tenant, digests) in tenants {
            for digest in digests {
                by_digest.insert(digest, tenant.clone());
            }
            by_name.insert(tenant.name.clone(), tenant);
        }
        TenantDirectory {
            by_name: Arc::new(by_name),
            by_digest,
            jwt: None,
        }
    }

    /// Also identifies tenants by JWTs that `jwt` verifies.
    pub fn with_jwt(mut self, jwt: JwtAuth) -> Self {
        self.jwt = Some(Arc::new(jwt));
        self
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Starts fetching the JWKS URL's keys, if the keys come from one, taking over the keys
    /// `running` (the configuration this one replaces) fetched from the same URL.
    pub fn start_jwks(&self, running: Option<&TenantDirectory>) {
        if let Some(remote) = self.jwt.as_ref().and_then(|jwt| jwt.remote()) {
            let previous = running
                .and_then(|running| running.jwt.as_ref())
                .and_then(|jwt| jwt.remote());
            remote.start(previous.map(Arc::as_ref));
        }
    }

    /// The JWKS file the running keys were read from, if any: a reload watches it too.
    pub fn jwks_file(&self) -> Option<&std::path::Path> {
        self.jwt.as_ref()?.jwks_file()
    }

    /// Why tokens cannot be verified now (a JWKS URL that never answered), if they cannot.
    pub fn signing_keys_missing(&self) -> Option<String> {
        let remote = self.jwt.as_ref()?.remote()?;
        remote.keys().is_none().then(|| {
            format!(
                "no signing keys fetched yet from {}: tenant tokens are refused",
                remote.describe()
            )
        })
    }

    pub fn by_name(&self) -> &Arc<BTreeMap<String, Arc<Tenant>>> {
        &self.by_name
    }

    /// The tenant whose key (or JWT) the request carries. `Ok(None)` when no key was presented.
    pub async fn authenticate(
        &self,
        headers: &HeaderMap,
    ) -> Result<Option<Arc<Tenant>>, AuthFailure> {
        let Some(key) = presented_key(headers) else {
            return Ok(None);
        };
        if let Some(jwt) = &self.jwt
            && looks_like_jwt(key)
        {
            // Base64url parts are ASCII, so a JWT-shaped key is always UTF-8.
            let token = std::str::from_utf8(key).map_err(|_| AuthFailure::UnknownKey)?;
            return jwt
                .verify(token, &self.by_name)
                .await
                .map(Some)
                .map_err(AuthFailure::Token);
        }
        self.by_digest
            .get(&digest(key))
            .cloned()
            .map(Some)
            .ok_or(AuthFailure::UnknownKey)
    }
}

/// The SHA-256 digest of a key.
pub fn digest(key: &[u8]) -> KeyDigest {
    let digest = ring::digest::digest(&ring::digest::SHA256, key);
    let mut bytes = KeyDigest::default();
    bytes.copy_from_slice(digest.as_ref());
    bytes
}

/// Reads a lowercase or uppercase hex SHA-256 digest.
pub fn parse_digest(hex: &str) -> Option<KeyDigest> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (index, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(digest)
}

/// The client's key from the first key header that carries one.
fn presented_key(headers: &HeaderMap) -> Option<&[u8]> {
    KEY_HEADERS.iter().find_map(|name| {
        let value = headers.get(name)?.as_bytes();
        let key = if *name == header::AUTHORIZATION {
            let (scheme, rest) = value.split_at_checked(7)?;
            if !scheme.eq_ignore_ascii_case(b"bearer ") {
                return None;
            }
            rest
        } else {
            value
        };
        let key = key.trim_ascii();
        (!key.is_empty()).then_some(key)
    })
}

/// Tells the operator a request was refused for its key: WARN with the route, the path and
/// the reason's code. Never the key, nor the query string, where some clients put keys.
pub(crate) fn warn_unauthenticated(request_id: &str, route: &str, path: &str, code: &str) {
    tracing::warn!(%request_id, %route, %path, %code, "401: no valid tenant key for the route");
}

/// Whether `name` is a header a client's key may travel in.
pub fn is_client_credential(name: &HeaderName) -> bool {
    KEY_HEADERS.contains(name)
}

/// The tenant the request's key belongs to. A route that requires a tenant refuses a missing
/// or unknown key; elsewhere an unknown key is taken for the upstream's own and passed on.
pub(crate) async fn authenticate(
    tenants: &TenantDirectory,
    auth: RouteAuth,
    headers: &HeaderMap,
) -> Result<Option<Arc<Tenant>>, AuthFailure> {
    if tenants.is_empty() {
        return Ok(None);
    }
    match (tenants.authenticate(headers).await, auth) {
        (Ok(Some(tenant)), _) => Ok(Some(tenant)),
        (Ok(None) | Err(_), RouteAuth::None) => Ok(None),
        (Ok(None), RouteAuth::Tenant) => Err(AuthFailure::MissingKey),
        (Err(failure), RouteAuth::Tenant) => Err(failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn directory() -> TenantDirectory {
        let tenant = Arc::new(Tenant {
            name: "acme".into(),
            ..Tenant::default()
        });
        TenantDirectory::new(vec![(tenant, vec![digest(b"sk-acme")])])
    }

    fn headers(name: &'static str, value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(name, HeaderValue::from_static(value));
        headers
    }

    #[tokio::test]
    async fn a_key_is_read_from_each_sdk_header() {
        let directory = directory();
        for headers in [
            headers("authorization", "Bearer sk-acme"),
            headers("authorization", "bearer  sk-acme "),
            headers("x-api-key", "sk-acme"),
            headers("api-key", "sk-acme"),
            headers("x-goog-api-key", "sk-acme"),
        ] {
            let tenant = directory.authenticate(&headers).await.expect("known key");
            assert_eq!(
                tenant.map(|tenant| tenant.name.clone()).as_deref(),
                Some("acme")
            );
        }
    }

    #[tokio::test]
    async fn unknown_and_missing_keys_are_told_apart() {
        let directory = directory();
        assert_eq!(
            directory
                .authenticate(&headers("authorization", "Bearer sk-other"))
                .await,
            Err(AuthFailure::UnknownKey)
        );
        assert_eq!(directory.authenticate(&HeaderMap::new()).await, Ok(None));
        assert_eq!(
            directory
                .authenticate(&headers("authorization", "Basic c2s6"))
                .await,
            Ok(None)
        );
    }

    #[test]
    fn digests_round_trip_through_hex() {
        let hex: String = digest(b"sk-acme")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(parse_digest(&hex), Some(digest(b"sk-acme")));
        assert_eq!(parse_digest(&hex.to_uppercase()), Some(digest(b"sk-acme")));
        assert_eq!(parse_digest("abc"), None);
        assert_eq!(parse_digest(&"zz".repeat(32)), None);
    }

    #[test]
    fn every_header_a_key_travels_in_is_a_credential() {
        let mut headers = headers("authorization", "Bearer sk-acme");
        headers.insert("x-api-key", HeaderValue::from_static("sk-acme"));
        headers.insert("api-key", HeaderValue::from_static("sk-acme"));
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        let credentials: Vec<_> = headers
            .keys()
            .filter(|name| is_client_credential(name))
            .collect();
        assert_eq!(credentials.len(), 3);
        assert!(!is_client_credential(&http::header::CONTENT_TYPE));
    }
}
