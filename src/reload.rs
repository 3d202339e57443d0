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

/// Loads `path` and, if it is valid (and its state store does not refuse us, as at start-up),
/// makes it the running configuration.
pub async fn reload(state: &GatewayState, path: &Path) -> Result<(), ConfigErrors> {
    let mut result = Config::from_file(path, &state.plugins);
    if let Ok(config) = &result
        && let Err(message) = config.check_store().await
    {
        result = Err(ConfigErrors(vec![ConfigError {
            origin: path.display().to_string(),
            line_column: None,
            key: Some("store.url".to_owned()),
            message,
        }]));
    }
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
    tokio::spawn(async move {
        let mut last_seen = fingerprint(&state, &path);
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
                    let _ = reload(&state, &path).await;
                    last_seen = fingerprint(&state, &path);
                }
                () = tokio::time::sleep(poll) => {
                    // Content, not modification time: editors and ConfigMap updates replace
                    // files in ways that mtime resolution can miss.
                    let current = fingerprint(&state, &path);
                    if current.is_some() && current != last_seen {
                        let _ = reload(&state, &path).await;
                        // Taken again: a reload may name another JWKS file.
                        last_seen = fingerprint(&state, &path);
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
    let jwks = (state.config.load().tenants.jwks_file()).and_then(|file| std::fs::read(file).ok());
    Some((config, jwks))
}
