//! The least guard, the floor of the benchmark's guarded rows, guards: a declared call with
//! valid arguments passes, and an undeclared call, invalid arguments or an unreadable answer
//! fail the whole answer (else the floor would measure less than a guard does).

use toolgate_bench::least_guard::{Declared, LeastGuard};

const REQUEST: &str = r#"{"messages":[{"role":"user","content":"hi \"there\""}],"tools":[
    {"type":"function","function":{"name":"send","parameters":{"type":"object",
    "properties":{"to":{"type":"string"}},"required":["to"]}}},
    {"type":"function","function":{"name":"ping"}}]}"#;

fn answer(calls: &[(&str, &str)]) -> Vec<u8> {
    let calls: Vec<serde_json::Value> = calls
        .iter()
        .map(|(name, arguments)| {
            serde_json::json!({"id": "c", "type": "function",
                "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({"choices": [{"index": 0,
        "message": {"role": "assistant", "tool_calls": calls}}]}))
    .expect("an answer serializes")
}

#[test]
fn declared_calls_with_valid_arguments_pass_and_any_other_call_fails_the_answer() {
    let declared = Declared::read(REQUEST.as_bytes()).expect("the request reads");
    let guard = LeastGuard::default();
    let valid = answer(&[("send", r#"{"to":"ann"}"#), ("ping", "{}")]);
    assert_eq!(guard.checked_calls(&declared, &valid), Some(2));
    assert_eq!(guard.checked_calls(&declared, &valid), Some(2), "warm");
    let invalid = answer(&[("send", r#"{"to":5}"#)]);
    assert_eq!(guard.checked_calls(&declared, &invalid), None);
    let undeclared = answer(&[("ping", "{}"), ("delete_all", "{}")]);
    assert_eq!(guard.checked_calls(&declared, &undeclared), None);
    assert_eq!(guard.checked_calls(&declared, b"not json"), None);
    assert_eq!(guard.checked_calls(&declared, &answer(&[])), Some(0));
}
