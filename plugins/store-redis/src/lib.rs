//! toolgate-store-redis: the state store on Redis, so every replica of the gateway counts
//! against the same budgets.
//!
//! Design choices:
//! - Every operation is one Lua script, so reading the windows, checking the limits, adding and
//!   marking happen as one atomic step on the server: two replicas never both take the last unit.
//! - Windows follow the Redis server's clock (`TIME` inside the script), so replicas whose clocks
//!   drift still agree on when a window resets.
//! - The connection is made on first use and remade by the connection manager after a failure;
//!   every call is bounded by a timeout. A Redis that is down is a [`StoreError`], which the
//!   plugin answers per the gateway's `fail_mode`; when Redis comes back the next call succeeds,
//!   without a restart.
//! - Keys: `<key>:<window ms>:<period>` per window (expiring when the period ends), the
//!   markers as given, and records (a conversation's workflow state) as given, replaced by a
//!   compare-and-set script. Single-instance Redis (or a primary); Redis Cluster is not supported,
//!   since a script's keys there must share one slot.
//!
//! # Layout
//! - [`RedisStore`]: the store (`src/lib.rs`); the script is `src/count.lua`.

use std::time::Duration;

use redis::aio::ConnectionManager;
use tokio::sync::Mutex;
use toolgate_plugin::async_trait;
use toolgate_plugin::store::{
    CountOutcome, CountPolicy, StateStore, StoreError, Window, WindowUsage,
};

/// The counting script: markers in `KEYS`, the counter's key, amount, policy, marker TTL and
/// the windows in `ARGV`.
const COUNT_SCRIPT: &str = include_str!("count.lua");

/// The state store on one Redis server.
pub struct RedisStore {
    client: redis::Client,
    /// `redis://host:port/db` without credentials, for logs.
    display: String,
    timeout: Duration,
    connection: Mutex<Option<ConnectionManager>>,
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
    /// A store for `url` (`redis://[:password@]host:port[/db]`, or `rediss://` for TLS when the
    /// crate is built with it). Validates the URL; connects on first use.
    pub fn new(url: &str, timeout: Duration) -> Result<RedisStore, String> {
        let client =
            redis::Client::open(url).map_err(|error| format!("not a Redis URL: {error}"))?;
        let info = client.get_connection_info();
        let display = format!("redis://{}", info.addr());
        Ok(RedisStore {
            client,
            display,
            timeout,
            connection: Mutex::new(None),
            script: redis::Script::new(COUNT_SCRIPT),
            replace_script: redis::Script::new(REPLACE_SCRIPT),
        })
    }

    /// The connection manager, made on first use (and again after a failed first attempt).
    async fn connection(&self) -> Result<ConnectionManager, StoreError> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref() {
            return Ok(connection.clone());
        }
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1);
        let connection = tokio::time::timeout(
            self.timeout,
            ConnectionManager::new_with_config(self.client.clone(), config),
        )
        .await
        .map_err(|_| StoreError::new(format!("{} did not answer in time", self.display)))?
        .map_err(|error| StoreError::new(format!("{}: {error}", self.display)))?;
        *slot = Some(connection.clone());
        Ok(connection)
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
        let mut connection = self.connection().await?;
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
        let reply: Vec<i64> =
            tokio::time::timeout(self.timeout, invocation.invoke_async(&mut connection))
                .await
                .map_err(|_| StoreError::new(format!("{} did not answer in time", self.display)))?
                .map_err(|error| StoreError::new(format!("{}: {error}", self.display)))?;
        parse_reply(&reply, windows)
            .ok_or_else(|| StoreError::new(format!("{} gave an unexpected answer", self.display)))
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

    async fn read_record(&self, key: &str) -> Result<Option<String>, StoreError> {
        let mut connection = self.connection().await?;
        let mut command = redis::cmd("GET");
        command.arg(key);
        tokio::time::timeout(self.timeout, command.query_async(&mut connection))
            .await
            .map_err(|_| StoreError::new(format!("{} did not answer in time", self.display)))?
            .map_err(|error| StoreError::new(format!("{}: {error}", self.display)))
    }

    async fn replace_record(
        &self,
        key: &str,
        expected: Option<&str>,
        record: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let mut connection = self.connection().await?;
        let mut invocation = self.replace_script.prepare_invoke();
        invocation
            .key(key)
            .arg(if expected.is_some() { "1" } else { "0" })
            .arg(expected.unwrap_or_default())
            .arg(record)
            .arg((ttl.as_millis() as u64).max(1));
        let replaced: i64 =
            tokio::time::timeout(self.timeout, invocation.invoke_async(&mut connection))
                .await
                .map_err(|_| StoreError::new(format!("{} did not answer in time", self.display)))?
                .map_err(|error| StoreError::new(format!("{}: {error}", self.display)))?;
        Ok(replaced == 1)
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
        let store = RedisStore::new("redis://:hunter2@127.0.0.1:6390/2", Duration::from_secs(1))
            .expect("a Redis URL");
        assert!(
            !store.describe().contains("hunter2"),
            "{}",
            store.describe()
        );
        assert!(store.describe().contains("127.0.0.1:6390"));
        assert!(RedisStore::new("http://example", Duration::from_secs(1)).is_err());
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
