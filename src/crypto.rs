//! The process's one cryptography library: ring, for TLS (rustls: upstreams, JWKS URLs, MCP
//! backends, services, the judge, `rediss://`) and for tenant JWTs (jsonwebtoken).
//!
//! rustls and jsonwebtoken default to aws-lc-rs, whose C build (aws-lc-sys) was ~45 s of a
//! first `cargo build --release`'s 5 min on 2 cores; ring builds in a few seconds (README).
//! With no crate feature naming a provider, reqwest and jsonwebtoken use the process default,
//! which [`install`] sets before anything needs it: `Runtime::new` and the `toolgate` command
//! call it, and so does each place that verifies a token, so an embedding cannot miss it.

use std::sync::Once;

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{ErrorKind, Result};
use jsonwebtoken::signature::{self, Verifier};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::{hmac, signature as ring_signature};

/// Makes ring the process's rustls and jsonwebtoken provider, once; a provider an embedding
/// installed first stays.
pub fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let _ = JWT_PROVIDER.install_default();
    });
}

/// jsonwebtoken on ring, for verification only: toolgate never signs a token, and never asks
/// jsonwebtoken for a key's thumbprint or components (those panic, as jsonwebtoken's own
/// unimplemented utilities do).
static JWT_PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: no_signer,
    verifier_factory: verifier,
    key_utils: KeyUtils::new_unimplemented(),
};

fn no_signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
    Err(ErrorKind::InvalidAlgorithm.into())
}

fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    if key.family() != algorithm.family() {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    Ok(Box::new(RingVerifier {
        algorithm: *algorithm,
        key: key.clone(),
    }))
}

struct RingVerifier {
    algorithm: Algorithm,
    key: DecodingKey,
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(&self, message: &[u8], sig: &Vec<u8>) -> std::result::Result<(), signature::Error> {
        let verified = match (self.algorithm.family(), self.key.kind()) {
            (AlgorithmFamily::Rsa, DecodingKeyKind::RsaModulusExponent { n, e }) => {
                ring_signature::RsaPublicKeyComponents { n, e }.verify(
                    rsa_parameters(self.algorithm),
                    message,
                    sig,
                )
            }
            (AlgorithmFamily::Rsa, DecodingKeyKind::SecretOrDer(der)) => {
                let parameters = rsa_parameters(self.algorithm);
                ring_signature::UnparsedPublicKey::new(parameters, der).verify(message, sig)
            }
            (AlgorithmFamily::Ec, DecodingKeyKind::SecretOrDer(point)) => {
                let curve = match self.algorithm {
                    Algorithm::ES384 => &ring_signature::ECDSA_P384_SHA384_FIXED,
                    _ => &ring_signature::ECDSA_P256_SHA256_FIXED,
                };
                ring_signature::UnparsedPublicKey::new(curve, point).verify(message, sig)
            }
            (AlgorithmFamily::Ed, DecodingKeyKind::SecretOrDer(public)) => {
                ring_signature::UnparsedPublicKey::new(&ring_signature::ED25519, public)
                    .verify(message, sig)
            }
            (AlgorithmFamily::Hmac, DecodingKeyKind::SecretOrDer(secret)) => {
                let hash = match self.algorithm {
                    Algorithm::HS384 => hmac::HMAC_SHA384,
                    Algorithm::HS512 => hmac::HMAC_SHA512,
                    _ => hmac::HMAC_SHA256,
                };
                hmac::verify(&hmac::Key::new(hash, secret), message, sig)
            }
            _ => return Err(signature::Error::new()),
        };
        verified.map_err(|_| signature::Error::new())
    }
}

fn rsa_parameters(algorithm: Algorithm) -> &'static ring_signature::RsaParameters {
    match algorithm {
        Algorithm::RS384 => &ring_signature::RSA_PKCS1_2048_8192_SHA384,
        Algorithm::RS512 => &ring_signature::RSA_PKCS1_2048_8192_SHA512,
        Algorithm::PS256 => &ring_signature::RSA_PSS_2048_8192_SHA256,
        Algorithm::PS384 => &ring_signature::RSA_PSS_2048_8192_SHA384,
        Algorithm::PS512 => &ring_signature::RSA_PSS_2048_8192_SHA512,
        _ => &ring_signature::RSA_PKCS1_2048_8192_SHA256,
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair};
    use serde_json::{Map, Value};

    use super::*;

    fn b64(bytes: impl AsRef<[u8]>) -> String {
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// A token of `alg` whose signature `sign` makes over the signing input.
    fn token(alg: &str, sign: impl FnOnce(&[u8]) -> Vec<u8>) -> String {
        let input = format!(
            "{}.{}",
            b64(format!(r#"{{"alg":"{alg}","typ":"JWT"}}"#)),
            b64(r#"{"sub":"a"}"#)
        );
        let signature = sign(input.as_bytes());
        format!("{input}.{}", b64(signature))
    }

    fn decode(token: &str, key: &DecodingKey, algorithm: Algorithm) -> Result<()> {
        install();
        let mut validation = jsonwebtoken::Validation::new(algorithm);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        jsonwebtoken::decode::<Map<String, Value>>(token, key, &validation).map(|_| ())
    }

    fn ec_key(algorithm: &'static ring_signature::EcdsaSigningAlgorithm) -> EcdsaKeyPair {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(algorithm, &rng).expect("an EC key");
        EcdsaKeyPair::from_pkcs8(algorithm, pkcs8.as_ref(), &rng).expect("an EC key")
    }

    /// The public half of an EC key as a JWK gives it: x and y of an uncompressed point.
    fn ec_public(key: &EcdsaKeyPair) -> DecodingKey {
        let point = key.public_key().as_ref();
        let (x, y) = point[1..].split_at((point.len() - 1) / 2);
        DecodingKey::from_ec_components(&b64(x), &b64(y)).expect("EC components")
    }

    #[test]
    fn ecdsa_of_both_curves_verifies_and_an_edited_signature_does_not() {
        let rng = SystemRandom::new();
        for (name, algorithm, signing) in [
            (
                "ES256",
                Algorithm::ES256,
                &ring_signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            ),
            (
                "ES384",
                Algorithm::ES384,
                &ring_signature::ECDSA_P384_SHA384_FIXED_SIGNING,
            ),
        ] {
            let key = ec_key(signing);
            let signed = token(name, |input| {
                key.sign(&rng, input).expect("signs").as_ref().to_vec()
            });
            decode(&signed, &ec_public(&key), algorithm).expect(name);
            let stranger = ec_public(&ec_key(signing));
            let refused = decode(&signed, &stranger, algorithm).expect_err(name);
            assert_eq!(refused.kind(), &ErrorKind::InvalidSignature, "{name}");
        }
    }

    #[test]
    fn ed25519_and_hmac_verify_and_a_key_of_another_family_is_refused() {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("an Ed25519 key");
        let ed = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("an Ed25519 key");
        let signed = token("EdDSA", |input| ed.sign(input).as_ref().to_vec());
        let public = DecodingKey::from_ed_components(&b64(ed.public_key())).expect("Ed25519");
        decode(&signed, &public, Algorithm::EdDSA).expect("EdDSA");

        let secret = hmac::Key::new(hmac::HMAC_SHA384, b"secret");
        let signed = token("HS384", |input| {
            hmac::sign(&secret, input).as_ref().to_vec()
        });
        decode(
            &signed,
            &DecodingKey::from_secret(b"secret"),
            Algorithm::HS384,
        )
        .expect("HS384");
        let refused = decode(
            &signed,
            &DecodingKey::from_secret(b"other"),
            Algorithm::HS384,
        );
        assert_eq!(
            refused.expect_err("HS384").kind(),
            &ErrorKind::InvalidSignature
        );

        // An EdDSA token presented with an EC key: no verifier is made for the pair.
        let ec = ec_public(&ec_key(&ring_signature::ECDSA_P256_SHA256_FIXED_SIGNING));
        let signed = token("EdDSA", |input| ed.sign(input).as_ref().to_vec());
        assert!(decode(&signed, &ec, Algorithm::EdDSA).is_err());
    }

    #[test]
    fn toolgate_signs_nothing() {
        let key = EncodingKey::from_secret(b"secret");
        let header = jsonwebtoken::Header::new(Algorithm::HS256);
        install();
        assert!(jsonwebtoken::encode(&header, &Map::new(), &key).is_err());
    }
}
