//! Issue 22, points 3 and 4: Redis as a dependency the gateway survives and reports. A Redis
//! restarted under a running gateway costs no request; `/ready` is false while a `fail_mode =
//! "block"` store is down (and `/health` says why); a wrong password or ACL user, or a TLS
//! certificate the gateway does not trust, stops the start instead of failing the first
//! request; `rediss://` with a private CA and `user:password@` both count as plain Redis does.

use crate::common::answers::{assert_refusal, json_with_status};
use crate::common::redis::{RedisServer, TlsFiles};
use crate::common::{self, Reply, ScriptedUpstream, TestGateway};
use serde_json::{Value, json};
use toolgate::{Config, Gateway, Runtime};

/// A chat route whose proposed calls of `pay` are budgeted at `limit` per 30 days, counted in
/// the store `store` says (`[store]` lines).
fn budgeted(store: &str, limit: u32) -> String {
    format!(
        "[store]\n{store}\n\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_budget\"\n[routes.plugins.settings]\ncount = \"proposed\"\n\
         [[routes.plugins.settings.budgets]]\ntools = \"pay\"\nlimits = [\"{limit}/30d\"]\n"
    )
}

/// A store at `url`. The timeout is generous: a TLS handshake on a loaded test machine must not
/// pass for an outage (an outage here is a refused connection, which is immediate).
fn store_at(url: &str, fail_mode: &str) -> String {
    format!("url = \"{url}\"\nfail_mode = \"{fail_mode}\"\ntimeout_ms = 3000")
}

fn pay_request() -> Value {
    json!({
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "pay"}],
        "tools": [{"type": "function", "function": {"name": "pay", "parameters": {"type": "object"}}}],
    })
}

/// An upstream that proposes one call of `pay` to every request.
async fn proposing_upstream() -> ScriptedUpstream {
    let upstream = ScriptedUpstream::start().await;
    upstream.set_default(Reply::chat_calls(&[("call_1", "pay", "{}")]));
    upstream
}

/// What `Gateway::bind` says of a configuration (the start-up check included): `Ok` when the
/// gateway would serve, else the error `toolgate serve` prints before exiting.
async fn start_outcome(upstream: &ScriptedUpstream, body: &str) -> Result<(), String> {
    let runtime = Runtime::new();
    let text = common::config_text(&upstream.url(), std::path::Path::new("/dev/null"), body);
    let config = Config::from_toml(&text, "test.toml", &runtime.plugins)
        .unwrap_or_else(|errors| panic!("loads:\n{errors}"));
    Gateway::bind(config, runtime)
        .await
        .map(drop)
        .map_err(|error| error.to_string())
}

#[tokio::test]
async fn a_restarted_redis_costs_no_request() {
    let mut redis = RedisServer::start();
    let upstream = proposing_upstream().await;
    let gateway =
        TestGateway::start(&upstream, &budgeted(&store_at(&redis.url(), "block"), 100)).await;
    assert_eq!(
        gateway
            .post_status("/v1/chat/completions", &pay_request())
            .await,
        200
    );
    for restart in 0..3 {
        redis.restart();
        // The first request after each restart meets the connection Redis broke.
        let status = gateway
            .post_status("/v1/chat/completions", &pay_request())
            .await;
        assert_eq!(status, 200, "the first request after restart {restart}");
    }
}

#[tokio::test]
async fn ready_is_false_while_a_blocking_store_is_down_and_health_says_why() {
    let mut redis = RedisServer::start();
    let upstream = proposing_upstream().await;
    let blocking =
        TestGateway::start(&upstream, &budgeted(&store_at(&redis.url(), "block"), 100)).await;
    let allowing =
        TestGateway::start(&upstream, &budgeted(&store_at(&redis.url(), "allow"), 100)).await;
    let described = redis.url();
    for gateway in [&blocking, &allowing] {
        assert_eq!(gateway.admin_get("/ready").await.status(), 200);
        let health = gateway.admin_json("/health").await;
        assert_eq!(health["store"]["state"], "up", "{health}");
        assert_eq!(health["store"]["store"], described.as_str(), "{health}");
    }

    redis.stop();
    let ready = blocking.admin_get("/ready").await;
    assert_eq!(
        ready.status(),
        503,
        "a blocking store that is down is not ready"
    );
    let ready: Value = ready.json().await.expect("JSON");
    assert_eq!(ready["status"], "not ready");
    assert_eq!(ready["store"]["state"], "down", "{ready}");
    let health = blocking.admin_get("/health").await;
    assert_eq!(health.status(), 200, "up is up");
    let health: Value = health.json().await.expect("JSON");
    assert_eq!(health["store"]["state"], "down", "{health}");
    assert_eq!(health["store"]["fail_mode"], "block");
    assert!(
        health["store"]["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{health}"
    );
    let ready = allowing.admin_get("/ready").await;
    assert_eq!(
        ready.status(),
        200,
        "fail_mode = allow serves without the store"
    );
    let ready: Value = ready.json().await.expect("JSON");
    assert_eq!(ready["store"]["state"], "down", "{ready}");

    redis.restart();
    assert_eq!(
        blocking.admin_get("/ready").await.status(),
        200,
        "ready again"
    );
    assert_eq!(
        blocking
            .post_status("/v1/chat/completions", &pay_request())
            .await,
        200
    );
}

#[tokio::test]
async fn a_memory_store_is_always_up() {
    let upstream = proposing_upstream().await;
    let gateway = TestGateway::start(&upstream, &budgeted("timeout_ms = 400", 100)).await;
    let ready = gateway.admin_json("/ready").await;
    assert_eq!(ready["status"], "ready");
    assert_eq!(
        ready["store"],
        json!({"store": "memory", "state": "up", "fail_mode": "block"})
    );
}

#[tokio::test]
async fn a_wrong_password_or_user_stops_the_start_and_right_ones_count() {
    let redis = RedisServer::start_with_password("s3cret-default", "alice", "wonderland-pw");
    let upstream = proposing_upstream().await;
    for (user, password) in [
        ("", "hunter2-wrong"),
        ("alice", "hunter2-wrong"),
        ("mallory", "wonderland-pw"),
    ] {
        let url = redis.url_with(user, password);
        let error = start_outcome(&upstream, &budgeted(&store_at(&url, "allow"), 1))
            .await
            .expect_err("a refused credential stops the start, whatever the fail mode");
        assert!(error.contains("refused"), "{error}");
        assert!(
            !error.contains(password),
            "the password is never shown: {error}"
        );
    }
    let anonymous = start_outcome(&upstream, &budgeted(&store_at(&redis.url(), "block"), 1)).await;
    assert!(
        anonymous.is_err_and(|error| error.contains("refused")),
        "no password at all"
    );

    for (user, password) in [("", "s3cret-default"), ("alice", "wonderland-pw")] {
        let url = redis.url_with(user, password);
        let gateway = TestGateway::start(&upstream, &budgeted(&store_at(&url, "block"), 1)).await;
        assert_eq!(
            gateway
                .post_status("/v1/chat/completions", &pay_request())
                .await,
            200
        );
        let spent = gateway.post_chat(&pay_request()).await;
        let error = json_with_status(spent, 429).await;
        assert_refusal(&error, "tool_budget_exceeded", "budget");
        // The next user shares nothing of this count: flush it through a fresh budget name.
        drop(gateway);
        redis_flush(&redis, user, password);
    }
}

#[tokio::test]
async fn a_reload_to_a_wrong_password_is_refused_and_the_running_store_stays() {
    let redis = RedisServer::start_with_password("s3cret-default", "alice", "wonderland-pw");
    let upstream = proposing_upstream().await;
    let path = common::temp_audit_path().with_extension("toml");
    let write = |password: &str| {
        let body = budgeted(&store_at(&redis.url_with("", password), "block"), 100);
        let text = common::config_text(&upstream.url(), std::path::Path::new("/dev/null"), &body);
        std::fs::write(&path, text).expect("writes the config");
    };
    write("s3cret-default");
    let runtime = Runtime::new();
    let config = Config::from_file(&path, &runtime.plugins).expect("loads");
    let gateway = Gateway::bind(config, runtime).await.expect("starts");
    let state = gateway.state();

    write("hunter2-wrong");
    let refused = toolgate::reload(&state, &path)
        .await
        .expect_err("a refused credential is not applied")
        .to_string();
    assert!(
        refused.contains("refused") && !refused.contains("hunter2"),
        "{refused}"
    );
    let running = state.config.load();
    assert!(
        running.store.check().await.is_ok(),
        "the running store is kept"
    );
    let _ = std::fs::remove_file(&path);
}

/// Empties the server's keys, as `user` (the budgets above are one counter per server).
fn redis_flush(redis: &RedisServer, user: &str, password: &str) {
    let url = redis.url_with(user, password);
    let port = url.rsplit(':').next().unwrap_or_default().to_owned();
    let mut command = std::process::Command::new("redis-cli");
    command.args(["-p", &port, "--no-auth-warning", "-a", password]);
    if !user.is_empty() {
        command.args(["--user", user]);
    }
    let status = command
        .arg("FLUSHALL")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("redis-cli runs");
    assert!(status.success());
}

#[tokio::test]
async fn rediss_with_a_private_ca_counts_and_an_untrusted_certificate_stops_the_start() {
    let tls = TlsFiles::generate();
    let redis = RedisServer::start_tls(&tls);
    let upstream = proposing_upstream().await;
    assert!(redis.url().starts_with("rediss://"));

    let untrusted = start_outcome(&upstream, &budgeted(&store_at(&redis.url(), "block"), 1)).await;
    assert!(
        untrusted
            .as_ref()
            .is_err_and(|error| error.contains("refused") && error.contains("certificate")),
        "the system roots do not know a self-signed certificate: {untrusted:?}"
    );

    let store = format!(
        "{}\nca_file = \"{}\"",
        store_at(&redis.url(), "block"),
        tls.ca.display()
    );
    let gateway = TestGateway::start(&upstream, &budgeted(&store, 1)).await;
    assert_eq!(
        gateway
            .post_status("/v1/chat/completions", &pay_request())
            .await,
        200
    );
    let spent = gateway.post_chat(&pay_request()).await;
    let error = json_with_status(spent, 429).await;
    assert_refusal(&error, "tool_budget_exceeded", "budget");
    let health = gateway.admin_json("/health").await;
    assert_eq!(health["store"]["state"], "up", "{health}");
    assert!(
        health["store"]["store"]
            .as_str()
            .is_some_and(|store| store.starts_with("rediss://")),
        "{health}"
    );
}

#[test]
fn a_ca_file_that_cannot_be_read_or_without_tls_is_a_located_error() {
    let runtime = Runtime::new();
    for (store, expected) in [
        (
            "url = \"rediss://127.0.0.1:1\"\nca_file = \"/nonexistent/ca.pem\"",
            "store.ca_file: cannot read /nonexistent/ca.pem",
        ),
        (
            "url = \"redis://127.0.0.1:1\"\nca_file = \"/dev/null\"",
            "store.ca_file: a CA certificate applies to TLS only",
        ),
    ] {
        let text = common::config_text(
            "http://127.0.0.1:9",
            std::path::Path::new("/dev/null"),
            &budgeted(store, 1),
        );
        let errors = crate::common::answers::config_errors(&text, "test.toml", &runtime.plugins);
        let line = text
            .lines()
            .position(|line| line.contains("ca_file"))
            .unwrap_or(0)
            + 1;
        assert!(
            errors.contains(&format!("test.toml:{line}:")) && errors.contains(expected),
            "{errors}"
        );
    }
}

/// The statuses of `count` requests, one after another.
async fn statuses(gateway: &TestGateway, count: usize) -> Vec<u16> {
    let mut statuses = Vec::with_capacity(count);
    for _ in 0..count {
        statuses.push(
            gateway
                .post_status("/v1/chat/completions", &pay_request())
                .await,
        );
    }
    statuses
}

/// Requests until one passes (the store is back), within `patience`.
async fn until_served(gateway: &TestGateway, patience: std::time::Duration, what: &str) {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        if gateway
            .post_status("/v1/chat/completions", &pay_request())
            .await
            == 200
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the store did not recover after {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_store_recovers_from_a_password_flip_and_a_failover_it_reported() {
    let redis = RedisServer::start_with_password("admin-secret", "toolgate", "tg-secret");
    let upstream = proposing_upstream().await;
    let store = store_at(&redis.url_with("toolgate", "tg-secret"), "block");
    let gateway = TestGateway::start(&upstream, &budgeted(&store, 1_000_000)).await;
    assert_eq!(statuses(&gateway, 5).await, [200; 5]);

    // The password changes and the connection goes: every request meets WRONGPASS.
    let admin = Some("admin-secret");
    redis.cli(
        admin,
        &["ACL", "SETUSER", "toolgate", "resetpass", ">changed"],
    );
    redis.cli(admin, &["CLIENT", "KILL", "USER", "toolgate"]);
    let during = statuses(&gateway, 10).await;
    assert!(during.contains(&503), "{during:?}");
    assert!(
        during.iter().all(|status| matches!(status, 200 | 503)),
        "{during:?}"
    );
    // Set back, the store serves again without a restart of the gateway.
    redis.cli(
        admin,
        &["ACL", "SETUSER", "toolgate", "resetpass", ">tg-secret"],
    );
    until_served(
        &gateway,
        std::time::Duration::from_secs(15),
        "the password was set back",
    )
    .await;

    // A failover: the node toolgate writes to becomes a replica (READONLY), then is promoted.
    let other = RedisServer::start();
    let other_port = other.port().to_string();
    redis.cli(admin, &["CONFIG", "SET", "replica-read-only", "yes"]);
    redis.cli(admin, &["REPLICAOF", "127.0.0.1", &other_port]);
    let replica = statuses(&gateway, 10).await;
    assert!(
        replica.contains(&503),
        "writes to a replica fail: {replica:?}"
    );
    redis.cli(admin, &["REPLICAOF", "NO", "ONE"]);
    until_served(
        &gateway,
        std::time::Duration::from_secs(15),
        "the promotion",
    )
    .await;
}
