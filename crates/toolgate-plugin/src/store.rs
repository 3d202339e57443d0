//! The state store: counters over fixed windows and once-only markers that plugins share —
//! within one process ([`MemoryStore`], the default) or across replicas (the Redis store, in its
//! own crate so this one stays light). Every operation is one atomic step on the store's side,
//! so two gateways counting against one store never both take the last unit of a budget.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

/// One fixed window of a counter: at most `limit` units per `length`, periods aligned to the
/// Unix epoch (a one-minute window resets at every whole minute of the store's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    /// How long one period of the window lasts.
    pub length: Duration,
    /// The most units counted in one period.
    pub limit: u64,
}

/// A window's state after a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowUsage {
    /// The window this is the state of.
    pub window: Window,
    /// Units counted in the current period (after this count, if it was added).
    pub used: u64,
    /// Time until the current period ends and the counter starts again from zero.
    pub resets_in: Duration,
}

impl WindowUsage {
    /// Units left in the current period (0 when exhausted).
    pub fn remaining(&self) -> u64 {
        self.window.limit.saturating_sub(self.used)
    }

    /// Whether the current period has no unit left.
    pub fn is_exhausted(&self) -> bool {
        self.used >= self.window.limit
    }
}

/// Whether a count may take a window past its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountPolicy {
    /// Add only if every window stays within its limit; otherwise add nothing (all or nothing).
    WithinLimits,
    /// Add whatever the limits say: the units already happened (executed calls).
    Always,
}

/// What a count did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountOutcome {
    /// Units added to every window (0 when refused, or when every marker was already known).
    pub added: u64,
    /// Each window's state, in the order they were given.
    pub windows: Vec<WindowUsage>,
}

impl CountOutcome {
    /// The exhausted window that frees up last (what a client must wait for), if any.
    pub fn binding_window(&self) -> Option<&WindowUsage> {
        self.windows
            .iter()
            .filter(|usage| usage.is_exhausted())
            .max_by_key(|usage| usage.resets_in)
    }
}

/// The store could not answer (unreachable, timed out, or answered nonsense), or refused us
/// (a wrong password, a certificate it does not trust): see [`StoreError::is_refused`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the state store is unavailable: {message}")]
pub struct StoreError {
    message: String,
    kind: StoreErrorKind,
}

/// Why a store did not answer: it may answer later, or it will not until the configuration
/// changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StoreErrorKind {
    Unavailable,
    Refused,
}

impl StoreError {
    /// An error whose `message` says what went wrong; the store may answer later.
    pub fn new(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            kind: StoreErrorKind::Unavailable,
        }
    }

    /// The store answered but refused us (authentication, permissions, TLS trust): retrying
    /// will not help until the configuration changes, so start-up fails on it.
    pub fn refused(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            kind: StoreErrorKind::Refused,
        }
    }

    /// Whether the store refused us rather than being unreachable.
    pub fn is_refused(&self) -> bool {
        self.kind == StoreErrorKind::Refused
    }

    /// What went wrong, without the "unavailable" preamble of `Display`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// What a plugin does when the store cannot answer (`[store] fail_mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StoreFailMode {
    /// Refuse the exchange with [`Unavailable::Store`](crate::Unavailable::Store)'s answer
    /// (503 `state_store_unavailable`): a limit that cannot be checked is not vouched for.
    #[default]
    Block,
    /// Let the exchange through unchecked (and log it).
    Allow,
}

/// Shared counters. Keys are namespaced by the caller (`toolgate:budget:…`).
#[async_trait]
pub trait StateStore: Send + Sync + Debug + 'static {
    /// Adds `amount` to `key`'s counter in each window's current period, as one atomic step,
    /// and returns every window's state. With [`CountPolicy::WithinLimits`] nothing is added
    /// unless all windows stay within their limits. An `amount` of 0 reads without changing.
    async fn count(
        &self,
        key: &str,
        windows: &[Window],
        amount: u64,
        policy: CountPolicy,
    ) -> Result<CountOutcome, StoreError>;

    /// Marks each of `markers` as seen for `marker_ttl` and adds one unit (always) to `key`'s
    /// windows for each marker that was not already marked, as one atomic step. A history that
    /// is sent again therefore never counts twice.
    async fn count_new(
        &self,
        key: &str,
        windows: &[Window],
        markers: &[String],
        marker_ttl: Duration,
    ) -> Result<CountOutcome, StoreError>;

    /// What the store is, for logs (`memory`, `redis://host:port`), never with a password.
    fn describe(&self) -> String;

    /// The record kept at `key` (a conversation's workflow state), if there is a live one.
    async fn read_record(&self, key: &str) -> Result<Option<String>, StoreError>;

    /// Writes `record` at `key` for `ttl`, as one atomic step, only if the key still holds
    /// `expected` (`None`: no record). `false` when another writer changed it first: read it
    /// again and decide anew, so two replicas never both apply one change.
    async fn replace_record(
        &self,
        key: &str,
        expected: Option<&str>,
        record: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError>;

    /// Whether the store answers now: connects (and authenticates) if it must, then asks it
    /// something trivial. Run at start-up and by the admin `/ready` and `/health`, so it is
    /// bounded by the store's own timeout. Default: a store in this process always answers.
    async fn check(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// Milliseconds since the Unix epoch on this machine's clock.
fn epoch_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}

/// The period a window is in at `now_ms`, and the milliseconds until it ends.
pub fn period_at(window: &Window, now_ms: u64) -> (u64, u64) {
    let length = (window.length.as_millis() as u64).max(1);
    let period = now_ms / length;
    (period, (period + 1) * length - now_ms)
}

/// The default store: counters in this process only. Replicas do not share it, and a restart
/// forgets it; configuration reloads keep it.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<MemoryState>,
}

#[derive(Debug, Default)]
struct MemoryState {
    /// Records by key, with when they expire.
    records: HashMap<String, (String, Instant)>,
    /// `(key, window length in ms)` → (period, units counted in it).
    counters: HashMap<(String, u64), (u64, u64)>,
    markers: HashMap<String, Instant>,
    /// Writes since expired entries were last swept.
    writes_since_sweep: usize,
}

impl MemoryState {
    fn apply(
        &mut self,
        key: &str,
        windows: &[Window],
        amount: u64,
        policy: CountPolicy,
    ) -> CountOutcome {
        let now = epoch_millis();
        let mut usages = Vec::with_capacity(windows.len());
        let mut fits = true;
        for window in windows {
            let (period, resets_in) = period_at(window, now);
            let length = window.length.as_millis() as u64;
            let used = match self.counters.get(&(key.to_owned(), length)) {
                Some((counted_period, used)) if *counted_period == period => *used,
                _ => 0,
            };
            fits &= used.saturating_add(amount) <= window.limit;
            usages.push((
                period,
                length,
                WindowUsage {
                    window: *window,
                    used,
                    resets_in: Duration::from_millis(resets_in),
                },
            ));
        }
        let added = if amount > 0 && (fits || policy == CountPolicy::Always) {
            amount
        } else {
            0
        };
        if added > 0 {
            for (period, length, usage) in &mut usages {
                usage.used += added;
                self.counters
                    .insert((key.to_owned(), *length), (*period, usage.used));
            }
            self.writes_since_sweep += 1;
        }
        self.sweep_now_and_then(now);
        CountOutcome {
            added,
            windows: usages.into_iter().map(|(_, _, usage)| usage).collect(),
        }
    }

    /// Drops counters of past periods and expired markers once in a while, so the map holds
    /// only what is live.
    fn sweep_now_and_then(&mut self, now_ms: u64) {
        if self.writes_since_sweep < 4096 {
            return;
        }
        self.writes_since_sweep = 0;
        self.counters.retain(|(_, length), (period, _)| {
            (*period + 1).saturating_mul((*length).max(1)) > now_ms
        });
        let now = Instant::now();
        self.markers.retain(|_, expires| *expires > now);
        self.records.retain(|_, (_, expires)| *expires > now);
    }
}

impl MemoryStore {
    fn locked(&self) -> Result<std::sync::MutexGuard<'_, MemoryState>, StoreError> {
        self.state
            .lock()
            .map_err(|_| StoreError::new("the memory store's lock is poisoned"))
    }
}

#[async_trait]
impl StateStore for MemoryStore {
    async fn count(
        &self,
        key: &str,
        windows: &[Window],
        amount: u64,
        policy: CountPolicy,
    ) -> Result<CountOutcome, StoreError> {
        let mut state = self.locked()?;
        Ok(state.apply(key, windows, amount, policy))
    }

    async fn count_new(
        &self,
        key: &str,
        windows: &[Window],
        markers: &[String],
        marker_ttl: Duration,
    ) -> Result<CountOutcome, StoreError> {
        let mut state = self.locked()?;
        let now = Instant::now();
        let mut fresh = 0;
        for marker in markers {
            let known = state
                .markers
                .get(marker)
                .is_some_and(|expires| *expires > now);
            if !known {
                state.markers.insert(marker.clone(), now + marker_ttl);
                state.writes_since_sweep += 1;
                fresh += 1;
            }
        }
        Ok(state.apply(key, windows, fresh, CountPolicy::Always))
    }

    async fn read_record(&self, key: &str) -> Result<Option<String>, StoreError> {
        let state = self.locked()?;
        let now = Instant::now();
        Ok(state
            .records
            .get(key)
            .filter(|(_, expires)| *expires > now)
            .map(|(record, _)| record.clone()))
    }

    async fn replace_record(
        &self,
        key: &str,
        expected: Option<&str>,
        record: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let mut state = self.locked()?;
        let now = Instant::now();
        let current = state
            .records
            .get(key)
            .filter(|(_, expires)| *expires > now)
            .map(|(record, _)| record.as_str());
        if current != expected {
            return Ok(false);
        }
        state
            .records
            .insert(key.to_owned(), (record.to_owned(), now + ttl));
        state.writes_since_sweep += 1;
        Ok(true)
    }

    fn describe(&self) -> String {
        "memory".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Window = Window {
        length: Duration::from_secs(60),
        limit: 3,
    };

    #[tokio::test]
    async fn a_limit_of_n_admits_exactly_n() {
        let store = MemoryStore::default();
        let mut admitted = 0;
        for _ in 0..5 {
            let outcome = store
                .count("k", &[MINUTE], 1, CountPolicy::WithinLimits)
                .await
                .unwrap();
            admitted += outcome.added;
        }
        assert_eq!(admitted, 3);
        let read = store
            .count("k", &[MINUTE], 0, CountPolicy::WithinLimits)
            .await
            .unwrap();
        assert_eq!(read.windows[0].used, 3);
        assert!(read.binding_window().is_some());
    }

    #[tokio::test]
    async fn a_count_that_does_not_fit_adds_nothing_to_any_window() {
        let store = MemoryStore::default();
        let day = Window {
            length: Duration::from_secs(86_400),
            limit: 10,
        };
        let refused = store
            .count("k", &[MINUTE, day], 4, CountPolicy::WithinLimits)
            .await
            .unwrap();
        assert_eq!(refused.added, 0);
        assert_eq!(refused.windows[1].used, 0);
        let forced = store
            .count("k", &[MINUTE, day], 4, CountPolicy::Always)
            .await
            .unwrap();
        assert_eq!((forced.windows[0].used, forced.windows[1].used), (4, 4));
    }

    #[tokio::test]
    async fn markers_count_once() {
        let store = MemoryStore::default();
        let ids = vec!["a".to_owned(), "b".to_owned()];
        let ttl = Duration::from_secs(60);
        let first = store.count_new("k", &[MINUTE], &ids, ttl).await.unwrap();
        assert_eq!(first.added, 2);
        let again = store.count_new("k", &[MINUTE], &ids, ttl).await.unwrap();
        assert_eq!(again.added, 0);
        assert_eq!(again.windows[0].used, 2);
    }

    #[test]
    fn periods_align_to_the_epoch() {
        let window = Window {
            length: Duration::from_secs(2),
            limit: 1,
        };
        assert_eq!(period_at(&window, 5_500), (2, 500));
        assert_eq!(period_at(&window, 6_000), (3, 2_000));
    }
}
