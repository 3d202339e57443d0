//! Signing keys fetched from a JWKS URL (`[auth.jwt] jwks_url`): fetched when the gateway
//! starts (or a reload names a new URL), refreshed every `jwks_refresh_secs`, and fetched again
//! when a token names a `kid` the keys lack — at most once per [`MISS_REFETCH_INTERVAL`], so
//! tokens with made-up `kid`s cannot make toolgate hammer the identity provider. A failed fetch
//! keeps the last good keys; with none yet, every token is refused (fail closed).

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;

use super::jwks::{VerifyingKey, parse_jwks};

/// The least time between two fetches that unknown `kid`s trigger.
pub const MISS_REFETCH_INTERVAL: Duration = Duration::from_secs(30);
/// How long one fetch may take, connection included.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// A JWKS is a few keys; anything larger is not one.
const MAX_JWKS_BYTES: usize = 1 << 20;
/// The first retry after a failed fetch while no keys are held; it doubles up to the interval.
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// The keys of one JWKS URL, as last fetched.
pub struct RemoteJwks {
    url: reqwest::Url,
    refresh_every: Duration,
    keys: ArcSwapOption<Vec<VerifyingKey>>,
    /// Held for the length of a fetch, so requests that miss a `kid` together wait for one
    /// fetch; holds when the last fetch a miss triggered started.
    fetching: tokio::sync::Mutex<Option<Instant>>,
    client: OnceLock<Result<reqwest::Client, String>>,
}

impl std::fmt::Debug for RemoteJwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteJwks")
            .field("url", &self.describe())
            .field("refresh_every", &self.refresh_every)
            .finish_non_exhaustive()
    }
}

impl RemoteJwks {
    /// Keys not fetched yet: [`RemoteJwks::start`] fetches them.
    pub fn new(url: reqwest::Url, refresh_every: Duration) -> Self {
        RemoteJwks {
            url,
            refresh_every,
            keys: ArcSwapOption::empty(),
            fetching: tokio::sync::Mutex::new(None),
            client: OnceLock::new(),
        }
    }

    /// The keys last fetched, if a fetch ever succeeded.
    pub fn keys(&self) -> Option<Arc<Vec<VerifyingKey>>> {
        self.keys.load_full()
    }

    /// Takes over the keys `previous` holds when it fetches the same URL (a reload), so a
    /// reload leaves no moment without keys; then fetches now and every `refresh_every` (more
    /// often while no fetch has succeeded) for as long as this set is in use: the task ends
    /// once the configuration holding it is gone.
    pub fn start(self: &Arc<Self>, previous: Option<&RemoteJwks>) {
        if let Some(previous) = previous.filter(|previous| previous.url == self.url) {
            self.keys.store(previous.keys());
        }
        let jwks = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut retry = FIRST_RETRY;
            loop {
                let wait = {
                    let Some(jwks) = jwks.upgrade() else {
                        return;
                    };
                    {
                        let _fetching = jwks.fetching.lock().await;
                        jwks.fetch_logged().await;
                    }
                    if jwks.keys.load().is_some() {
                        retry = FIRST_RETRY;
                        jwks.refresh_every
                    } else {
                        let wait = retry;
                        retry = (retry * 2).min(jwks.refresh_every);
                        wait
                    }
                };
                tokio::time::sleep(wait).await;
            }
        });
    }

    /// A token named `kid` (or none) and no key matched: fetch again, unless another request
    /// just did, or a miss already fetched within [`MISS_REFETCH_INTERVAL`].
    pub async fn refresh_for_unknown_key(&self, kid: Option<&str>) {
        let mut last_miss = self.fetching.lock().await;
        if self.holds(kid) {
            return;
        }
        if last_miss.is_some_and(|at| at.elapsed() < MISS_REFETCH_INTERVAL) {
            return;
        }
        *last_miss = Some(Instant::now());
        self.fetch_logged().await;
    }

    /// Whether the keys now include one named `kid` (any key, for a token naming none).
    fn holds(&self, kid: Option<&str>) -> bool {
        self.keys
            .load()
            .as_ref()
            .is_some_and(|keys| kid.is_none_or(|kid| keys.iter().any(|key| key.kid() == Some(kid))))
    }

    async fn fetch_logged(&self) {
        match self.fetch().await {
            Ok(count) => {
                tracing::debug!(jwks = %self.describe(), keys = count, "JWKS fetched");
            }
            Err(error) if self.keys.load().is_some() => {
                tracing::warn!(jwks = %self.describe(), %error, "the JWKS could not be refreshed; the last good keys stay");
            }
            Err(error) => {
                tracing::warn!(jwks = %self.describe(), %error, "the JWKS could not be fetched: tenant tokens are refused until it is");
            }
        }
    }

    /// One fetch: the keys are replaced only by a readable JWKS with a usable key.
    async fn fetch(&self) -> Result<usize, String> {
        let client = self
            .client
            .get_or_init(|| {
                crate::crypto::install();
                reqwest::Client::builder()
                    .timeout(FETCH_TIMEOUT)
                    .build()
                    .map_err(|error| format!("cannot build the HTTP client: {error}"))
            })
            .as_ref()
            .map_err(Clone::clone)?;
        // Without the URL in errors: a JWKS URL may carry a credential in its query.
        let failed = |error: reqwest::Error| format!("the fetch failed: {}", error.without_url());
        let mut response = client
            .get(self.url.clone())
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(failed)?;
        if !response.status().is_success() {
            return Err(format!("the JWKS URL answered {}", response.status()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(format!("the JWKS is larger than {MAX_JWKS_BYTES} bytes"));
            }
            body.extend_from_slice(&chunk);
        }
        let text = std::str::from_utf8(&body).map_err(|_| "the JWKS is not UTF-8".to_owned())?;
        let keys = parse_jwks(text)?;
        let count = keys.len();
        self.keys.store(Some(Arc::new(keys)));
        Ok(count)
    }

    /// The URL for logs: scheme, host, port and path, never a query or user info.
    pub fn describe(&self) -> String {
        let mut shown = self.url.clone();
        shown.set_query(None);
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        shown.to_string()
    }
}
