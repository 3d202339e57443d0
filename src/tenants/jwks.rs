//! The verifying keys of a JWKS document, as `[auth.jwt]` reads them from `jwks_file` or
//! `jwks_url`: public keys only, each pinned to the one algorithm it verifies.

use std::str::FromStr;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};

/// One public key of the JWKS, pinned to the one algorithm it verifies.
#[derive(Clone)]
pub struct VerifyingKey {
    pub(super) kid: Option<String>,
    pub(super) algorithm: Algorithm,
    pub(super) key: DecodingKey,
}

impl std::fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifyingKey")
            .field("kid", &self.kid)
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl VerifyingKey {
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }
}

/// The signing keys of a JWKS document. Keys for encryption, or of a kind this build cannot
/// verify, are skipped; a symmetric (`oct`) key is refused outright, since anyone who can read
/// the JWKS could then mint tokens.
pub fn parse_jwks(text: &str) -> Result<Vec<VerifyingKey>, String> {
    let set: JwkSet =
        serde_json::from_str(text).map_err(|error| format!("not a JWKS document: {error}"))?;
    let mut keys = Vec::new();
    for (index, jwk) in set.keys.iter().enumerate() {
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            continue;
        }
        if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
            return Err(format!(
                "key {index} is symmetric (kty \"oct\"): only public keys (RSA, EC, OKP) may verify tenant tokens"
            ));
        }
        let Some(algorithm) = algorithm_of(jwk) else {
            continue;
        };
        let key = DecodingKey::from_jwk(jwk)
            .map_err(|error| format!("key {index} cannot be read: {error}"))?;
        keys.push(VerifyingKey {
            kid: jwk.common.key_id.clone(),
            algorithm,
            key,
        });
    }
    if keys.is_empty() {
        return Err(
            "the JWKS holds no signing key toolgate can use (RSA, EC P-256/P-384, Ed25519)".into(),
        );
    }
    Ok(keys)
}

/// The one algorithm a key verifies: its `alg`, or the usual one for its kind and curve.
fn algorithm_of(jwk: &Jwk) -> Option<Algorithm> {
    let algorithm = match (&jwk.common.key_algorithm, &jwk.algorithm) {
        (Some(named), _) => Algorithm::from_str(&named.to_string()).ok()?,
        (None, AlgorithmParameters::RSA(_)) => Algorithm::RS256,
        (None, AlgorithmParameters::EllipticCurve(params)) => match params.curve {
            EllipticCurve::P256 => Algorithm::ES256,
            EllipticCurve::P384 => Algorithm::ES384,
            _ => return None,
        },
        (None, AlgorithmParameters::OctetKeyPair(params)) => match params.curve {
            EllipticCurve::Ed25519 => Algorithm::EdDSA,
            _ => return None,
        },
        _ => return None,
    };
    // An HMAC `alg` on a public key would let its public half act as a shared secret.
    let compatible = matches!(
        (algorithm, &jwk.algorithm),
        (
            Algorithm::RS256
                | Algorithm::RS384
                | Algorithm::RS512
                | Algorithm::PS256
                | Algorithm::PS384
                | Algorithm::PS512,
            AlgorithmParameters::RSA(_)
        ) | (
            Algorithm::ES256 | Algorithm::ES384,
            AlgorithmParameters::EllipticCurve(_)
        ) | (Algorithm::EdDSA, AlgorithmParameters::OctetKeyPair(_))
    );
    compatible.then_some(algorithm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_keys_and_empty_sets_are_refused() {
        let oct = r#"{"keys":[{"kty":"oct","k":"c2VjcmV0","alg":"HS256"}]}"#;
        assert!(parse_jwks(oct).expect_err("oct").contains("symmetric"));
        assert!(parse_jwks(r#"{"keys":[]}"#).is_err());
        assert!(parse_jwks("[]").is_err());
    }

    #[test]
    fn an_hmac_alg_on_a_public_key_is_not_used() {
        let rsa_as_hs = r#"{"keys":[{"kty":"RSA","alg":"HS256","n":"sXch","e":"AQAB"}]}"#;
        assert!(parse_jwks(rsa_as_hs).is_err());
    }
}
