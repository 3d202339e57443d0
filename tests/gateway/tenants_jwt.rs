//! Tenants identified by JWTs (`[auth.jwt]`) end to end: tokens signed in the test with freshly
//! generated RS256 (by `openssl`: ring does not generate RSA keys), ES256 and EdDSA keys whose
//! public halves are in a JWKS file. A valid token applies its tenant's policy (narrowed by its
//! claims, never widened); expired, wrongly signed, wrong-audience and unknown-tenant tokens get
//! 401 with the reason; a rotated JWKS file takes effect on a configuration reload.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::rsa::PublicKeyComponents;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair};
use serde_json::{Value, json};
use toolgate::{Config, Gateway, GatewayState, Runtime};

use crate::common::answers::{assert_sdk_error, config_errors, function_names, sdk_chat_request};
use crate::common::{Reply, ScriptedUpstream, TestGateway, config_text, temp_audit_path};

pub(crate) const AUDIENCE: &str = "toolgate-test";
pub(crate) const ISSUER: &str = "https://idp.test";

/// A test signing key of one algorithm, with the `kid` the JWKS names it by.
pub(crate) enum TestKey {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

impl TestKey {
    pub(crate) fn rsa() -> TestKey {
        let generated = Command::new("openssl")
            .args(["genpkey", "-algorithm", "RSA", "-outform", "DER"])
            .args(["-pkeyopt", "rsa_keygen_bits:2048"])
            .output()
            .expect("openssl runs");
        assert!(generated.status.success(), "openssl genpkey: {generated:?}");
        // OpenSSL 3.0 writes a PKCS#1 RSAPrivateKey; read PKCS#8 too, as other versions may.
        let der = &generated.stdout;
        let key = RsaKeyPair::from_der(der).or_else(|_| RsaKeyPair::from_pkcs8(der));
        TestKey::Rsa(key.expect("an RSA key"))
    }

    pub(crate) fn ec() -> TestKey {
        let algorithm = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(algorithm, &rng).expect("a P-256 key");
        TestKey::Ec(EcdsaKeyPair::from_pkcs8(algorithm, pkcs8.as_ref(), &rng).expect("a P-256 key"))
    }

    pub(crate) fn ed() -> TestKey {
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).expect("an Ed25519 key");
        TestKey::Ed(Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("an Ed25519 key"))
    }

    fn alg(&self) -> &'static str {
        match self {
            TestKey::Rsa(_) => "RS256",
            TestKey::Ec(_) => "ES256",
            TestKey::Ed(_) => "EdDSA",
        }
    }

    /// The public half, as a JWKS lists it.
    pub(crate) fn jwk(&self, kid: &str) -> Value {
        match self {
            TestKey::Rsa(key) => {
                let public = PublicKeyComponents::<Vec<u8>>::from(key.public());
                json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                       "n": b64(public.n), "e": b64(public.e)})
            }
            TestKey::Ec(key) => {
                // An uncompressed point: 0x04, then x and y of 32 bytes each.
                let point = key.public_key().as_ref();
                json!({"kty": "EC", "kid": kid, "crv": "P-256",
                       "x": b64(&point[1..33]), "y": b64(&point[33..65])})
            }
            TestKey::Ed(key) => {
                json!({"kty": "OKP", "kid": kid, "crv": "Ed25519", "x": b64(key.public_key().as_ref())})
            }
        }
    }

    /// A compact JWS of `claims`, its header naming `kid`.
    pub(crate) fn sign(&self, kid: &str, claims: &Value) -> String {
        let header = json!({"alg": self.alg(), "typ": "JWT", "kid": kid});
        let signing_input = format!("{}.{}", b64(header.to_string()), b64(claims.to_string()));
        let signature = match self {
            TestKey::Rsa(key) => {
                let mut signature = vec![0; key.public().modulus_len()];
                key.sign(
                    &signature::RSA_PKCS1_SHA256,
                    &SystemRandom::new(),
                    signing_input.as_bytes(),
                    &mut signature,
                )
                .expect("signs");
                signature
            }
            TestKey::Ec(key) => key
                .sign(&SystemRandom::new(), signing_input.as_bytes())
                .expect("signs")
                .as_ref()
                .to_vec(),
            TestKey::Ed(key) => key.sign(signing_input.as_bytes()).as_ref().to_vec(),
        };
        format!("{signing_input}.{}", b64(signature))
    }
}

fn b64(bytes: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default()
}

/// Claims for `tenant` valid for the next ten minutes, with `extra` merged in.
pub(crate) fn claims(tenant: &str, extra: Value) -> Value {
    let mut claims = json!({"tenant": tenant, "aud": AUDIENCE, "iss": ISSUER,
                            "sub": "user-1", "exp": now() + 600, "iat": now()});
    if let (Some(claims), Some(extra)) = (claims.as_object_mut(), extra.as_object()) {
        claims.extend(extra.clone());
    }
    claims
}

/// A JWKS file holding the public halves of `keys`.
fn write_jwks(path: &Path, keys: &[(&TestKey, &str)]) {
    let jwks = json!({"keys": keys.iter().map(|(key, kid)| key.jwk(kid)).collect::<Vec<_>>()});
    std::fs::write(path, jwks.to_string()).expect("writes the JWKS");
}

fn jwks_path() -> PathBuf {
    temp_audit_path().with_extension("jwks.json")
}

/// Two tools in two groups; `reader` holds `read`, `operator` both and an access level.
fn tenants_config(jwks: &Path) -> String {
    tenants_config_with(&format!("jwks_file = \"{}\"", jwks.display()))
}

/// [`tenants_config`] with the keys' source given as its `[auth.jwt]` line(s).
pub(crate) fn tenants_config_with(keys: &str) -> String {
    format!(
        "[tools.lookup]\ngroups = [\"read\"]\ncategory = \"database\"\n\n\
         [tools.drop_table]\ngroups = [\"admin\"]\ncategory = \"deployment\"\n\n\
         [auth.jwt]\n{keys}\naudience = \"{AUDIENCE}\"\nissuer = \"{ISSUER}\"\n\
         groups_claim = \"groups\"\naccess_level_claim = \"access_level\"\n\n\
         [tenants.reader]\ngroups = [\"read\"]\n\n\
         [tenants.operator]\napi_keys = [\"sk-operator\"]\ngroups = [\"read\", \"admin\"]\naccess_level = \"elevated\"\n\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_groups\"\n\n\
         [[routes]]\npath = \"/v1/messages\"\nupstream = \"llm\"\n"
    )
}

pub(crate) fn both_tools() -> Value {
    let tools = ["lookup", "drop_table"];
    json!({
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hello"}],
        "tools": tools.iter().map(|name| json!({"type": "function", "function": {
            "name": name, "parameters": {"type": "object", "properties": {}}}})).collect::<Vec<_>>(),
    })
}

/// The tools the upstream was offered for a request sent with `token` through the SDK.
pub(crate) async fn offered_with(
    gateway: &TestGateway,
    upstream: &ScriptedUpstream,
    token: &str,
) -> Vec<String> {
    upstream.push(Reply::chat_text("ok"));
    gateway
        .openai_with_key(token)
        .chat()
        .create(sdk_chat_request(both_tools()))
        .await
        .expect("a valid token is let through");
    let forwarded = upstream.last_request().expect("forwarded");
    assert_eq!(
        forwarded.header("authorization"),
        None,
        "the token stays here"
    );
    function_names(&forwarded.json()["tools"])
}

pub(crate) async fn refused_with(gateway: &TestGateway, token: &str, code: &str) {
    let error = gateway
        .openai_with_key(token)
        .chat()
        .create(sdk_chat_request(both_tools()))
        .await
        .expect_err("refused");
    assert_sdk_error(error, 401, code);
}

#[tokio::test]
async fn a_valid_token_of_each_algorithm_applies_its_tenants_groups() {
    let (rsa, ec, ed) = (TestKey::rsa(), TestKey::ec(), TestKey::ed());
    let jwks = jwks_path();
    write_jwks(&jwks, &[(&rsa, "rsa-1"), (&ec, "ec-1"), (&ed, "ed-1")]);
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &tenants_config(&jwks)).await;

    for (key, kid) in [(&rsa, "rsa-1"), (&ec, "ec-1"), (&ed, "ed-1")] {
        let reader = key.sign(kid, &claims("reader", json!({})));
        assert_eq!(
            offered_with(&gateway, &upstream, &reader).await,
            ["lookup"],
            "{kid}: the reader holds only `read`"
        );
        let operator = key.sign(kid, &claims("operator", json!({})));
        assert_eq!(
            offered_with(&gateway, &upstream, &operator).await,
            ["lookup", "drop_table"],
            "{kid}: the operator holds both groups"
        );
    }
    // API keys still identify tenants next to tokens.
    assert_eq!(
        offered_with(&gateway, &upstream, "sk-operator").await,
        ["lookup", "drop_table"]
    );
    let audit = gateway
        .audit_lines_until(|lines| lines.iter().any(|line| line.to_string().contains("reader")))
        .await;
    assert!(
        audit.iter().any(|line| line.to_string().contains("reader")),
        "the audit names the token's tenant"
    );
    // Every JWT starts with the base64url of `{"`.
    assert!(
        audit.iter().all(|line| !line.to_string().contains("eyJ")),
        "no token reaches the audit"
    );
}

#[tokio::test]
async fn claims_narrow_a_tenant_and_never_widen_it() {
    let key = TestKey::ec();
    let jwks = jwks_path();
    write_jwks(&jwks, &[(&key, "k")]);
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &tenants_config(&jwks)).await;

    let narrowed = key.sign("k", &claims("operator", json!({"groups": ["read"]})));
    assert_eq!(
        offered_with(&gateway, &upstream, &narrowed).await,
        ["lookup"]
    );
    // Asking for `admin` as the reader gets only what the reader holds.
    let widening = key.sign("k", &claims("reader", json!({"groups": "read admin"})));
    assert_eq!(
        offered_with(&gateway, &upstream, &widening).await,
        ["lookup"]
    );
    let nothing_held = key.sign("k", &claims("reader", json!({"groups": ["admin"]})));
    refused_with(&gateway, &nothing_held, "groups_not_held").await;

    // A narrower level than the tenant's is the one tool_permission applies: the operator is
    // `elevated` (both tools); as `standard` it loses `drop_table` (category deployment).
    let permissions = tenants_config(&jwks).replace(
        "name = \"tool_groups\"\n",
        "name = \"tool_groups\"\n\n[[routes.plugins]]\nname = \"tool_permission\"\n",
    );
    let guarded = TestGateway::start(&upstream, &permissions).await;
    let own_level = key.sign("k", &claims("operator", json!({})));
    assert_eq!(
        offered_with(&guarded, &upstream, &own_level).await,
        ["lookup", "drop_table"]
    );
    let lower_level = key.sign(
        "k",
        &claims("operator", json!({"access_level": "standard"})),
    );
    assert_eq!(
        offered_with(&guarded, &upstream, &lower_level).await,
        ["lookup"]
    );
    // The reader has no level of its own: no claimed level can be shown to be narrower.
    let claimed_level = key.sign("k", &claims("reader", json!({"access_level": "sandboxed"})));
    refused_with(&gateway, &claimed_level, "access_level_not_held").await;
    let unknown_level = key.sign("k", &claims("operator", json!({"access_level": "root"})));
    refused_with(&gateway, &unknown_level, "access_level_not_held").await;
}

#[tokio::test]
async fn expired_wrongly_signed_and_misaddressed_tokens_get_401_with_the_reason() {
    let (trusted, stranger) = (TestKey::rsa(), TestKey::rsa());
    let jwks = jwks_path();
    write_jwks(&jwks, &[(&trusted, "rsa-1")]);
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &tenants_config(&jwks)).await;

    let expired = trusted.sign(
        "rsa-1",
        &claims("reader", json!({"exp": now() - 3600, "iat": now() - 7200})),
    );
    refused_with(&gateway, &expired, "token_expired").await;
    let forged = stranger.sign("rsa-1", &claims("reader", json!({})));
    refused_with(&gateway, &forged, "bad_signature").await;
    let elsewhere = trusted.sign(
        "rsa-1",
        &claims("reader", json!({"aud": "another-service"})),
    );
    refused_with(&gateway, &elsewhere, "wrong_audience").await;
    let unaddressed = trusted.sign(
        "rsa-1",
        &json!({"tenant": "reader", "iss": ISSUER, "exp": now() + 600}),
    );
    refused_with(&gateway, &unaddressed, "wrong_audience").await;
    let foreign_issuer = trusted.sign(
        "rsa-1",
        &claims("reader", json!({"iss": "https://evil.test"})),
    );
    refused_with(&gateway, &foreign_issuer, "wrong_issuer").await;
    let nobody = trusted.sign("rsa-1", &claims("nobody", json!({})));
    refused_with(&gateway, &nobody, "unknown_tenant").await;
    let no_tenant = trusted.sign(
        "rsa-1",
        &json!({"aud": AUDIENCE, "iss": ISSUER, "exp": now() + 600}),
    );
    refused_with(&gateway, &no_tenant, "missing_claim").await;
    let unknown_kid = trusted.sign("rsa-2", &claims("reader", json!({})));
    refused_with(&gateway, &unknown_kid, "unknown_signing_key").await;
    // A token whose payload was edited after signing.
    let valid = trusted.sign("rsa-1", &claims("reader", json!({})));
    let mut parts: Vec<&str> = valid.split('.').collect();
    let edited = b64(claims("operator", json!({})).to_string());
    parts[1] = &edited;
    refused_with(&gateway, &parts.join("."), "bad_signature").await;
    assert_eq!(upstream.request_count(), 0, "nothing reached the upstream");

    // On an Anthropic route the refusal is in Anthropic's shape.
    let response = gateway
        .post_json_with(
            "/v1/messages",
            &[("x-api-key", expired.as_str()), ("anthropic-version", "2023-06-01")],
            &json!({"model": "claude", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], "authentication_error", "{body}");
    assert_eq!(body["error"]["code"], "token_expired", "{body}");
}

/// A gateway started from a config file, so a test can reload it.
struct FileGateway {
    addr: std::net::SocketAddr,
    path: PathBuf,
    state: Arc<GatewayState>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl FileGateway {
    async fn start(text: &str) -> FileGateway {
        let path = temp_audit_path().with_extension("toml");
        std::fs::write(&path, text).expect("writes the config");
        let runtime = Runtime::new();
        let config = Config::from_file(&path, &runtime.plugins).expect("loads");
        let gateway = Gateway::bind(config, runtime).await.expect("binds");
        let addr = gateway.local_addr().expect("bound");
        let state = gateway.state();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(gateway.run(async {
            let _ = stopped.await;
        }));
        FileGateway {
            addr,
            path,
            state,
            _stop: stop,
        }
    }

    async fn status_with(&self, token: &str) -> u16 {
        crate::common::http()
            .post(format!("http://{}/v1/chat/completions", self.addr))
            .bearer_auth(token)
            .json(&both_tools())
            .send()
            .await
            .map(|response| response.status().as_u16())
            .unwrap_or(0)
    }
}

#[tokio::test]
async fn a_rotated_jwks_file_and_a_new_api_key_take_effect_on_reload_without_restart() {
    let (old, new) = (TestKey::ed(), TestKey::ec());
    let jwks = jwks_path();
    write_jwks(&jwks, &[(&old, "2024")]);
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::chat_text("ok"));
    let text = config_text(&upstream.url(), &temp_audit_path(), &tenants_config(&jwks));
    let gateway = FileGateway::start(&text).await;
    let old_token = old.sign("2024", &claims("reader", json!({})));
    let new_token = new.sign("2025", &claims("reader", json!({})));
    assert_eq!(gateway.status_with(&old_token).await, 200);
    assert_eq!(gateway.status_with(&new_token).await, 401);

    assert_eq!(gateway.status_with("sk-operator").await, 200);
    assert_eq!(gateway.status_with("sk-operator-2025").await, 401);

    // The operator's key rotated in the configuration, the signing key in the JWKS file.
    write_jwks(&jwks, &[(&new, "2025")]);
    std::fs::write(
        &gateway.path,
        text.replace("\"sk-operator\"", "\"sk-operator-2025\""),
    )
    .expect("writes the config");
    toolgate::reload(&gateway.state, &gateway.path)
        .await
        .expect("the rotated JWKS loads");
    assert_eq!(gateway.status_with(&new_token).await, 200);
    assert_eq!(
        gateway.status_with(&old_token).await,
        401,
        "the retired key no longer verifies"
    );
    assert_eq!(gateway.status_with("sk-operator-2025").await, 200);
    assert_eq!(
        gateway.status_with("sk-operator").await,
        401,
        "the retired API key no longer authenticates"
    );

    // A JWKS that cannot be read is refused, and the running keys stay.
    std::fs::write(&jwks, "not json").expect("writes");
    assert!(
        toolgate::reload(&gateway.state, &gateway.path)
            .await
            .is_err()
    );
    assert_eq!(gateway.status_with(&new_token).await, 200);
}

#[tokio::test]
async fn a_rotated_jwks_file_alone_is_picked_up_by_the_file_watch() {
    let (old, new) = (TestKey::ed(), TestKey::ec());
    let jwks = jwks_path();
    write_jwks(&jwks, &[(&old, "2024")]);
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::chat_text("ok"));
    let text = config_text(&upstream.url(), &temp_audit_path(), &tenants_config(&jwks));
    let gateway = FileGateway::start(&text).await;
    let watcher = toolgate::watch(
        gateway.state.clone(),
        gateway.path.clone(),
        Duration::from_millis(50),
    );
    let new_token = new.sign("2025", &claims("reader", json!({})));
    assert_eq!(gateway.status_with(&new_token).await, 401);

    // The configuration file is untouched: only the keys it points at change.
    write_jwks(&jwks, &[(&new, "2025")]);
    let mut status = 0;
    for _ in 0..600 {
        status = gateway.status_with(&new_token).await;
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200, "the watch reloaded the rotated JWKS");
    let old_token = old.sign("2024", &claims("reader", json!({})));
    assert_eq!(gateway.status_with(&old_token).await, 401);
    watcher.abort();
}

#[test]
fn an_unusable_jwt_section_is_refused_at_its_key() {
    let plugins = Runtime::new().plugins;
    let missing = "[auth.jwt]\njwks_file = \"/nonexistent/jwks.json\"\naudience = \"a\"\n\
                   [tenants.reader]\ngroups = [\"default\"]\n";
    let errors = config_errors(missing, "gw.toml", &plugins);
    assert!(errors.contains("auth.jwt.jwks_file"), "{errors}");
    assert!(errors.contains("cannot read"), "{errors}");

    let jwks = jwks_path();
    std::fs::write(&jwks, r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#).expect("writes");
    let symmetric = format!(
        "[auth.jwt]\njwks_file = \"{}\"\naudience = \"a\"\n[tenants.reader]\ngroups = [\"default\"]\n",
        jwks.display()
    );
    let errors = config_errors(&symmetric, "gw.toml", &plugins);
    assert!(errors.contains("symmetric"), "{errors}");

    let no_audience = "[auth.jwt]\njwks_file = \"x.json\"\n";
    let errors = config_errors(no_audience, "gw.toml", &plugins);
    assert!(errors.contains("audience"), "{errors}");

    // Without [auth.jwt] a tenant still needs a key.
    let keyless = "[tenants.reader]\ngroups = [\"default\"]\n";
    let errors = config_errors(keyless, "gw.toml", &plugins);
    assert!(errors.contains("a tenant needs a key"), "{errors}");
}

#[tokio::test]
async fn a_relative_jwks_file_is_read_next_to_the_config() {
    let key = TestKey::ed();
    let folder = temp_audit_path().with_extension("d");
    std::fs::create_dir_all(&folder).expect("creates");
    write_jwks(&folder.join("keys.json"), &[(&key, "k")]);
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::chat_text("ok"));
    let text = config_text(
        &upstream.url(),
        &temp_audit_path(),
        &tenants_config(Path::new("keys.json")),
    );
    let path = folder.join("gateway.toml");
    std::fs::write(&path, text).expect("writes");
    let runtime = Runtime::new();
    let config = Config::from_file(&path, &runtime.plugins).expect("keys.json is found next to it");
    let gateway = Gateway::bind(config, runtime).await.expect("binds");
    let addr = gateway.local_addr().expect("bound");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(gateway.run(async {
        let _ = stopped.await;
    }));
    let status = crate::common::http()
        .post(format!("http://{addr}/v1/chat/completions"))
        .bearer_auth(key.sign("k", &claims("reader", json!({}))))
        .json(&both_tools())
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map(|response| response.status().as_u16())
        .unwrap_or(0);
    assert_eq!(status, 200);
    let _ = stop.send(());
}
