//! Tenant identity from JWTs (`[auth.jwt]`): the checks a token must pass (signature by one of
//! the JWKS's keys, expiry, audience, issuer), and the mapping of its claims onto a
//! `[tenants.NAME]`. Claims may only narrow what the named tenant holds, never widen it.

use std::collections::BTreeMap;
use std::sync::Arc;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};
use toolgate_plugin::{Tenant, ToolCatalog};

use super::jwks::VerifyingKey;
use super::jwks_url::RemoteJwks;

/// Where the verifying keys come from.
#[derive(Debug)]
pub enum SigningKeys {
    /// Read from `jwks_file` (at `path`) when the configuration loaded.
    File {
        path: std::path::PathBuf,
        keys: Arc<Vec<VerifyingKey>>,
    },
    /// Fetched from `jwks_url`, and refreshed.
    Url(Arc<RemoteJwks>),
}

impl SigningKeys {
    fn current(&self) -> Option<Arc<Vec<VerifyingKey>>> {
        match self {
            SigningKeys::File { keys, .. } => Some(keys.clone()),
            SigningKeys::Url(remote) => remote.keys(),
        }
    }
}

/// What a token must satisfy and how its claims name a tenant.
#[derive(Debug, Clone)]
pub struct JwtRules {
    pub audience: String,
    pub issuer: Option<String>,
    pub leeway_secs: u64,
    /// The claim whose string value names a `[tenants.NAME]`.
    pub tenant_claim: String,
    /// A claim listing groups: the tenant's groups are narrowed to those it also lists.
    pub groups_claim: Option<String>,
    /// A claim naming an access level: it replaces the tenant's only when it opens no category
    /// the tenant's own level does not.
    pub access_level_claim: Option<String>,
}

/// The verifier of one configuration: its rules, its keys, and the catalog's access levels
/// (to tell whether a claimed level is narrower than the tenant's).
#[derive(Debug)]
pub struct JwtAuth {
    rules: JwtRules,
    keys: SigningKeys,
    catalog: Arc<ToolCatalog>,
}

/// Why a token was refused; each is a 401 whose `code` is [`TokenRejection::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRejection {
    Malformed,
    Expired,
    NotYetValid,
    BadSignature,
    UnknownKey,
    /// No key at all: the JWKS URL has not answered yet.
    NoKeys,
    WrongAlgorithm,
    WrongAudience,
    WrongIssuer,
    MissingClaim,
    UnknownTenant,
    GroupsNotHeld,
    AccessLevelNotHeld,
}

impl TokenRejection {
    pub fn code(self) -> &'static str {
        match self {
            TokenRejection::Malformed => "invalid_token",
            TokenRejection::Expired => "token_expired",
            TokenRejection::NotYetValid => "token_not_yet_valid",
            TokenRejection::BadSignature => "bad_signature",
            TokenRejection::UnknownKey => "unknown_signing_key",
            TokenRejection::NoKeys => "jwks_unavailable",
            TokenRejection::WrongAlgorithm => "wrong_algorithm",
            TokenRejection::WrongAudience => "wrong_audience",
            TokenRejection::WrongIssuer => "wrong_issuer",
            TokenRejection::MissingClaim => "missing_claim",
            TokenRejection::UnknownTenant => "unknown_tenant",
            TokenRejection::GroupsNotHeld => "groups_not_held",
            TokenRejection::AccessLevelNotHeld => "access_level_not_held",
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            TokenRejection::Malformed => "the bearer token is not a readable JWT",
            TokenRejection::Expired => "the JWT has expired",
            TokenRejection::NotYetValid => "the JWT is not valid yet (nbf)",
            TokenRejection::BadSignature => {
                "the JWT's signature does not verify with the configured keys"
            }
            TokenRejection::UnknownKey => {
                "the JWT names a signing key (kid) the JWKS does not hold"
            }
            TokenRejection::NoKeys => {
                "no signing keys to verify the JWT with: the JWKS URL has not been fetched successfully yet"
            }
            TokenRejection::WrongAlgorithm => {
                "the JWT's algorithm is not the one its signing key is for"
            }
            TokenRejection::WrongAudience => "the JWT is not issued for this gateway's audience",
            TokenRejection::WrongIssuer => "the JWT is not from the configured issuer",
            TokenRejection::MissingClaim => "the JWT lacks a claim toolgate requires",
            TokenRejection::UnknownTenant => "the JWT's tenant claim names no configured tenant",
            TokenRejection::GroupsNotHeld => {
                "the JWT's groups claim names no group its tenant holds"
            }
            TokenRejection::AccessLevelNotHeld => {
                "the JWT's access level claim is wider than its tenant's access level, or unknown"
            }
        }
    }
}

impl JwtAuth {
    pub fn new(rules: JwtRules, keys: SigningKeys, catalog: Arc<ToolCatalog>) -> Self {
        JwtAuth {
            rules,
            keys,
            catalog,
        }
    }

    /// The fetched key set, when the keys come from a URL.
    pub fn remote(&self) -> Option<&Arc<RemoteJwks>> {
        match &self.keys {
            SigningKeys::Url(remote) => Some(remote),
            SigningKeys::File { .. } => None,
        }
    }

    /// The JWKS file the keys were read from, when they come from one.
    pub fn jwks_file(&self) -> Option<&std::path::Path> {
        match &self.keys {
            SigningKeys::File { path, .. } => Some(path),
            SigningKeys::Url(_) => None,
        }
    }

    /// The tenant `token` identifies, narrowed by its claims. A token whose `kid` the fetched
    /// keys lack makes them be fetched again (rate-limited) before it is refused.
    pub async fn verify(
        &self,
        token: &str,
        tenants: &BTreeMap<String, Arc<Tenant>>,
    ) -> Result<Arc<Tenant>, TokenRejection> {
        let claims = match (self.verified_claims(token), &self.keys) {
            (
                Err(TokenRejection::UnknownKey | TokenRejection::NoKeys),
                SigningKeys::Url(remote),
            ) => {
                let kid = jsonwebtoken::decode_header(token)
                    .ok()
                    .and_then(|header| header.kid);
                // Boxed: the fetch's future is large and rare; an exchange's state stays small.
                Box::pin(remote.refresh_for_unknown_key(kid.as_deref())).await;
                self.verified_claims(token)?
            }
            (claims, _) => claims?,
        };
        let name = claims
            .get(&self.rules.tenant_claim)
            .ok_or(TokenRejection::MissingClaim)?
            .as_str()
            .ok_or(TokenRejection::UnknownTenant)?;
        let tenant = tenants.get(name).ok_or(TokenRejection::UnknownTenant)?;
        self.narrowed(tenant, &claims)
    }

    /// The claims of a token whose signature, times, audience and issuer all check out.
    fn verified_claims(&self, token: &str) -> Result<Map<String, Value>, TokenRejection> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenRejection::Malformed)?;
        let keys = self.keys.current().ok_or(TokenRejection::NoKeys)?;
        let named: Vec<&VerifyingKey> = keys
            .iter()
            .filter(|key| header.kid.is_none() || key.kid == header.kid)
            .collect();
        if named.is_empty() {
            return Err(TokenRejection::UnknownKey);
        }
        crate::crypto::install();
        let mut outcome = Err(TokenRejection::WrongAlgorithm);
        // With no `kid`, every key of the token's algorithm is tried: a signature that verifies
        // with none is a bad signature, one that verifies but fails a claim check says which.
        for key in named.into_iter().filter(|key| key.algorithm == header.alg) {
            match jsonwebtoken::decode::<Map<String, Value>>(
                token,
                &key.key,
                &self.validation(key.algorithm),
            ) {
                Ok(data) => return Ok(data.claims),
                Err(error) => {
                    let rejection = rejection_of(error.kind());
                    if rejection != TokenRejection::BadSignature {
                        return Err(rejection);
                    }
                    outcome = Err(rejection);
                }
            }
        }
        outcome
    }

    fn validation(&self, algorithm: Algorithm) -> Validation {
        let mut validation = Validation::new(algorithm);
        validation.leeway = self.rules.leeway_secs;
        validation.validate_nbf = true;
        validation.set_audience(&[&self.rules.audience]);
        let mut required = vec!["exp", "aud"];
        if let Some(issuer) = &self.rules.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        validation.set_required_spec_claims(&required);
        validation
    }

    /// The tenant as the token's claims narrow it: groups it holds and the token lists, and an
    /// access level no wider than its own. A claim that would widen refuses the token.
    fn narrowed(
        &self,
        tenant: &Arc<Tenant>,
        claims: &Map<String, Value>,
    ) -> Result<Arc<Tenant>, TokenRejection> {
        let groups = match self.rules.groups_claim.as_ref().and_then(|c| claims.get(c)) {
            None => None,
            Some(value) => {
                let listed = string_list(value).ok_or(TokenRejection::Malformed)?;
                let held: Vec<String> = listed
                    .into_iter()
                    .filter(|group| tenant.holds_group(group))
                    .collect();
                if held.is_empty() {
                    return Err(TokenRejection::GroupsNotHeld);
                }
                Some(held)
            }
        };
        let access_level = match self
            .rules
            .access_level_claim
            .as_ref()
            .and_then(|c| claims.get(c))
        {
            None => None,
            Some(value) => {
                let claimed = value.as_str().ok_or(TokenRejection::Malformed)?;
                if !self.level_within(claimed, tenant.access_level.as_deref()) {
                    return Err(TokenRejection::AccessLevelNotHeld);
                }
                Some(claimed.to_owned())
            }
        };
        if groups.is_none() && access_level.is_none() {
            return Ok(tenant.clone());
        }
        let mut narrowed = Tenant::clone(tenant);
        if let Some(groups) = groups {
            narrowed.groups = groups;
        }
        if let Some(level) = access_level {
            narrowed.access_level = Some(level);
        }
        Ok(Arc::new(narrowed))
    }

    /// Whether `claimed` opens only categories `held` opens. A tenant with no level of its own
    /// is judged by the route's, which a token cannot see: no claimed level can be shown to be
    /// narrower, so none is accepted.
    fn level_within(&self, claimed: &str, held: Option<&str>) -> bool {
        let (Some(claimed), Some(held)) = (
            self.catalog.access_level(claimed),
            held.and_then(|held| self.catalog.access_level(held)),
        ) else {
            return false;
        };
        claimed.iter().all(|category| held.contains(category))
    }
}

/// A claim given as an array of strings or as one space-separated string (as `scope` is).
fn string_list(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::String(text) => Some(text.split_whitespace().map(str::to_owned).collect()),
        Value::Array(items) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect(),
        _ => None,
    }
}

fn rejection_of(kind: &ErrorKind) -> TokenRejection {
    match kind {
        ErrorKind::ExpiredSignature => TokenRejection::Expired,
        ErrorKind::ImmatureSignature => TokenRejection::NotYetValid,
        ErrorKind::InvalidSignature => TokenRejection::BadSignature,
        ErrorKind::InvalidAudience => TokenRejection::WrongAudience,
        ErrorKind::InvalidIssuer => TokenRejection::WrongIssuer,
        ErrorKind::InvalidAlgorithm => TokenRejection::WrongAlgorithm,
        // A token without `aud` is not for us; one without `iss` is not from our issuer.
        ErrorKind::MissingRequiredClaim(claim) if claim == "aud" => TokenRejection::WrongAudience,
        ErrorKind::MissingRequiredClaim(claim) if claim == "iss" => TokenRejection::WrongIssuer,
        ErrorKind::MissingRequiredClaim(_) => TokenRejection::MissingClaim,
        _ => TokenRejection::Malformed,
    }
}

/// Whether a presented credential has a JWT's shape: three base64url parts joined by dots.
/// API keys never do, so only these are verified as tokens.
pub fn looks_like_jwt(value: &[u8]) -> bool {
    let mut parts = 0;
    for part in value.split(|byte| *byte == b'.') {
        parts += 1;
        let base64url = |byte: &u8| byte.is_ascii_alphanumeric() || *byte == b'-' || *byte == b'_';
        if part.is_empty() || !part.iter().all(base64url) {
            return false;
        }
    }
    parts == 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_three_base64url_parts_look_like_a_jwt() {
        assert!(looks_like_jwt(b"eyJh.eyJz.c2ln"));
        assert!(looks_like_jwt(b"a-_0.b.c"));
        assert!(!looks_like_jwt(b"sk-acme-tenant-key"));
        assert!(!looks_like_jwt(b"a.b"));
        assert!(!looks_like_jwt(b"a.b.c.d"));
        assert!(!looks_like_jwt(b"a..c"));
        assert!(!looks_like_jwt(b"a.b=.c"));
    }

    #[test]
    fn claim_lists_are_arrays_or_spaced_strings() {
        assert_eq!(
            string_list(&serde_json::json!("a b")),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            string_list(&serde_json::json!(["a"])),
            Some(vec!["a".into()])
        );
        assert_eq!(string_list(&serde_json::json!([1])), None);
    }
}
