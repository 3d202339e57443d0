//! JSON Pointers into a call's arguments (RFC 6901, plus `*` for every member or element), and
//! the walk that visits what they address. A pointer that meets a string before its end looks
//! inside the string when it holds a JSON object or array (models often send nested objects as
//! JSON text); a string it cannot look into is reported as opaque, so a rule can refuse or
//! redact what it cannot see rather than let it pass unread.

use serde_json::Value;

/// One step of a pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    /// `*`: every member of an object, every element of an array.
    Any,
}

/// A parsed pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pointer {
    pub text: String,
    pub segments: Vec<Segment>,
}

impl Pointer {
    /// `""` (the whole arguments) or `/a/b/0`, with `~0` for `~` and `~1` for `/`.
    pub fn parse(text: &str) -> Result<Pointer, String> {
        if text.is_empty() {
            return Ok(Pointer {
                text: String::new(),
                segments: Vec::new(),
            });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!(
                "'{text}' is not a JSON Pointer: it must be empty or start with '/'"
            ));
        };
        let mut segments = Vec::new();
        for raw in rest.split('/') {
            if raw == "*" {
                segments.push(Segment::Any);
                continue;
            }
            let mut key = String::with_capacity(raw.len());
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                if c != '~' {
                    key.push(c);
                    continue;
                }
                match chars.next() {
                    Some('0') => key.push('~'),
                    Some('1') => key.push('/'),
                    _ => {
                        return Err(format!(
                            "'{text}' is not a JSON Pointer: '~' must be followed by 0 or 1"
                        ));
                    }
                }
            }
            segments.push(Segment::Key(key));
        }
        Ok(Pointer {
            text: text.to_owned(),
            segments,
        })
    }

    /// Whether `self` addresses something strictly inside what `other` addresses.
    pub fn is_inside(&self, other: &Pointer) -> bool {
        self.segments.len() > other.segments.len()
            && other
                .segments
                .iter()
                .zip(&self.segments)
                .all(|(outer, inner)| {
                    outer == inner || *outer == Segment::Any || *inner == Segment::Any
                })
    }
}

/// What a pointer reached.
pub enum Spot<'a> {
    /// The value it addresses.
    Value(&'a mut Value),
    /// A string in its way that holds no JSON object or array: what it addresses is unreadable.
    Opaque(&'a mut Value),
}

/// Visits every place `segments` reach inside `value`; `visit` gets the concrete pointer and
/// the spot, and says whether it changed the value. A string that held JSON and was changed
/// inside is written back as compact JSON text. Returns whether anything changed.
pub fn walk(
    value: &mut Value,
    segments: &[Segment],
    at: &str,
    visit: &mut dyn FnMut(&str, Spot<'_>) -> bool,
) -> bool {
    let Some((first, rest)) = segments.split_first() else {
        return visit(at, Spot::Value(value));
    };
    match value {
        Value::Object(members) => {
            let mut changed = false;
            for (key, child) in members.iter_mut() {
                let wanted = match first {
                    Segment::Any => true,
                    Segment::Key(name) => name == key,
                };
                if wanted {
                    let path = format!("{at}/{}", escape(key));
                    changed |= walk(child, rest, &path, visit);
                }
            }
            changed
        }
        Value::Array(items) => {
            let mut changed = false;
            for (index, child) in items.iter_mut().enumerate() {
                let wanted = match first {
                    Segment::Any => true,
                    Segment::Key(name) => name.parse::<usize>().ok() == Some(index),
                };
                if wanted {
                    changed |= walk(child, rest, &format!("{at}/{index}"), visit);
                }
            }
            changed
        }
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(mut inner) if inner.is_object() || inner.is_array() => {
                let changed = walk(&mut inner, segments, at, visit);
                if changed {
                    *value = Value::String(inner.to_string());
                }
                changed
            }
            _ => visit(at, Spot::Opaque(value)),
        },
        // Nothing hides inside a number, a boolean or null: the addressed value is absent.
        _ => false,
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reached(value: &mut Value, pointer: &str) -> Vec<(String, bool)> {
        let pointer = Pointer::parse(pointer).unwrap();
        let mut seen = Vec::new();
        walk(value, &pointer.segments, "", &mut |at, spot| {
            seen.push((at.to_owned(), matches!(spot, Spot::Opaque(_))));
            false
        });
        seen
    }

    #[test]
    fn pointers_parse_with_escapes_and_wildcards() {
        let pointer = Pointer::parse("/a~1b/*/c~0").unwrap();
        assert_eq!(
            pointer.segments,
            [
                Segment::Key("a/b".into()),
                Segment::Any,
                Segment::Key("c~".into())
            ]
        );
        assert!(Pointer::parse("a").is_err());
        assert!(Pointer::parse("/a~2").is_err());
        assert!(
            Pointer::parse("/a/b")
                .unwrap()
                .is_inside(&Pointer::parse("/a").unwrap())
        );
        assert!(
            !Pointer::parse("/a")
                .unwrap()
                .is_inside(&Pointer::parse("/a").unwrap())
        );
    }

    #[test]
    fn the_walk_reaches_members_elements_and_json_inside_strings() {
        let mut value =
            json!({"to": ["a", "b"], "config": "{\"password\":\"x\"}", "n": 5, "s": "plain"});
        assert_eq!(
            reached(&mut value, "/to/*"),
            [("/to/0".into(), false), ("/to/1".into(), false)]
        );
        assert_eq!(
            reached(&mut value, "/config/password"),
            [("/config/password".into(), false)]
        );
        assert_eq!(reached(&mut value, "/s/inner"), [("/s".into(), true)]);
        assert!(reached(&mut value, "/n/inner").is_empty());
        assert!(reached(&mut value, "/missing").is_empty());
    }
}
