//! toolgate's own request object: a top-level `toolgate` field in which a client names the tool
//! groups it asks for, its workflow state and the agent it speaks for, for clients that cannot
//! set the `x-toolgate-*` headers. The gateway removes it before the request goes upstream.

use serde::Deserialize;
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
}

impl Directives {
    /// Reads the object, with an error that says which part is wrong.
    pub fn parse(raw: &RawValue) -> Result<Directives, String> {
        serde_json::from_str(raw.get())
            .map_err(|error| format!("the request's `toolgate` object is malformed: {error}"))
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
/// in a header or the object is refused rather than guessed at.
pub fn is_valid_name(name: &str) -> bool {
    name == "*"
        || (!name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':')))
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
                agent: None
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
    fn names_are_checked() {
        assert!(is_valid_name("read-only"));
        assert!(is_valid_name("*"));
        assert!(!is_valid_name("a b"));
        assert!(!is_valid_name("admin\u{0}"));
        assert!(!is_valid_name(""));
        assert_eq!(split_list(" a, b ,,"), vec!["a", "b"]);
    }
}
