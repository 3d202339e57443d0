//! What toolgate writes when a guarded answer is blocked and the route chose to recover
//! (`on_block = "retry"` or `"message"`): the format-neutral inputs of the retry request and
//! of the `message` answer, and the usage sum of several attempts. Each format folder writes
//! them in its own shape (`on_block.rs` beside its `message.rs`).

use bytes::Bytes;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::format::{ParseError, read_json};
use crate::raw_object::RawObject;
use crate::tool::ToolCall;

/// A blocked call, and the words the model reads as its result in the retry request.
#[derive(Debug, Clone)]
pub struct CallFeedback<'a> {
    /// The call as the model made it.
    pub call: &'a ToolCall,
    /// Why it did not run, for the model to act on.
    pub result: String,
}

/// The `message` answer: an assistant turn that says, in words, what was blocked.
#[derive(Debug, Clone)]
pub struct BlockNotice<'a> {
    /// Makes the answer's ids (`chatcmpl-…`, `resp_…`, `msg_…`): the exchange's request id.
    pub request_id: &'a str,
    /// The model the request named (answers carry one).
    pub model: &'a str,
    /// The assistant's text.
    pub text: &'a str,
    /// The `toolgate` extension field (the violations).
    pub toolgate: &'a Value,
    /// The usage of the attempts the upstream answered, summed; zeros when unknown.
    pub usage: Option<&'a Value>,
    /// Seconds since the epoch, for `created` / `created_at`.
    pub created: u64,
}

impl BlockNotice<'_> {
    /// The id this answer's format writes, with its prefix: a request id may hold any visible
    /// ASCII, ids are kept to letters, digits, `-` and `_`.
    pub(crate) fn id(&self, prefix: &str) -> String {
        let tail: String = self
            .request_id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
            .take(64)
            .collect();
        format!("{prefix}toolgate_{tail}")
    }

    /// The summed usage, or `zero` when no attempt reported one.
    pub(crate) fn usage_or(&self, zero: Value) -> Value {
        self.usage.cloned().unwrap_or(zero)
    }
}

/// Whether a top-level key is where some format's answer reports its usage (`usage`, Gemini's
/// `usageMetadata`): each adapter names its own.
fn is_usage_field(key: &str) -> bool {
    (crate::format::WireFormat::ALL.iter())
        .any(|format| format.adapter().usage_fields().contains(&key))
}

/// The usage object of a complete answer, top-level in every format.
pub fn answer_usage(body: &[u8]) -> Option<Value> {
    let object: RawObject = read_json(body).ok()?;
    let (_, usage) = object.0.iter().rev().find(|(key, _)| is_usage_field(key))?;
    serde_json::from_str::<Value>(usage.get())
        .ok()
        .filter(Value::is_object)
}

/// Adds `more` into `total`, number by number and object by object: the usage objects of all
/// three formats are trees of token counts, so one sum serves them all. A count only `more`
/// has is taken as it is; what is not a number or an object in both is left as `total` has it.
pub fn add_usage(total: &mut Value, more: &Value) {
    match (total, more) {
        (Value::Object(total), Value::Object(more)) => {
            for (key, value) in more {
                match total.get_mut(key) {
                    Some(existing) => add_usage(existing, value),
                    None => {
                        total.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (total @ Value::Number(_), Value::Number(more)) => {
            if let (Some(a), Some(b)) = (total.as_u64(), more.as_u64()) {
                *total = Value::from(a.saturating_add(b));
            } else if let (Some(a), Some(b)) = (total.as_f64(), more.as_f64()) {
                *total = serde_json::Number::from_f64(a + b).map_or(Value::Null, Value::Number);
            }
        }
        (total @ Value::Null, more) => *total = more.clone(),
        _ => {}
    }
}

/// A complete answer with `earlier` (the usage of the attempts before it) added into its
/// `usage`, every other field keeping its bytes; `None` when it reports no usage object.
pub fn with_added_usage(body: &[u8], earlier: &Value) -> Result<Option<Bytes>, ParseError> {
    let object: RawObject = read_json(body)?;
    let Some((field, usage)) = object.0.iter().rev().find(|(key, _)| is_usage_field(key)) else {
        return Ok(None);
    };
    let mut total: Value = serde_json::from_str(usage.get())?;
    if !total.is_object() {
        return Ok(None);
    }
    add_usage(&mut total, earlier);
    Ok(Some(Bytes::from(
        object.write(&[(field.as_str(), Some(total.to_string()))]),
    )))
}

/// The request body with the array `field` extended by `items`; `existing` turns the field's
/// current value into the items it stands for (a Responses `input` may be a plain string).
/// Every other field keeps its bytes.
pub(crate) fn append_to_field(
    body: &[u8],
    field: &str,
    existing: impl FnOnce(&RawValue) -> Result<Vec<String>, ParseError>,
    items: &[Value],
) -> Result<Bytes, ParseError> {
    let object: RawObject = read_json(body)?;
    let Some((_, current)) = object.0.iter().find(|(key, _)| key == field) else {
        return Err(ParseError::new(format!(
            "the request has no `{field}` to continue"
        )));
    };
    let mut written = existing(current)?;
    written.extend(items.iter().map(Value::to_string));
    let array = format!("[{}]", written.join(","));
    Ok(Bytes::from(object.write(&[(field, Some(array))])))
}

/// The items of a JSON array, each as its own bytes.
pub(crate) fn array_items(value: &RawValue) -> Result<Vec<String>, ParseError> {
    let items: Vec<&RawValue> = serde_json::from_str(value.get())
        .map_err(|_| ParseError::new("the conversation is not a JSON array"))?;
    Ok(items.iter().map(|item| item.get().to_owned()).collect())
}

/// A blocked call's arguments as the retry request replays them: the model's object, or `{}`
/// when what it wrote is not one (a call cut at `max_tokens`, text that is not JSON). Servers
/// that render the conversation through a chat template parse replayed arguments and refuse the
/// whole request when they cannot (llama-server answers 500), so the retry would never be
/// asked; the call's feedback says what was wrong with what the model wrote.
pub(crate) fn replayed_arguments(call: &ToolCall) -> Value {
    serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
}

/// [`replayed_arguments`] for the formats that carry arguments as text (Chat Completions,
/// Responses): the model's own bytes when they are an object.
pub(crate) fn replayed_arguments_text(call: &ToolCall) -> String {
    match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(_)) => call.arguments.clone(),
        _ => "{}".to_owned(),
    }
}

/// Why a call to a tool the provider runs itself (a built-in or server tool) cannot be retried:
/// no result of toolgate's can stand in for the provider's, so the retry is not asked and the
/// block stands as it is.
pub(crate) fn provider_runs(call: &ToolCall) -> ParseError {
    ParseError::new(format!(
        "'{}' is a built-in tool the provider runs: its call cannot be answered with feedback",
        call.name
    ))
}

/// A call's id for the feedback: the model's own, or one made from its position when the model
/// gave none (a legacy `function_call`), so the result still names the call it answers.
pub(crate) fn call_id(call: &ToolCall, position: usize) -> String {
    call.id
        .clone()
        .unwrap_or_else(|| format!("call_toolgate_{position}"))
}

/// A whole stream of Server-Sent Events with `event:` lines (Responses, Anthropic). Each event's
/// name is also its data's `type`; `numbered_as` names the key that carries the event's position
/// in the stream, for a format that numbers its events.
pub(crate) fn named_events(
    events: impl IntoIterator<Item = (&'static str, Value)>,
    numbered_as: Option<&str>,
) -> Bytes {
    let mut text = String::new();
    for (number, (name, mut data)) in events.into_iter().enumerate() {
        data["type"] = Value::from(name);
        if let Some(key) = numbered_as {
            data[key] = Value::from(number);
        }
        text.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    }
    Bytes::from(text)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A call cut at `max_tokens` is replayed with empty arguments in every format, so the
    /// retry request is one a templating server accepts; a whole call keeps its own.
    #[test]
    fn every_format_replays_arguments_that_are_not_an_object_as_empty() {
        let conversation = r#"[{"role":"user","content":"Weather in Paris and Oslo?"}]"#;
        let body = format!(
            r#"{{"model":"m","messages":{conversation},"input":{conversation},"contents":[{{"role":"user","parts":[{{"text":"Weather?"}}]}}]}}"#
        );
        let call = |id: &str, arguments: &str| ToolCall {
            choice: 0,
            id: Some(id.to_owned()),
            name: "get_weather".to_owned(),
            kind: crate::tool::ToolKind::Function,
            arguments: arguments.to_owned(),
        };
        let calls = [
            call("call_cut", r#"{"city": "Reykja"#),
            call("call_whole", r#"{"city":"Oslo"}"#),
        ];
        let feedback: Vec<CallFeedback<'_>> = calls
            .iter()
            .map(|call| CallFeedback {
                call,
                result: "blocked".to_owned(),
            })
            .collect();
        for format in crate::format::WireFormat::ALL {
            let retried = format
                .adapter()
                .retry_request(body.as_bytes(), &feedback)
                .expect("rewrites");
            let text = String::from_utf8_lossy(&retried);
            serde_json::from_str::<Value>(&text).expect("the retry request is JSON");
            assert!(
                !text.contains("Reykja"),
                "{format:?} replayed the cut arguments: {text}"
            );
            assert!(
                text.contains("Oslo"),
                "{format:?} lost the whole call's arguments: {text}"
            );
        }
    }

    /// Whole and streamed, every format's message answer reads as an answer without calls that
    /// ends normally (a chat stream with its `[DONE]`).
    #[test]
    fn the_message_answer_of_every_format_reads_as_text_without_calls() {
        let toolgate = json!({"violations": []});
        let notice = BlockNotice {
            request_id: "r1",
            model: "m",
            text: "blocked",
            toolgate: &toolgate,
            usage: None,
            created: 1,
        };
        for format in crate::format::WireFormat::ALL {
            let whole = format.block_message(&notice);
            let read = format.parse_response(&whole).expect("reads");
            assert!(read.calls.is_empty(), "{format:?}");
            let streamed = format.block_message_stream(&notice);
            let read = crate::stream::reassemble(format, [&streamed[..]]);
            assert!(
                read.response.calls.is_empty() && read.refused.is_none(),
                "{format:?}"
            );
        }
        let chat = crate::format::WireFormat::ChatCompletions.block_message_stream(&notice);
        assert!(chat.ends_with(b"data: [DONE]\n\n"));
    }

    #[test]
    fn usage_of_several_attempts_is_summed_leaf_by_leaf() {
        let mut total = json!({"prompt_tokens": 10, "completion_tokens": 5,
                               "prompt_tokens_details": {"cached_tokens": 2}});
        add_usage(
            &mut total,
            &json!({"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27,
                    "prompt_tokens_details": {"cached_tokens": 1}, "service_tier": "x"}),
        );
        assert_eq!(
            total,
            json!({"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 27,
                   "prompt_tokens_details": {"cached_tokens": 3}, "service_tier": "x"})
        );
    }

    #[test]
    fn the_earlier_usage_is_added_into_the_answer() {
        let body = br#"{"id":"x","usage":{"input_tokens":3,"output_tokens":1},"content":[]}"#;
        let added = with_added_usage(body, &json!({"input_tokens": 10, "output_tokens": 2}))
            .expect("reads")
            .expect("has usage");
        assert_eq!(
            &added[..],
            br#"{"id":"x","usage":{"input_tokens":13,"output_tokens":3},"content":[]}"#
        );
        assert_eq!(with_added_usage(br#"{"id":"x"}"#, &json!({})), Ok(None));
    }

    #[test]
    fn an_answer_without_usage_has_none() {
        assert_eq!(answer_usage(br#"{"choices":[]}"#), None);
        assert_eq!(answer_usage(br#"{"usage":null}"#), None);
        assert_eq!(
            answer_usage(br#"{"usage":{"input_tokens":3}}"#),
            Some(json!({"input_tokens": 3}))
        );
    }

    #[test]
    fn appending_keeps_every_other_field_and_the_old_items_bytes() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"n":1}"#;
        let appended = append_to_field(body, "messages", array_items, &[json!({"role": "tool"})])
            .expect("appends");
        assert_eq!(
            &appended[..],
            br#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool"}],"n":1}"#
        );
        assert!(append_to_field(body, "input", array_items, &[]).is_err());
    }

    #[test]
    fn answer_ids_keep_only_safe_characters() {
        let usage = json!({});
        let notice = BlockNotice {
            request_id: "ab/c\"d-1",
            model: "m",
            text: "t",
            toolgate: &usage,
            usage: None,
            created: 0,
        };
        assert_eq!(notice.id("msg_"), "msg_toolgate_abcd-1");
    }
}
