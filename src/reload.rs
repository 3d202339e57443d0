//! Hot reload: on SIGHUP, or when the content of the configuration file (or of the JWKS file
//! it names, so a key rotation needs no edit of the configuration) changes, the new file is
//! loaded and validated first (its state store checked as at start-up) and then swapped in
//! atomically. Exchanges in flight finish on the configuration they started with (each holds its
//! own `Arc`); an invalid file is refused with its errors logged, and the running configuration
//! stays.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::{Config, ConfigError, ConfigErrors};
use crate::state::GatewayState;

/// How long a changed file must read the same before it is loaded. A writer that truncates and
/// rewrites in place (`>` in a shell, `std::fs::write`, many tools) leaves a prefix of the file
/// on disk for a moment, and a prefix can be a valid configuration with fewer routes: loaded, it
/// would answer 404 on the others until the next change (seen in the soak).
const SETTLE: Duration = Duration::from_millis(100);

/// How many settle intervals a reload waits for a file that keeps changing before it gives up;
/// the watcher tries again on its next poll.
const SETTLE_ATTEMPTS: u32 = 20;

/// Loads `path` and, if it is valid (and its state store does not refuse us, as at start-up),
/// makes it the running configuration.
pub async fn reload(state: &GatewayState, path: &Path) -> Result<(), ConfigErrors> {
    reload_settled(state, path, None).await.0
}

/// [`reload`], and the file's bytes it read (`None` when it could not read them settled), so
/// that the watcher marks as seen exactly what was loaded, not what is on disk a moment later.
/// `seen`: the file's bytes as the caller just read them, if it did, taken as the first read.
async fn reload_settled(
    state: &GatewayState,
    path: &Path,
    seen: Option<Vec<u8>>,
) -> (Result<(), ConfigErrors>, Option<Vec<u8>>) {
    let origin = path.display().to_string();
    let (mut result, read) = match settled_bytes(path, seen).await {
        Ok(bytes) => {
            let result = match std::str::from_utf8(&bytes) {
                // Valid at start-up (no routes), but as a reload it is a truncated file far more
                // often than a wish to answer 404 to everything; a file with only comments is
                // taken at its word.
                Ok(text) if text.trim().is_empty() => Err(unreadable(
                    &origin,
                    "it is empty (truncated by a writer still at work?); the running \
                     configuration stays"
                        .to_owned(),
                )),
                Ok(text) => Config::from_toml(text, &origin, &state.plugins),
                Err(_) => Err(unreadable(&origin, "it is not UTF-8 text".to_owned())),
            };
            (result, Some(bytes))
        }
        Err(message) => (Err(unreadable(&origin, message)), None),
    };
    if let Ok(config) = &result
        && let Err(message) = config.check_store().await
    {
        result = Err(ConfigErrors(vec![ConfigError {
            origin: origin.clone(),
            line_column: None,
            key: Some("store.url".to_owned()),
            message,
        }]));
    }
    (apply(state, path, result), read)
}

fn unreadable(origin: &str, message: String) -> ConfigErrors {
    ConfigErrors(vec![ConfigError {
        origin: origin.to_owned(),
        line_column: None,
        key: None,
        message: format!("cannot read the file: {message}"),
    }])
}

/// The file's bytes once two reads [`SETTLE`] apart agree; `seen` is the first read when the
/// caller has made it.
async fn settled_bytes(path: &Path, seen: Option<Vec<u8>>) -> Result<Vec<u8>, String> {
    let read = |path: &Path| std::fs::read(path).map_err(|error| error.to_string());
    let mut seen = match seen {
        Some(bytes) => bytes,
        None => read(path)?,
    };
    for _ in 0..SETTLE_ATTEMPTS {
        tokio::time::sleep(SETTLE).await;
        let again = read(path)?;
        if again == seen {
            return Ok(seen);
        }
        seen = again;
    }
    Err(format!(
        "it kept changing for {} ms (a writer still at work?); not loaded",
        (SETTLE * SETTLE_ATTEMPTS).as_millis()
    ))
}

/// Counts the reload and, when the configuration is good, swaps it in.
fn apply(
    state: &GatewayState,
    path: &Path,
    result: Result<Config, ConfigErrors>,
) -> Result<(), ConfigErrors> {
    state.metrics.record_reload(result.is_ok());
    let config = match result {
        Ok(config) => config,
        Err(errors) => {
            tracing::error!(config = %path.display(), "the new configuration is invalid and was not applied:\n{errors}");
            return Err(errors);
        }
    };
    let running = state.config.load();
    if config.server.listen != running.server.listen
        || config.server.admin_listen != running.server.admin_listen
    {
        tracing::warn!("listen addresses changed: they take effect on the next restart");
    }
    if config.audit != running.audit || config.capture != running.capture {
        tracing::warn!("the audit output or capture changed: it takes effect on the next restart");
    }
    let routes = config.router.routes().count();
    state.mcp.apply(&config.mcp);
    config.tenants.start_jwks(Some(&running.tenants));
    config.prime_metrics(&state.metrics);
    state.config.store(Arc::new(config));
    // The policy may have changed what each MCP session may see.
    state.mcp.tools_changed();
    tracing::info!(config = %path.display(), routes, "configuration reloaded");
    Ok(())
}

/// Watches for SIGHUP and for changes of the file's content (checked every `poll`), reloading on
/// either. Runs until the returned task is aborted.
pub fn watch(
    state: Arc<GatewayState>,
    path: PathBuf,
    poll: Duration,
) -> tokio::task::JoinHandle<()> {
    // Read before this returns, not when the task first runs: a change made in between would
    // otherwise be taken for the starting point and never loaded.
    let mut last_seen = fingerprint(&state, &path);
    tokio::spawn(async move {
        #[cfg(unix)]
        let mut hangup =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        loop {
            #[cfg(unix)]
            let signalled = async {
                match hangup.as_mut() {
                    Some(signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            #[cfg(not(unix))]
            let signalled = std::future::pending::<()>();
            tokio::select! {
                () = signalled => {
                    tracing::info!("SIGHUP: reloading the configuration");
                    let (_, loaded) = reload_settled(&state, &path, None).await;
                    last_seen = loaded.map(|config| (config, jwks_bytes(&state)));
                }
                () = tokio::time::sleep(poll) => {
                    // Content, not modification time: editors and ConfigMap updates replace
                    // files in ways that mtime resolution can miss.
                    let current = fingerprint(&state, &path);
                    if let Some((config, _)) = current.filter(|current| Some(current) != last_seen.as_ref()) {
                        let (_, loaded) = reload_settled(&state, &path, Some(config)).await;
                        // The JWKS file read again: a reload may name another one. A file that
                        // kept changing is not marked seen, so the next poll tries again.
                        last_seen = loaded.map(|config| (config, jwks_bytes(&state)));
                    }
                }
            }
        }
    })
}

/// What a reload reads, to tell whether it changed: the configuration file and the JWKS file
/// the running configuration names. `None` while the configuration file cannot be read.
fn fingerprint(state: &GatewayState, path: &Path) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let config = std::fs::read(path).ok()?;
    Some((config, jwks_bytes(state)))
}

/// The JWKS file the running configuration names, as it reads now.
fn jwks_bytes(state: &GatewayState) -> Option<Vec<u8>> {
    (state.config.load().tenants.jwks_file()).and_then(|file| std::fs::read(file).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of its own in the temporary directory, removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str) -> TempFile {
            let unique = format!("toolgate-reload-{}-{name}.toml", std::process::id());
            TempFile(std::env::temp_dir().join(unique))
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    const WHOLE: &str =
        "[[routes]]\npath = \"/v1\"\nupstream = \"a\"\n\n[[routes]]\npath = \"/mcp\"\n";

    /// What an in-place rewrite leaves on disk for a moment: a prefix, itself a valid file.
    fn prefix() -> &'static str {
        &WHOLE[..WHOLE.find("\n\n").expect("two routes")]
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_rewritten_in_place_is_read_whole_never_as_its_prefix() {
        let file = TempFile::new("prefix");
        std::fs::write(&file.0, prefix()).expect("written");
        let path = file.0.clone();
        let writer = tokio::spawn(async move {
            tokio::time::sleep(SETTLE / 2).await;
            std::fs::write(&path, WHOLE).expect("written");
        });
        let read = settled_bytes(&file.0, None).await.expect("it settles");
        assert_eq!(String::from_utf8(read).expect("text"), WHOLE);
        writer.await.expect("the writer ran");
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_that_keeps_changing_is_not_loaded() {
        let file = TempFile::new("changing");
        std::fs::write(&file.0, WHOLE).expect("written");
        let path = file.0.clone();
        let writer = tokio::spawn(async move {
            for version in 0.. {
                tokio::time::sleep(SETTLE / 2).await;
                std::fs::write(&path, format!("{WHOLE}# {version}\n")).expect("written");
            }
        });
        let refused = settled_bytes(&file.0, None)
            .await
            .expect_err("never settled");
        assert!(refused.contains("kept changing"), "{refused}");
        writer.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_file_that_stays_is_read_after_one_interval() {
        let file = TempFile::new("still");
        std::fs::write(&file.0, WHOLE).expect("written");
        let started = tokio::time::Instant::now();
        let read = settled_bytes(&file.0, None).await.expect("it settles");
        assert_eq!(read, WHOLE.as_bytes());
        assert_eq!(started.elapsed(), SETTLE, "one interval, not more");
    }
}
