//! The plugin's `settings` table: what users may write under `[plugins.settings]`, its
//! defaults, and the checks that turn a bad value into a `SettingsError` naming the key.

use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use toolgate_plugin::{SettingsError, parse_settings};

/// What the judge's failure to answer means for the call under review.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SemanticFailMode {
    /// Block the call (`semantic_unavailable`): a guardrail that is down must not open the gate.
    #[default]
    Block,
    /// Let the call through and log a warning.
    Allow,
}

/// The settings as written; every key is optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsWire {
    #[serde(default)]
    strict: bool,
    #[serde(default)]
    openai_api_key: Option<String>,
    #[serde(default = "default_model")]
    model: String,
    #[serde(default = "default_base_url")]
    base_url: String,
    #[serde(default = "default_timeout_ms")]
    judge_timeout_ms: u64,
    #[serde(default = "default_concurrency")]
    judge_concurrency: usize,
    #[serde(default = "default_cache_size")]
    judge_cache_size: usize,
    /// A cap on the judge's answer, sent as `max_completion_tokens`: a judge model that loops
    /// inside its answer then stops early (an unusable answer) instead of generating until the
    /// timeout while holding its server. Unset: no cap, as reasoning models need room.
    #[serde(default)]
    judge_max_tokens: Option<u32>,
    #[serde(default)]
    semantic_fail_mode: SemanticFailMode,
}

fn default_model() -> String {
    "gpt-4o-mini".to_owned()
}

fn default_base_url() -> String {
    "https://api.openai.com/v1".to_owned()
}

fn default_timeout_ms() -> u64 {
    5_000
}

fn default_concurrency() -> usize {
    16
}

fn default_cache_size() -> usize {
    10_000
}

/// A judge that takes longer than this defeats the point of an inline proxy; a larger value is
/// more likely a unit mistake (seconds written as milliseconds) than a wish.
const MAX_JUDGE_TIMEOUT_MS: u64 = 600_000;

/// Validated settings of one plugin instance.
#[derive(Clone, PartialEq, Eq)]
pub struct Settings {
    pub strict: bool,
    /// `Some` exactly when the semantic judge is on.
    pub judge: Option<JudgeSettings>,
}

/// How to reach and use the semantic judge.
#[derive(Clone, PartialEq, Eq)]
pub struct JudgeSettings {
    pub api_key: String,
    pub model: String,
    /// The OpenAI-compatible API root, without a trailing slash (`…/v1`).
    pub base_url: String,
    pub timeout: Duration,
    pub concurrency: usize,
    /// 0 turns the verdict cache off.
    pub cache_size: usize,
    /// `max_completion_tokens` of each judge request, if capped.
    pub max_tokens: Option<u32>,
    pub fail_mode: SemanticFailMode,
}

// Written by hand so the api key can never reach a log line through `{:?}`.
impl fmt::Debug for JudgeSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JudgeSettings")
            .field("api_key", &"[redacted]")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("timeout", &self.timeout)
            .field("concurrency", &self.concurrency)
            .field("cache_size", &self.cache_size)
            .field("max_tokens", &self.max_tokens)
            .field("fail_mode", &self.fail_mode)
            .finish()
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("strict", &self.strict)
            .field("judge", &self.judge)
            .finish()
    }
}

impl Settings {
    /// Parses and validates a `settings` table. A missing table (`null`) means all defaults.
    pub fn parse(value: &serde_json::Value) -> Result<Self, SettingsError> {
        let empty = serde_json::Value::Object(serde_json::Map::new());
        let value = if value.is_null() { &empty } else { value };
        let wire: SettingsWire = parse_settings(value)?;

        if wire.judge_timeout_ms == 0 || wire.judge_timeout_ms > MAX_JUDGE_TIMEOUT_MS {
            return Err(SettingsError::new(
                "judge_timeout_ms",
                format!("must be between 1 and {MAX_JUDGE_TIMEOUT_MS} milliseconds"),
            ));
        }
        if wire.judge_max_tokens == Some(0) {
            return Err(SettingsError::new(
                "judge_max_tokens",
                "must be at least 1 (leave it out for no cap)",
            ));
        }
        // tokio's Semaphore panics above MAX_PERMITS; refuse here instead of at build time.
        if wire.judge_concurrency == 0
            || wire.judge_concurrency > tokio::sync::Semaphore::MAX_PERMITS
        {
            return Err(SettingsError::new(
                "judge_concurrency",
                "must be at least 1 (the number of judge requests in flight at once)",
            ));
        }
        if wire.model.trim().is_empty() {
            return Err(SettingsError::new("model", "must not be empty"));
        }
        let base_url = wire.base_url.trim().trim_end_matches('/').to_owned();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(SettingsError::new(
                "base_url",
                format!(
                    "must be an http:// or https:// URL, got '{}'",
                    wire.base_url
                ),
            ));
        }

        // An empty key is how `${OPENAI_API_KEY:-}` expands when the variable is unset: that
        // means "no judge", not an error, so one config serves both setups. Surrounding
        // whitespace is a copy-paste or file artifact (a trailing newline), never part of a key.
        let api_key = wire
            .openai_api_key
            .map(|key| key.trim().to_owned())
            .filter(|key| !key.is_empty());
        // async-openai turns the key into a header with `parse().unwrap()`: a key that is not a
        // valid header value would panic on the first judge call, so it is refused here. The
        // message does not echo the key.
        let header_safe = |key: &String| key.bytes().all(|byte| byte.is_ascii_graphic());
        if !api_key.as_ref().is_none_or(header_safe) {
            return Err(SettingsError::new(
                "openai_api_key",
                "must be printable ASCII without spaces or control characters",
            ));
        }
        let judge = api_key.map(|api_key| JudgeSettings {
            api_key,
            model: wire.model,
            base_url,
            timeout: Duration::from_millis(wire.judge_timeout_ms),
            concurrency: wire.judge_concurrency,
            cache_size: wire.judge_cache_size,
            max_tokens: wire.judge_max_tokens,
            fail_mode: wire.semantic_fail_mode,
        });
        Ok(Settings {
            strict: wire.strict,
            judge,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn error_of(value: serde_json::Value) -> SettingsError {
        match Settings::parse(&value) {
            Ok(settings) => panic!("expected an error, got {settings:?}"),
            Err(error) => error,
        }
    }

    #[test]
    fn defaults_leave_the_judge_off() {
        for value in [json!(null), json!({})] {
            let settings = Settings::parse(&value).expect("defaults are valid");
            assert!(!settings.strict);
            assert!(settings.judge.is_none());
        }
    }

    #[test]
    fn an_api_key_turns_the_judge_on_with_defaults() {
        let settings =
            Settings::parse(&json!({"openai_api_key": "sk-test", "strict": true})).expect("valid");
        assert!(settings.strict);
        let judge = settings.judge.expect("judge on");
        assert_eq!(judge.model, "gpt-4o-mini");
        assert_eq!(judge.base_url, "https://api.openai.com/v1");
        assert_eq!(judge.timeout, Duration::from_millis(5_000));
        assert_eq!(judge.concurrency, 16);
        assert_eq!(judge.cache_size, 10_000);
        assert_eq!(judge.fail_mode, SemanticFailMode::Block);
    }

    #[test]
    fn an_empty_api_key_means_no_judge() {
        let settings = Settings::parse(&json!({"openai_api_key": "  "})).expect("valid");
        assert!(settings.judge.is_none());
        let settings = Settings::parse(&json!({"openai_api_key": "sk-k\n"})).expect("valid");
        assert_eq!(settings.judge.expect("judge on").api_key, "sk-k");
    }

    #[test]
    fn base_url_loses_its_trailing_slash() {
        let settings = Settings::parse(&json!({
            "openai_api_key": "k", "base_url": "http://127.0.0.1:8000/v1/",
            "semantic_fail_mode": "allow"
        }))
        .expect("valid");
        let judge = settings.judge.expect("judge on");
        assert_eq!(judge.base_url, "http://127.0.0.1:8000/v1");
        assert_eq!(judge.fail_mode, SemanticFailMode::Allow);
    }

    #[test]
    fn unknown_keys_are_refused() {
        let error = error_of(json!({"strict": true, "judge_model": "x"}));
        assert!(error.message.contains("judge_model"), "{}", error.message);
    }

    #[test]
    fn bad_values_name_their_key() {
        let cases = [
            (json!({"judge_concurrency": 0}), "judge_concurrency"),
            (json!({"judge_timeout_ms": 0}), "judge_timeout_ms"),
            (json!({"judge_max_tokens": 0}), "judge_max_tokens"),
            (json!({"judge_timeout_ms": 3_600_000}), "judge_timeout_ms"),
            (json!({"semantic_fail_mode": "maybe"}), "semantic_fail_mode"),
            (json!({"base_url": "api.openai.com"}), "base_url"),
            (json!({"model": ""}), "model"),
            (json!({"strict": "yes"}), "strict"),
            (json!({"openai_api_key": "sk-a\nb"}), "openai_api_key"),
            (json!({"openai_api_key": "sk-ä"}), "openai_api_key"),
        ];
        for (value, key) in cases {
            let error = error_of(value.clone());
            assert_eq!(error.path, key, "{value}: {}", error.message);
        }
    }

    #[test]
    fn debug_output_never_shows_the_api_key() {
        let settings =
            Settings::parse(&json!({"openai_api_key": "sk-very-secret"})).expect("valid");
        let printed = format!("{settings:?}");
        assert!(!printed.contains("sk-very-secret"), "{printed}");
        assert!(printed.contains("[redacted]"), "{printed}");
    }
}
