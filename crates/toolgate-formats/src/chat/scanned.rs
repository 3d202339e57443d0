//! The usual Chat Completions answer read in one pass by the scan's cursor: the wire structs
//! serde_json fills (`answer_wire.rs`), filled without serde's field-by-field dispatch, since every
//! guarded exchange reads one. It declines whatever it cannot fill exactly as serde_json would
//! (a key written with escapes, a repeated field, a value of another type, a struct written
//! as an array, a `\u` surrogate in a string it keeps), and the caller reads that answer with
//! serde_json. A property test here and the `response_adapters` fuzz target hold the two
//! readings equal wherever this one reads.

use crate::answer::Noted;
use crate::scan::{Cursor, string_text};

use super::answer_wire::{
    ChoiceWire, CustomCallWire, FunctionCallWire, MessageWire, ResponseWire, ToolCallWire,
};

/// The answer `body` as serde_json would read it into [`ResponseWire`], or `None`.
pub(super) fn read(body: &[u8]) -> Option<ResponseWire<'_>> {
    // serde_json reads a UTF-8 body as text: every string it keeps is then valid text.
    let reader = Reader {
        text: std::str::from_utf8(body).ok()?,
    };
    let mut cursor = Cursor::new(body);
    let (mut choices, mut output, mut content, mut candidates) = (None, None, None, None);
    cursor.object(|key, cursor| match key {
        b"choices" => first(&mut choices, array_of(cursor, |c| reader.choice(c))?),
        b"output" => first(&mut output, noted(cursor)?),
        b"content" => first(&mut content, noted(cursor)?),
        b"candidates" => first(&mut candidates, noted(cursor)?),
        _ => skip(cursor),
    })?;
    cursor.finish()?;
    Some(ResponseWire {
        choices: choices?,
        output: output.unwrap_or_default(),
        content: content.unwrap_or_default(),
        candidates: candidates.unwrap_or_default(),
    })
}

/// A field's value, unless the field came before: serde_json refuses a repeated field.
fn first<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    match slot {
        Some(_) => None,
        None => {
            *slot = Some(value);
            Some(())
        }
    }
}

fn skip(cursor: &mut Cursor<'_>) -> Option<()> {
    cursor.skip().map(|_| ())
}

/// An array, each of its values read by `item`.
fn array_of<'a, T>(
    cursor: &mut Cursor<'a>,
    mut item: impl FnMut(&mut Cursor<'a>) -> Option<T>,
) -> Option<Vec<T>> {
    let mut items = Vec::new();
    cursor.array(|cursor| {
        items.push(item(cursor)?);
        Some(())
    })?;
    Some(items)
}

/// Any value, noted.
fn noted(cursor: &mut Cursor<'_>) -> Option<Noted> {
    skip(cursor).map(|()| Noted(true))
}

/// `null` as `None`, as serde_json reads an `Option`; any other value by `read`.
fn optional<'a, T>(
    cursor: &mut Cursor<'a>,
    read: impl FnOnce(&mut Cursor<'a>) -> Option<T>,
) -> Option<Option<T>> {
    if cursor.null() {
        return Some(None);
    }
    read(cursor).map(Some)
}

/// Reads the values of one body, whose text it holds.
#[derive(Clone, Copy)]
struct Reader<'a> {
    text: &'a str,
}

impl<'a> Reader<'a> {
    /// A value written as it is: serde_json's `RawValue`.
    fn raw(self, cursor: &mut Cursor<'a>) -> Option<&'a str> {
        self.text.get(cursor.skip()?)
    }

    /// A string's text; `None` for any other value.
    fn string(self, cursor: &mut Cursor<'a>) -> Option<String> {
        string_text(self.text.get(cursor.string()?)?)
    }

    /// A `u32` as serde_json reads one from a number: digits only (the scan has refused a
    /// leading zero), in range.
    fn index(self, cursor: &mut Cursor<'a>) -> Option<u32> {
        let digits = self.raw(cursor)?;
        if !digits.bytes().all(|byte| byte.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    fn choice(self, cursor: &mut Cursor<'a>) -> Option<ChoiceWire<'a>> {
        let (mut index, mut message) = (None, None);
        cursor.object(|key, cursor| match key {
            b"index" => first(&mut index, optional(cursor, |c| self.index(c))?),
            b"message" => first(&mut message, optional(cursor, |c| self.message(c))?),
            _ => skip(cursor),
        })?;
        Some(ChoiceWire {
            index: index.flatten(),
            message: message.flatten(),
        })
    }

    fn message(self, cursor: &mut Cursor<'a>) -> Option<MessageWire<'a>> {
        let (mut tool_calls, mut function_call) = (None, None);
        let (mut reasoning_content, mut reasoning) = (None, None);
        let calls = |cursor: &mut Cursor<'a>| array_of(cursor, |c| self.tool_call(c));
        cursor.object(|key, cursor| match key {
            b"tool_calls" => first(&mut tool_calls, optional(cursor, calls)?),
            b"function_call" => first(&mut function_call, optional(cursor, |c| self.function(c))?),
            b"reasoning_content" => first(
                &mut reasoning_content,
                optional(cursor, |c| self.string(c))?,
            ),
            b"reasoning" => first(&mut reasoning, optional(cursor, |c| self.string(c))?),
            _ => skip(cursor),
        })?;
        Some(MessageWire {
            tool_calls: tool_calls.flatten(),
            function_call: function_call.flatten(),
            reasoning_content: reasoning_content.flatten(),
            reasoning: reasoning.flatten(),
        })
    }

    fn tool_call(self, cursor: &mut Cursor<'a>) -> Option<ToolCallWire<'a>> {
        let (mut id, mut kind, mut function, mut custom) = (None, None, None, None);
        cursor.object(|key, cursor| match key {
            b"id" => first(&mut id, optional(cursor, |c| self.string(c))?),
            b"type" => first(&mut kind, optional(cursor, |c| self.string(c))?),
            b"function" => first(&mut function, optional(cursor, |c| self.function(c))?),
            b"custom" => first(&mut custom, optional(cursor, |c| self.custom(c))?),
            _ => skip(cursor),
        })?;
        Some(ToolCallWire {
            id: id.flatten(),
            kind: kind.flatten(),
            function: function.flatten(),
            custom: custom.flatten(),
        })
    }

    fn function(self, cursor: &mut Cursor<'a>) -> Option<FunctionCallWire<'a>> {
        let (mut name, mut arguments) = (None, None);
        cursor.object(|key, cursor| match key {
            b"name" => first(&mut name, self.string(cursor)?),
            b"arguments" => first(&mut arguments, optional(cursor, |c| self.raw(c))?),
            _ => skip(cursor),
        })?;
        Some(FunctionCallWire {
            // serde_json refuses a function without its name.
            name: name?,
            arguments: arguments.flatten(),
        })
    }

    fn custom(self, cursor: &mut Cursor<'a>) -> Option<CustomCallWire> {
        let (mut name, mut input) = (None, None);
        cursor.object(|key, cursor| match key {
            b"name" => first(&mut name, self.string(cursor)?),
            b"input" => first(&mut input, optional(cursor, |c| self.string(c))?),
            _ => skip(cursor),
        })?;
        Some(CustomCallWire {
            name: name?,
            input: input.flatten(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::message::{disagreement, read_response};
    use super::*;

    use proptest::prelude::*;

    /// Values of every type and a few of the wrong shape, as written.
    fn junk() -> BoxedStrategy<String> {
        prop::sample::select(vec![
            "null",
            "true",
            "0",
            "7",
            "-1",
            "1.0",
            "1e2",
            "-0",
            "4294967296",
            "\"x\"",
            "\"caf\\u00e9\"",
            "[]",
            "{}",
            "[[1],{\"a\":null}]",
            "{\"name\":\"n\"}",
            "[\"n\",\"{}\"]",
        ])
        .prop_map(str::to_owned)
        .boxed()
    }

    fn string() -> BoxedStrategy<String> {
        prop_oneof![
            3 => "[a-z_]{1,12}".prop_map(|name| format!("\"{name}\"")),
            1 => prop::sample::select(vec![
                r#""id_\"1\"""#, r#""caf\u00e9""#, r#""\ud83d\ude00""#, r#""\ud800""#,
                r#""tab\tx""#, r#""""#, r#""a\/b""#, "\"é😀\"",
            ])
            .prop_map(str::to_owned),
        ]
        .boxed()
    }

    fn arguments() -> BoxedStrategy<String> {
        prop::sample::select(vec![
            r#""{\"city\":\"Paris\",\"days\":3}""#,
            r#"{"city":"Paris"}"#,
            r#""""#,
            "[1,2]",
            r#""{\"q\":\"\\u00e9\\n\"}""#,
            r#""\ud83d\ude00""#,
        ])
        .prop_map(str::to_owned)
        .boxed()
    }

    fn either(usual: BoxedStrategy<String>) -> BoxedStrategy<String> {
        prop_oneof![4 => usual, 1 => junk()].boxed()
    }

    fn array(item: BoxedStrategy<String>) -> BoxedStrategy<String> {
        prop::collection::vec(item, 0..3)
            .prop_map(|items| format!("[{}]", items.join(",")))
            .boxed()
    }

    /// An object of some of `members` (each absent, written, repeated, or its key written with
    /// an escape), with members no reader knows, in any order, spaced or not.
    fn object(members: Vec<(&'static str, BoxedStrategy<String>)>) -> BoxedStrategy<String> {
        let picks: Vec<_> = members
            .into_iter()
            .map(|(key, value)| {
                (0u8..8, value).prop_map(move |(how, value)| match how {
                    0 => vec![],
                    1 => vec![format!("\"{key}\":{value}"); 2],
                    2 => vec![format!(
                        "\"\\u{:04x}{}\":{value}",
                        key.as_bytes()[0],
                        &key[1..]
                    )],
                    _ => vec![format!("\"{key}\":{value}")],
                })
            })
            .collect();
        let others = prop::collection::vec(
            ("[a-z]{1,8}", junk()).prop_map(|(key, value)| format!("\"{key}\":{value}")),
            0..2,
        );
        (picks, others)
            .prop_map(|(picks, others)| {
                picks
                    .into_iter()
                    .flatten()
                    .chain(others)
                    .collect::<Vec<_>>()
            })
            .prop_shuffle()
            .prop_flat_map(|members| (Just(members), any::<bool>()))
            .prop_map(|(members, spaced)| {
                let comma = if spaced { " ,\n " } else { "," };
                format!("{{{}}}", members.join(comma))
            })
            .boxed()
    }

    fn function() -> BoxedStrategy<String> {
        object(vec![
            ("name", either(string())),
            ("arguments", either(arguments())),
        ])
    }

    fn answer() -> BoxedStrategy<String> {
        let custom = object(vec![
            ("name", either(string())),
            ("input", either(string())),
        ]);
        let kind = prop::sample::select(vec!["\"function\"", "\"custom\"", "\"other\""])
            .prop_map(str::to_owned)
            .boxed();
        let call = object(vec![
            ("id", either(string())),
            ("type", either(kind)),
            ("function", either(function())),
            ("custom", either(custom)),
        ]);
        let message = object(vec![
            ("role", Just("\"assistant\"".to_owned()).boxed()),
            ("content", either(string())),
            ("tool_calls", either(array(call))),
            ("function_call", either(function())),
            ("reasoning_content", either(string())),
            ("reasoning", either(string())),
        ]);
        let index = prop::sample::select(vec!["0", "1", "4294967295", "4294967296", "-1", "1.0"])
            .prop_map(str::to_owned)
            .boxed();
        let choice = object(vec![
            ("index", either(index)),
            ("message", either(message)),
            ("finish_reason", either(string())),
        ]);
        object(vec![
            ("id", string()),
            ("choices", either(array(choice))),
            ("output", junk()),
            ("content", junk()),
            ("candidates", junk()),
        ])
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Wherever the scan reads an answer, its reading is serde_json's, error or calls;
        /// and the answer cut short or with a byte changed too.
        #[test]
        fn the_scan_reads_an_answer_as_serde_json_does(
            answer in answer(),
            cut in any::<prop::sample::Index>(),
            damage in 0u8..4,
            byte in any::<u8>(),
        ) {
            let mut body = answer.into_bytes();
            let at = cut.index(body.len());
            match damage {
                0 => body.truncate(at),
                1 => body[at] = byte,
                _ => {}
            }
            prop_assert_eq!(disagreement(&body), None, "{}", String::from_utf8_lossy(&body));
        }

        /// The usual answer, as servers write it, is read by the scan.
        #[test]
        fn the_usual_answer_is_read_by_the_scan(
            calls in prop::collection::vec(("[a-z_]{1,20}", "[a-z \"\\\\é]{0,40}"), 0..4),
            reasoning in proptest::option::of("[a-z \"]{0,30}"),
        ) {
            let tool_calls: Vec<serde_json::Value> = calls
                .iter()
                .enumerate()
                .map(|(at, (name, text))| serde_json::json!({
                    "id": format!("call_{at}"), "type": "function",
                    "function": {"name": name, "arguments": serde_json::json!({"q": text}).to_string()},
                }))
                .collect();
            let answer = serde_json::json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                    "reasoning_content": reasoning, "refusal": null, "tool_calls": tool_calls},
                    "logprobs": null, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
            })
            .to_string();
            prop_assert!(read(answer.as_bytes()).is_some(), "{}", answer);
            let by_scan = read_response(answer.as_bytes()).map(|reading| reading.response);
            prop_assert_eq!(by_scan.map(|response| response.calls.len()).ok(), Some(calls.len()));
        }
    }

    #[test]
    fn what_the_scan_leaves_to_serde_json() {
        let declined: &[&[u8]] = &[
            br#"{"choices":[],"choices":[]}"#,
            br#"{"ch\u006fices":[]}"#,
            br#"{"choices":[[0,{"tool_calls":[]}]]}"#,
            br#"{"choices":[{"index":1.0}]}"#,
            br#"{"choices":[{"message":{"tool_calls":[{"function":{"arguments":"{}"}}]}}]}"#,
            br#"{"choices":[{"message":{"reasoning":"\ud800"}}]}"#,
            br#"{"choices":null}"#,
            br#"{}"#,
            b"{\"choices\":[]} x",
            b"{\"choices\":[\"\xff\"]}",
        ];
        for body in declined {
            assert!(read(body).is_none(), "{}", String::from_utf8_lossy(body));
        }
        let read_here: &[&str] = &[
            r#"{"choices":[]}"#,
            r#" {"choices":[{"index":null,"message":null}],"output":null} "#,
            r#"{"choices":[{"message":{"tool_calls":null,"function_call":{"name":"f","arguments":null}}}]}"#,
        ];
        for body in read_here {
            assert!(read(body.as_bytes()).is_some(), "{body}");
            assert_eq!(disagreement(body.as_bytes()), None);
        }
    }
}
