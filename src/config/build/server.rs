//! `[server]`: the listeners, limits and timeouts, and the one reader of keyword settings.

use std::net::SocketAddr;
use std::time::Duration;

use super::super::source::{ConfigError, KeyPath, Source};
use super::super::{RawConfig, ServerConfig};

pub(super) fn build_server(
    raw: &RawConfig,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> Option<ServerConfig> {
    let server_path = KeyPath::default().key("server");
    let parse_address = |key: &str, text: &str, errors: &mut Vec<ConfigError>| match text
        .parse::<SocketAddr>()
    {
        Ok(address) => Some(address),
        Err(_) => {
            errors.push(source.error_at_key(
                &server_path.clone().key(key),
                format!("'{text}' is not a socket address (write host:port, e.g. 127.0.0.1:8080)"),
            ));
            None
        }
    };
    let listen = parse_address("listen", &raw.server.listen.0, errors);
    let admin_listen = match raw.server.admin_listen.as_ref().map(|text| text.0.as_str()) {
        None | Some("") | Some("off") => Some(None),
        Some(text) => parse_address("admin_listen", text, errors).map(Some),
    };
    for (key, value) in [
        ("max_request_body_bytes", raw.server.max_request_body_bytes),
        (
            "max_response_body_bytes",
            raw.server.max_response_body_bytes,
        ),
        ("max_connections", raw.server.max_connections),
    ] {
        if value == 0 {
            errors
                .push(source.error_at_key(&server_path.clone().key(key), "must be greater than 0"));
        }
    }
    let server = &raw.server;
    // A zero timeout would cut every connection or body at once; `request_body_deadline_ms`
    // is the one bound that may be off (0).
    for (key, value) in [
        ("shutdown_grace_ms", server.shutdown_grace_ms),
        ("header_read_timeout_ms", server.header_read_timeout_ms),
        ("request_body_timeout_ms", server.request_body_timeout_ms),
        ("first_byte_timeout_ms", server.first_byte_timeout_ms),
        ("handshake_timeout_ms", server.handshake_timeout_ms),
        ("idle_timeout_ms", server.idle_timeout_ms),
        ("write_timeout_ms", server.write_timeout_ms),
        (
            "http2_keep_alive_interval_ms",
            server.http2_keep_alive_interval_ms,
        ),
        (
            "http2_keep_alive_timeout_ms",
            server.http2_keep_alive_timeout_ms,
        ),
    ] {
        if value == 0 {
            errors.push(source.error_at_key(
                &server_path.clone().key(key),
                "must be greater than 0 (milliseconds)",
            ));
        }
    }
    if server.handshake_timeout_ms < server.first_byte_timeout_ms {
        errors.push(source.error_at_key(
            &server_path.clone().key("handshake_timeout_ms"),
            format!(
                "must be at least first_byte_timeout_ms ({} ms): the handshake starts with the first byte",
                server.first_byte_timeout_ms
            ),
        ));
    }
    let millis = Duration::from_millis;
    Some(ServerConfig {
        listen: listen?,
        admin_listen: admin_listen?,
        admin_token: (server.admin_token.as_ref())
            .map(|token| token.0.trim().to_owned())
            .filter(|token| !token.is_empty()),
        protect_metrics: server.protect_metrics,
        max_request_body_bytes: server.max_request_body_bytes,
        max_response_body_bytes: server.max_response_body_bytes,
        shutdown_grace: millis(server.shutdown_grace_ms),
        header_read_timeout: millis(server.header_read_timeout_ms),
        request_body_timeout: millis(server.request_body_timeout_ms),
        request_body_deadline: (server.request_body_deadline_ms > 0)
            .then(|| millis(server.request_body_deadline_ms)),
        max_connections: server.max_connections,
        first_byte_timeout: millis(server.first_byte_timeout_ms),
        handshake_timeout: millis(server.handshake_timeout_ms),
        idle_timeout: millis(server.idle_timeout_ms),
        write_timeout: millis(server.write_timeout_ms),
        http2_keep_alive_interval: millis(server.http2_keep_alive_interval_ms),
        http2_keep_alive_timeout: millis(server.http2_keep_alive_timeout_ms),
    })
}

/// A setting that is one of a few words: the value `choices` gives the word at `key` of
/// `table`, or `default` when the config leaves it out. A word that is none of them is an error
/// that lists them, and reads as `default` so the rest of the config is still checked.
/// `[audit] capture…`: which exchanges' bodies are kept, in a ring of `capture_ring_mib`
/// (default 16) and, with `capture_dir`, in files of at most `capture_dir_mib` (default 256).
pub(in crate::config) fn build_capture(
    audit: &super::super::RawAudit,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> crate::capture::CaptureSettings {
    use crate::capture::CaptureMode;
    let table = KeyPath::default().key("audit");
    let mode = keyword(
        audit.capture.as_deref(),
        (&table, "capture"),
        &[
            ("off", CaptureMode::Off),
            ("blocked", CaptureMode::Blocked),
            ("all", CaptureMode::All),
        ],
        CaptureMode::Off,
        source,
        errors,
    );
    let mut mib = |value: Option<u64>, key: &str, default: u64| {
        let value = value.unwrap_or(default);
        if !(1..=65_536).contains(&value) {
            errors.push(source.error_at_key(&table.clone().key(key), "must be 1–65536 (MiB)"));
        }
        value.clamp(1, 65_536) << 20
    };
    let ring_bytes = mib(audit.capture_ring_mib, "capture_ring_mib", 16);
    let dir_bytes = mib(audit.capture_dir_mib, "capture_dir_mib", 256);
    let dir = audit
        .capture_dir
        .as_ref()
        .map(|dir| source.relative_path(&dir.0));
    crate::capture::CaptureSettings {
        mode,
        ring_bytes: usize::try_from(ring_bytes).unwrap_or(usize::MAX),
        dir,
        dir_bytes,
    }
}

pub(super) fn keyword<T: Copy>(
    word: Option<&str>,
    (table, key): (&KeyPath, &str),
    choices: &[(&str, T)],
    default: T,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> T {
    let Some(word) = word else {
        return default;
    };
    if let Some((_, value)) = choices.iter().find(|(choice, _)| *choice == word) {
        return *value;
    }
    let words: Vec<&str> = choices.iter().map(|(choice, _)| *choice).collect();
    errors.push(source.error_at_key(
        &table.clone().key(key),
        format!("unknown {key} '{word}' (one of: {})", words.join(", ")),
    ));
    default
}
