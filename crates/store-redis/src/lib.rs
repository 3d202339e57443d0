//! toolgate-store-redis: the state store on Redis, so every replica of the gateway counts
//! against the same budgets.
//!
//! Design choices:
//! - Every operation is one Lua script, so reading the windows, checking the limits, adding and
//!   marking happen as one atomic step on the server: two replicas never both take the last unit.
//! - Windows follow the Redis server's clock (`TIME` inside the script), so replicas whose clocks
//!   drift still agree on when a window resets.
//! - The connection is made on first use (or by the gateway's start-up check) and remade by the
//!   connection manager after a failure. A call that meets a broken connection (Redis restarted
//!   since the last call) is sent once more on the new one, so a restart costs no request.
//!   Every attempt is bounded by the timeout. A Redis that stays down is a [`StoreError`], which
//!   the plugin answers per the gateway's `fail_mode`; when Redis comes back the next call
//!   succeeds, without a restart of the gateway.
//! - A Redis that refuses us — a wrong password or ACL user, a certificate we do not trust — is
//!   a *refused* [`StoreError`]: the gateway's start-up check fails on it rather than the first
//!   request.
//! - An error about the connection rather than the request (a password or ACL changed under us:
//!   WRONGPASS, NOAUTH; a node that is no longer the primary: READONLY, MASTERDOWN; one still
//!   loading its data: LOADING) drops the connection, and the next call makes a new one, no
//!   sooner than a backoff (100 ms, doubling to 5 s) after the last failure: the connection
//!   manager alone remakes a connection only after an I/O error, so such a store would answer
//!   its error for good.
//! - `rediss://` is TLS over rustls, trusting the system's roots or the one CA given.
//! - Keys: `<key>:<window ms>:<period>` per window (expiring when the period ends), the
//!   markers as given, and records (a conversation's workflow state) as given, replaced by a
//!   compare-and-set script. Single-instance Redis (or a primary); Redis Cluster is not supported,
//!   since a script's keys there must share one slot.
//!
//! # Layout
//! - [`RedisStore`]: the store (`src/lib.rs`); the script is `src/count.lua`.

use std::time::Duration;

use tokio::time::Instant;

use redis::aio::ConnectionManager;
use redis::{ErrorKind, RedisError, ServerErrorKind};
use tokio::sync::Mutex;
use toolgate_plugin::async_trait;
use toolgate_plugin::store::{
    CountOutcome, CountPolicy, StateStore, StoreError, Window, WindowUsage,
};

/// The counting script: markers in `KEYS`, the counter's key, amount, policy, marker TTL and
/// the windows in `ARGV`.
const COUNT_SCRIPT: &str = include_str!("count.lua");

/// The backoff before the first new connection after a failure, doubled after each further one.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const LONGEST_BACKOFF: Duration = Duration::from_secs(5);

/// The connection, or why there is none and when the next attempt may be made.
#[derive(Default)]
struct Connection {
    manager: Option<ConnectionManager>,
    /// The last failure to connect (or the error that dropped the connection), answered until
    /// the instant beside it.
    failure: Option<(StoreError, Instant)>,
    backoff: Duration,
}

impl Connection {
    /// Drops the manager after `error`; the next attempt waits out the backoff.
    fn drop_after(&mut self, error: StoreError) {
        self.manager = None;
        self.backoff = (self.backoff * 2).clamp(FIRST_BACKOFF, LONGEST_BACKOFF);
        self.failure = Some((error, Instant::now() + self.backoff));
    }
}

/// The state store on one Redis server.
pub struct RedisStore {
    client: redis::Client,
    /// `redis://host:port` or `rediss://host:port`, without credentials, for logs.
    display: String,
    tls: bool,
    timeout: Duration,
    connection: Mutex<Connection>,
    script: redis::Script,
    replace_script: redis::Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("RedisStore")
            .field("server", &self.display)
            .finish()
    }
}

impl RedisStore {
    /// A store for `url`: `redis://[[user]:password@]host:port[/db]`, or `rediss://…` for TLS,
    /// which trusts the system's roots, or only `root_certificate` (PEM) when given. Validates
    /// the URL; connects on first use or [`StateStore::check`].
    pub fn new(
        url: &str,
        timeout: Duration,
        root_certificate: Option<Vec<u8>>,
    ) -> Result<RedisStore, String> {
        let tls = url.starts_with("rediss://");
        let client = match root_certificate {
            None => redis::Client::open(url),
            Some(_) if !tls => {
                return Err("a CA certificate applies to TLS only: write rediss://".to_owned());
            }
            Some(pem) => redis::Client::build_with_tls(
                url,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem),
                },
            ),
        }
        .map_err(|error| format!("not a Redis URL: {}", without_credentials(&error, url)))?;
        let info = client.get_connection_info();
        let scheme = if tls { "rediss" } else { "redis" };
        let display = format!("{scheme}://{}", info.addr());
        Ok(RedisStore {
            client,
            display,
            tls,
            timeout,
            connection: Mutex::new(Connection::default()),
            script: redis::Script::new(COUNT_SCRIPT),
            replace_script: redis::Script::new(REPLACE_SCRIPT),
        })
    }

    /// The connection manager, made on first use, and again after a failure once its backoff
    /// is over (until then the failure is the answer, so a store that is down is not hammered).
    async fn connection(&self) -> Result<ConnectionManager, StoreError> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.manager.as_ref() {
            return Ok(connection.clone());
        }
        if let Some((error, retry_at)) = &slot.failure
            && Instant::now() < *retry_at
        {
            return Err(error.clone());
        }
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1);
        let made = tokio::time::timeout(
            self.timeout,
            ConnectionManager::new_with_config(self.client.clone(), config),
        )
        .await
        .map_err(|_| self.timed_out())
        .and_then(|made| made.map_err(|error| self.failure(&error)));
        match made {
            Ok(connection) => {
                slot.manager = Some(connection.clone());
                slot.failure = None;
                slot.backoff = Duration::ZERO;
                Ok(connection)
            }
            Err(error) => {
                slot.drop_after(error.clone());
                Err(error)
            }
        }
    }

    /// Drops the connection after an error about it rather than the request, so that the
    /// next call (after the backoff) connects afresh.
    async fn drop_connection(&self, error: &RedisError) {
        tracing::warn!(store = %self.display, %error, "the store's connection failed; connecting again");
        self.connection.lock().await.drop_after(self.failure(error));
    }

    fn timed_out(&self) -> StoreError {
        StoreError::new(format!("{} did not answer in time", self.display))
    }

    /// A Redis error as a store error: refused when retrying cannot help (credentials,
    /// permissions, TLS trust), unavailable otherwise.
    fn failure(&self, error: &RedisError) -> StoreError {
        let message = format!("{}: {error}", self.display);
        let refused = matches!(
            error.kind(),
            ErrorKind::AuthenticationFailed
                | ErrorKind::InvalidClientConfig
                | ErrorKind::Server(ServerErrorKind::NoPerm)
        ) || matches!(error.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
            // A TLS handshake refused over the server's certificate (rustls says "invalid peer
            // certificate: …"); redis does not expose the rustls error itself.
            || (self.tls && error.to_string().contains("certificate"));
        if refused {
            StoreError::refused(message)
        } else {
            StoreError::new(message)
        }
    }

    /// Sends `request`, once more if the connection it met was broken: after a Redis restart
    /// the old connection fails on its first use, and the manager has a new one by the second.
    /// A count sent again after the server ran it but before its answer came back would count
    /// twice; that needs the connection to die in that instant, and is the price of not
    /// answering 503 after every restart.
    async fn send(&self, request: Request<'_>) -> Result<redis::Value, StoreError> {
        let mut connection = self.connection().await?;
        let answer = match self.attempt(request, &mut connection).await? {
            Err(error) if is_broken_connection(&error) => {
                tracing::debug!(store = %self.display, %error, "broken connection; sending once more");
                self.attempt(request, &mut connection).await?
            }
            answer => answer,
        };
        match answer {
            Ok(reply) => Ok(reply),
            Err(error) => {
                if is_broken_connection(&error) || is_about_the_connection(&error) {
                    self.drop_connection(&error).await;
                }
                Err(self.failure(&error))
            }
        }
    }

    /// One attempt of `request`, bounded by the timeout (the outer error).
    async fn attempt(
        &self,
        request: Request<'_>,
        connection: &mut ConnectionManager,
    ) -> Result<Result<redis::Value, RedisError>, StoreError> {
        let sent = async {
            match request {
                Request::Script(invocation) => invocation.invoke_async(connection).await,
                Request::Get(key) => redis::cmd("GET").arg(key).query_async(connection).await,
                Request::Ping => redis::cmd("PING").query_async(connection).await,
            }
        };
        tokio::time::timeout(self.timeout, sent)
            .await
            .map_err(|_| self.timed_out())
    }

    async fn run(
        &self,
        key: &str,
        windows: &[Window],
        amount: u64,
        policy: CountPolicy,
        markers: &[String],
        marker_ttl: Duration,
    ) -> Result<CountOutcome, StoreError> {
        let mut invocation = self.script.prepare_invoke();
        for marker in markers {
            invocation.key(marker);
        }
        invocation
            .arg(key)
            .arg(amount)
            .arg(match policy {
                CountPolicy::WithinLimits => "within",
                CountPolicy::Always => "always",
            })
            .arg((marker_ttl.as_millis() as u64).max(1))
            .arg(windows.len());
        for window in windows {
            invocation
                .arg((window.length.as_millis() as u64).max(1))
                .arg(window.limit);
        }
        let reply = self.send(Request::Script(&invocation)).await?;
        redis::from_redis_value::<Vec<i64>>(reply)
            .ok()
            .and_then(|reply| parse_reply(&reply, windows))
            .ok_or_else(|| StoreError::new(format!("{} gave an unexpected answer", self.display)))
    }
}

/// What [`RedisStore::send`] sends: a script (counting, or a record's compare-and-set), a
/// record's read, or the check's PING.
#[derive(Clone, Copy)]
enum Request<'a> {
    Script(&'a redis::ScriptInvocation<'a>),
    Get(&'a str),
    Ping,
}

/// Whether `error` means the connection itself is gone (so the manager reconnects and a second
/// attempt may succeed), not that Redis answered with an error.
fn is_broken_connection(error: &RedisError) -> bool {
    // A timeout is not one: the server may be running the script, and a second one would
    // count twice.
    (error.is_connection_dropped() || error.is_io_error() || error.is_unrecoverable_error())
        && !error.is_timeout()
}

/// Whether Redis answered an error about this connection or its server's role rather than the
/// request: a new connection (after credentials are set back, or to the node now primary) is
/// the way out, and the connection manager would not make one.
fn is_about_the_connection(error: &RedisError) -> bool {
    matches!(
        error.kind(),
        ErrorKind::AuthenticationFailed | ErrorKind::Server(ServerErrorKind::NoPerm)
    ) || matches!(
        error.code(),
        Some("WRONGPASS" | "NOAUTH" | "NOPERM" | "READONLY" | "LOADING" | "MASTERDOWN")
    )
}

/// A URL error's text, with the URL's password (if the error quotes it) masked.
fn without_credentials(error: &RedisError, url: &str) -> String {
    let text = error.to_string();
    let password = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split_once('@'))
        .and_then(|(credentials, _)| credentials.split_once(':'))
        .map(|(_, password)| password)
        .filter(|password| !password.is_empty());
    match password {
        Some(password) => text.replace(password, "***"),
        None => text,
    }
}

/// `[added, used₁, resets_in_ms₁, used₂, …]` into an outcome.
fn parse_reply(reply: &[i64], windows: &[Window]) -> Option<CountOutcome> {
    let (&added, rest) = reply.split_first()?;
    if rest.len() != windows.len() * 2 {
        return None;
    }
    let windows = windows
        .iter()
        .zip(rest.chunks_exact(2))
        .map(|(window, pair)| WindowUsage {
            window: *window,
            used: pair[0].max(0) as u64,
            resets_in: Duration::from_millis(pair[1].max(0) as u64),
        })
        .collect();
    Some(CountOutcome {
        added: added.max(0) as u64,
        windows,
    })
}

#[async_trait]
impl StateStore for RedisStore {
    async fn count(
        &self,
        key: &str,
        windows: &[Window],
        amount: u64,
        policy: CountPolicy,
    ) -> Result<CountOutcome, StoreError> {
        self.run(key, windows, amount, policy, &[], Duration::from_millis(1))
            .await
    }

    async fn count_new(
        &self,
        key: &str,
        windows: &[Window],
        markers: &[String],
        marker_ttl: Duration,
    ) -> Result<CountOutcome, StoreError> {
        if markers.is_empty() {
            return self.count(key, windows, 0, CountPolicy::Always).await;
        }
        self.run(key, windows, 0, CountPolicy::Always, markers, marker_ttl)
            .await
    }

    fn describe(&self) -> String {
        self.display.clone()
    }

    async fn check(&self) -> Result<(), StoreError> {
        let pong = self.send(Request::Ping).await?;
        if redis::from_redis_value::<String>(pong).is_ok_and(|pong| pong == "PONG") {
            Ok(())
        } else {
            Err(StoreError::new(format!(
                "{} answered PING with something else",
                self.display
            )))
        }
    }

    async fn read_record(&self, key: &str) -> Result<Option<String>, StoreError> {
        let reply = self.send(Request::Get(key)).await?;
        redis::from_redis_value::<Option<String>>(reply)
            .map_err(|_| StoreError::new(format!("{} gave an unexpected answer", self.display)))
    }

    async fn replace_record(
        &self,
        key: &str,
        expected: Option<&str>,
        record: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let mut invocation = self.replace_script.prepare_invoke();
        invocation
            .key(key)
            .arg(if expected.is_some() { "1" } else { "0" })
            .arg(expected.unwrap_or_default())
            .arg(record)
            .arg((ttl.as_millis() as u64).max(1));
        // Sent once more after a broken connection, a replace that already ran answers 0: the
        // caller reads the record again and finds its own change there.
        let reply = self.send(Request::Script(&invocation)).await?;
        redis::from_redis_value::<i64>(reply)
            .map(|replaced| replaced == 1)
            .map_err(|_| StoreError::new(format!("{} gave an unexpected answer", self.display)))
    }
}

/// Compare-and-set of one record: `KEYS[1]`; `ARGV` = whether a record is expected, the
/// expected record, the new one, its TTL in ms. 1 when written, 0 when the record differed.
const REPLACE_SCRIPT: &str = r#"
local current = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if current ~= ARGV[2] then return 0 end
elseif current then
  return 0
end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[4])
return 1
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_shown_without_credentials() {
        let store = RedisStore::new(
            "redis://:hunter2@127.0.0.1:6390/2",
            Duration::from_secs(1),
            None,
        )
        .expect("a Redis URL");
        assert!(
            !store.describe().contains("hunter2"),
            "{}",
            store.describe()
        );
        assert!(store.describe().contains("127.0.0.1:6390"));
        assert!(RedisStore::new("http://example", Duration::from_secs(1), None).is_err());
        let tls = RedisStore::new(
            "rediss://user:pw@cache.example:6380",
            Duration::from_secs(1),
            None,
        )
        .expect("a TLS URL");
        assert_eq!(tls.describe(), "rediss://cache.example:6380");
        assert!(
            RedisStore::new(
                "redis://127.0.0.1:6379",
                Duration::from_secs(1),
                Some(b"pem".to_vec())
            )
            .is_err(),
            "a CA without TLS"
        );
    }

    #[test]
    fn replies_are_read_per_window() {
        let windows = [Window {
            length: Duration::from_secs(60),
            limit: 5,
        }];
        let outcome = parse_reply(&[1, 3, 1500], &windows).expect("well formed");
        assert_eq!(outcome.added, 1);
        assert_eq!(outcome.windows[0].used, 3);
        assert_eq!(outcome.windows[0].resets_in, Duration::from_millis(1500));
        assert!(parse_reply(&[1, 3], &windows).is_none());
    }
}
