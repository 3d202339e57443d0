//! toolgate's own request object: a top-level `toolgate` field in which a client names the tool
//! groups it asks for, its workflow state, its conversation and the agent it speaks for, for
//! clients that cannot set the `x-toolgate-*` headers. The gateway removes both the object and
//! the headers before the request goes upstream.

use http::HeaderMap;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// The top-level key of the object.
pub const DIRECTIVES_FIELD: &str = "toolgate";

// The header equivalents of the object's fields.
/// The groups asked for, as `toolgate.group`.
pub const GROUP_HEADER: &str = "x-toolgate-group";
/// The workflow state, as `toolgate.state`.
pub const STATE_HEADER: &str = "x-toolgate-state";
/// The agent the request speaks for, as `toolgate.agent`.
pub const AGENT_HEADER: &str = "x-toolgate-agent";
/// The conversation whose workflow state toolgate keeps, as `toolgate.conversation`.
pub const CONVERSATION_HEADER: &str = "x-toolgate-conversation";
/// Every header of toolgate's own starts with this; none of them goes upstream.
pub const HEADER_PREFIX: &str = "x-toolgate-";

/// What the `toolgate` object asks for. Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Directives {
    /// One group or a list; `[]` asks for no tools, `"*"` for every group.
    #[serde(default, alias = "groups", deserialize_with = "one_or_many")]
    pub group: Option<Vec<String>>,
    /// The workflow state the conversation is in; none is the initial state.
    #[serde(default)]
    pub state: Option<String>,
    /// The agent the request speaks for (checked against its tenant's `agents`).
    #[serde(default)]
    pub agent: Option<String>,
    /// The conversation the request continues, when toolgate keeps its workflow state.
    #[serde(default)]
    pub conversation: Option<String>,
}

impl Directives {
    /// Reads the object, with an error that says which part is wrong. Only an object is one:
    /// serde would read an array field by field, and `null` would pass for "no directives".
    pub fn parse(raw: &RawValue) -> Result<Directives, String> {
        if !raw.get().trim_start().starts_with('{') {
            return Err(format!(
                "the request's `toolgate` value must be an object, not {}",
                json_kind(raw.get())
            ));
        }
        serde_json::from_str(raw.get())
            .map_err(|error| format!("the request's `toolgate` object is malformed: {error}"))
    }
}

/// What kind of JSON value `text` is, in words, for an error message.
fn json_kind(text: &str) -> &'static str {
    match text.trim_start().bytes().next() {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b'n') => "null",
        Some(b't' | b'f') => "a boolean",
        _ => "a number",
    }
}

/// Reads a request's `toolgate` field so that an explicit `null` is kept (as the text `null`)
/// rather than taken for an absent field, for [`Directives::parse`] to refuse.
pub(crate) fn present_even_if_null<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<&'a RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

/// Whether `name` is an `x-toolgate-*` header: toolgate's to read, never the upstream's.
pub fn is_own_header(name: &http::HeaderName) -> bool {
    name.as_str().starts_with(HEADER_PREFIX)
}

/// Removes every `x-toolgate-*` header.
pub fn strip_headers(headers: &mut HeaderMap) {
    let own: Vec<http::HeaderName> = headers
        .keys()
        .filter(|name| is_own_header(name))
        .cloned()
        .collect();
    for name in own {
        headers.remove(name);
    }
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<String>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(Some(
        match OneOrMany::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom("`group` must be a string or an array of strings")
        })? {
            OneOrMany::One(group) => vec![group],
            OneOrMany::Many(groups) => groups,
        },
    ))
}

/// Splits a header's comma-separated list of names, trimming blanks; `""` is the empty list.
pub fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether a group or state name is well-formed: 1–64 of `A-Za-z0-9_.:-`, or `*`. Anything else
/// in a header or the object is refused rather than guessed at, and the catalog refuses a name
/// outside this set: a header value could not carry it (or a comma would split it), so no
/// request could name it.
pub fn is_valid_name(name: &str) -> bool {
    name == "*"
        || (!name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':')))
}

/// Whether a conversation name (`x-toolgate-conversation`, `toolgate.conversation`) is
/// well-formed: 1–128 of `A-Za-z0-9_.:-`. It keys stored state, so nothing else is accepted.
pub fn is_valid_conversation(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// What a client reads when its conversation name is not one ([`is_valid_conversation`]).
pub fn invalid_conversation_message(name: &str) -> String {
    format!(
        "'{}' is not a valid conversation name (1-128 of A-Z a-z 0-9 _ . : -)",
        name.escape_debug()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Directives, String> {
        let raw: Box<RawValue> = serde_json::from_str(json).expect("json");
        Directives::parse(&raw)
    }

    #[test]
    fn a_group_is_one_name_or_a_list() {
        assert_eq!(
            parse(r#"{"group":"read"}"#).unwrap().group,
            Some(vec!["read".into()])
        );
        assert_eq!(
            parse(r#"{"groups":["a","b"],"state":"analysis"}"#).unwrap(),
            Directives {
                group: Some(vec!["a".into(), "b".into()]),
                state: Some("analysis".into()),
                agent: None,
                conversation: None,
            }
        );
        assert_eq!(parse(r#"{"group":[]}"#).unwrap().group, Some(vec![]));
        assert_eq!(parse("{}").unwrap().group, None);
    }

    #[test]
    fn a_malformed_object_is_an_error_not_a_default() {
        assert!(
            parse(r#"{"group":7}"#)
                .unwrap_err()
                .contains("string or an array")
        );
        assert!(
            parse(r#"{"grup":"admin"}"#)
                .unwrap_err()
                .contains("unknown field")
        );
        assert!(parse(r#""admin""#).is_err());
    }

    #[test]
    fn only_an_object_is_a_directives_object() {
        for (json, kind) in [
            (r#"["group","admin"]"#, "an array"),
            (r#""admin""#, "a string"),
            ("7", "a number"),
            ("null", "null"),
        ] {
            let error = parse(json).unwrap_err();
            assert!(
                error.contains(&format!("must be an object, not {kind}")),
                "{error}"
            );
        }
        assert_eq!(
            parse(r#"{"conversation":"c-1"}"#)
                .unwrap()
                .conversation
                .as_deref(),
            Some("c-1")
        );
    }

    #[test]
    fn toolgate_headers_are_stripped_and_others_kept() {
        let mut headers = HeaderMap::new();
        headers.insert(GROUP_HEADER, http::HeaderValue::from_static("admin"));
        headers.insert(CONVERSATION_HEADER, http::HeaderValue::from_static("c"));
        headers.insert("x-toolgate-anything", http::HeaderValue::from_static("1"));
        headers.insert("x-tool", http::HeaderValue::from_static("kept"));
        strip_headers(&mut headers);
        assert_eq!(headers.len(), 1);
        assert!(headers.contains_key("x-tool"));
    }

    #[test]
    fn names_are_checked() {
        assert!(is_valid_name("read-only"));
        assert!(is_valid_name("*"));
        assert!(!is_valid_name("a b"));
        assert!(!is_valid_name("admin\u{0}"));
        assert!(!is_valid_name(""));
        assert_eq!(split_list(" a, b ,,"), vec!["a", "b"]);
    }
}
