//! `on_block` settings are checked at load: an unknown choice, retry limits out of range, and
//! retry limits (or `hold_text`) on an entry whose blocks are not recovered from are located
//! errors.

use super::guarded_with;
use crate::common::answers::{assert_contains_all, config_errors};
use crate::common::{config_text, temp_audit_path};
use toolgate::Runtime;

fn errors_of(on_block: &str) -> String {
    let text = config_text(
        "http://127.0.0.1:9",
        &temp_audit_path(),
        &guarded_with(on_block),
    );
    config_errors(&text, "gateway.toml", &Runtime::new().plugins)
}

#[test]
fn wrong_on_block_settings_do_not_load() {
    assert_contains_all(
        &errors_of("on_block = \"maybe\""),
        [
            "gateway.toml:",
            "unknown variant `maybe`",
            "retry",
            "message",
        ],
    );
    assert_contains_all(
        &errors_of("on_block = \"retry\"\nmax_retries = 0"),
        ["max_retries must be between 1 and 10, not 0"],
    );
    assert_contains_all(
        &errors_of("on_block = \"retry\"\nretry_deadline_ms = 0"),
        ["retry_deadline_ms must be more than 0"],
    );
    assert_contains_all(
        &errors_of("on_block = \"message\"\nmax_retries = 3"),
        ["max_retries applies only with on_block = \"retry\""],
    );
    assert_contains_all(
        &errors_of("max_retries = 3"),
        ["max_retries applies only with on_block = \"retry\""],
    );
    for without_recovery in ["hold_text = true", "on_block = \"error\"\nhold_text = true"] {
        assert_contains_all(
            &errors_of(without_recovery),
            [
                "gateway.toml:",
                "hold_text applies only with on_block = \"retry\" or \"message\"",
            ],
        );
    }
    assert_contains_all(
        &errors_of("on_block = \"message\"\nhold_text = \"yes\""),
        ["hold_text"],
    );
}
