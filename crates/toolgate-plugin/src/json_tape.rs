//! A call's arguments as the schema validator reads them, without building a
//! `serde_json::Value`: serde_json reads the text (so the grammar, the escapes, the numbers and
//! the nesting limit are its own) into one flat list of entries that borrow the text's strings.
//!
//! Building a `Value` costs an allocation per string and per object member and a tree to drop;
//! on a guarded exchange that was the largest part of checking a call. The tape answers only
//! "valid or not": a call found invalid is read again into a `Value` for its error details, so
//! what a 403 says is unchanged. An object with a repeated member name is not taped at all
//! (serde_json keeps the last one, a reading the tape does not copy): it goes the `Value` way.

use std::borrow::Cow;
use std::fmt;

use jsonschema::JsonType;
use jsonschema::json::{Array, Json, Node, NodeIdentity, Object, cmp};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The representation `jsonschema::options_for::<Tape>()` builds validators for.
pub struct Tape;

/// One JSON text, read: its values in document order, each container followed by what it holds.
pub struct Taped<'t> {
    entries: Vec<Entry<'t>>,
}

/// A value on the tape. An object holds its members as pairs: a `Name`, then the member's value.
enum Entry<'t> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'t, str>),
    Name(Cow<'t, str>),
    /// `end` is the position after the container's last descendant; `len` counts its elements
    /// (an object's: its members).
    Array {
        len: u32,
        end: u32,
    },
    Object {
        len: u32,
        end: u32,
    },
}

impl<'t> Taped<'t> {
    /// The text read onto a tape, or `None` where it is not one JSON value (serde_json's
    /// error is then the one to report) or an object repeats a member name.
    pub fn read(text: &'t str) -> Option<Taped<'t>> {
        // Most arguments hold a few short members; one entry per ~8 bytes is rarely outgrown.
        let mut entries = Vec::with_capacity(text.len() / 8 + 2);
        let mut reader = serde_json::Deserializer::from_str(text);
        Appender(&mut entries).deserialize(&mut reader).ok()?;
        reader.end().ok()?;
        Some(Taped { entries })
    }

    /// The document's root value.
    pub fn root(&self) -> TapeNode<'_> {
        TapeNode {
            entries: &self.entries,
            at: 0,
        }
    }
}

/// Appends the value serde_json reads next to the tape.
struct Appender<'v, 't>(&'v mut Vec<Entry<'t>>);

/// Why a text was not taped: the only error the tape adds to serde_json's own.
const REPEATED_NAME: &str = "an object repeats a member name";

impl<'de, 'v> DeserializeSeed<'de> for Appender<'v, 'de> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, reader: D) -> Result<(), D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de, 'v> Visitor<'de> for Appender<'v, 'de> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.push(Entry::Null);
        Ok(())
    }

    fn visit_bool<E>(self, value: bool) -> Result<(), E> {
        self.0.push(Entry::Bool(value));
        Ok(())
    }

    // The three number visitors make the `Number` serde_json's own `Value` makes.
    fn visit_u64<E>(self, value: u64) -> Result<(), E> {
        self.0.push(Entry::Number(value.into()));
        Ok(())
    }

    fn visit_i64<E>(self, value: i64) -> Result<(), E> {
        self.0.push(Entry::Number(value.into()));
        Ok(())
    }

    fn visit_f64<E>(self, value: f64) -> Result<(), E> {
        self.0
            .push(Number::from_f64(value).map_or(Entry::Null, Entry::Number));
        Ok(())
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<(), E> {
        self.0.push(Entry::String(Cow::Borrowed(value)));
        Ok(())
    }

    fn visit_str<E>(self, value: &str) -> Result<(), E> {
        self.0.push(Entry::String(Cow::Owned(value.to_owned())));
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut elements: A) -> Result<(), A::Error> {
        let start = self.0.len();
        self.0.push(Entry::Array { len: 0, end: 0 });
        let mut len = 0u32;
        while elements.next_element_seed(Appender(self.0))?.is_some() {
            len += 1;
        }
        let end = position(self.0.len());
        self.0[start] = Entry::Array { len, end };
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<(), A::Error> {
        let start = self.0.len();
        self.0.push(Entry::Object { len: 0, end: 0 });
        // Where the first names are, each compared with those before it as it is read.
        let mut names = [0u32; PAIRWISE_UP_TO];
        let mut len = 0u32;
        loop {
            let at = self.0.len();
            if members.next_key_seed(NameAppender(self.0))?.is_none() {
                break;
            }
            if let Some(slot) = names.get_mut(len as usize) {
                *slot = position(at);
                let earlier = &names[..len as usize];
                if earlier
                    .iter()
                    .any(|&other| same_name(self.0, other as usize, at))
                {
                    return Err(de::Error::custom(REPEATED_NAME));
                }
            }
            members.next_value_seed(Appender(self.0))?;
            len += 1;
        }
        let end = position(self.0.len());
        self.0[start] = Entry::Object { len, end };
        if len as usize > PAIRWISE_UP_TO && repeats_a_name(self.0, start) {
            return Err(de::Error::custom(REPEATED_NAME));
        }
        Ok(())
    }
}

/// Up to this many members, an object's names are compared pairwise as they are read; past
/// it, sorted once the object is read, so a hostile object cannot make the check quadratic.
const PAIRWISE_UP_TO: usize = 16;

/// Whether the names at two positions of the tape are the same.
fn same_name(entries: &[Entry<'_>], first: usize, second: usize) -> bool {
    match (entries.get(first), entries.get(second)) {
        (Some(Entry::Name(first)), Some(Entry::Name(second))) => first == second,
        _ => false,
    }
}

/// Whether two members of the object at `start` share a name.
fn repeats_a_name(entries: &[Entry<'_>], start: usize) -> bool {
    let object = TapeObject(TapeNode { entries, at: start });
    let mut sorted: Vec<&str> = object.members().map(|(name, _)| name).collect();
    sorted.sort_unstable();
    sorted.windows(2).any(|pair| pair[0] == pair[1])
}

/// A position on the tape as a container stores it. serde_json's nesting limit and the
/// arguments' size keep a tape far below `u32::MAX` entries; saturating keeps an absurd one
/// from wrapping.
fn position(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}

/// Appends an object member's name.
struct NameAppender<'v, 't>(&'v mut Vec<Entry<'t>>);

impl<'de, 'v> DeserializeSeed<'de> for NameAppender<'v, 'de> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, reader: D) -> Result<(), D::Error> {
        reader.deserialize_str(self)
    }
}

impl<'de, 'v> Visitor<'de> for NameAppender<'v, 'de> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a member name")
    }

    fn visit_borrowed_str<E>(self, value: &'de str) -> Result<(), E> {
        self.0.push(Entry::Name(Cow::Borrowed(value)));
        Ok(())
    }

    fn visit_str<E>(self, value: &str) -> Result<(), E> {
        self.0.push(Entry::Name(Cow::Owned(value.to_owned())));
        Ok(())
    }
}

/// A value on a tape: the tape and the value's position.
#[derive(Clone, Copy)]
pub struct TapeNode<'a> {
    entries: &'a [Entry<'a>],
    at: usize,
}

impl<'a> TapeNode<'a> {
    fn entry(&self) -> Option<&'a Entry<'a>> {
        self.entries.get(self.at)
    }

    /// The position after this value and everything it holds.
    fn end(&self) -> usize {
        match self.entry() {
            Some(Entry::Array { end, .. } | Entry::Object { end, .. }) => *end as usize,
            _ => self.at + 1,
        }
    }

    fn len(&self) -> usize {
        match self.entry() {
            Some(Entry::Array { len, .. } | Entry::Object { len, .. }) => *len as usize,
            _ => 0,
        }
    }
}

impl Json for Tape {
    type Node<'a> = TapeNode<'a>;
    type PreparedKey = Box<str>;
    type StringBuffer = ();

    // A lookup walks the members, so a pass over them never costs more than the lookups it
    // replaces. Not `usize::MAX`: the validator multiplies it by the names it looks up.
    const KEYS_PER_LOOKUP: usize = 1 << 20;

    fn prepare_key(key: &str) -> Box<str> {
        key.into()
    }

    fn with_string_node<T>(_: &mut (), string: &str, f: impl FnOnce(TapeNode<'_>) -> T) -> T {
        let entries = [Entry::String(Cow::Borrowed(string))];
        f(TapeNode {
            entries: &entries,
            at: 0,
        })
    }
}

impl<'a> Node<'a, Tape> for TapeNode<'a> {
    type Object = TapeObject<'a>;
    type Array = TapeArray<'a>;
    type Number = &'a Number;

    fn as_object(&self) -> Option<TapeObject<'a>> {
        match self.entry() {
            Some(Entry::Object { .. }) => Some(TapeObject(*self)),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<TapeArray<'a>> {
        match self.entry() {
            Some(Entry::Array { .. }) => Some(TapeArray(*self)),
            _ => None,
        }
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self.entry() {
            Some(Entry::String(text) | Entry::Name(text)) => Some(Cow::Borrowed(text.as_ref())),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<&'a Number> {
        match self.entry() {
            Some(Entry::Number(number)) => Some(number),
            _ => None,
        }
    }

    fn as_boolean(&self) -> Option<bool> {
        match self.entry() {
            Some(Entry::Bool(value)) => Some(*value),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self.entry(), Some(Entry::Null))
    }

    fn json_type(&self) -> JsonType {
        match self.entry() {
            Some(Entry::Bool(_)) => JsonType::Boolean,
            Some(Entry::Number(_)) => JsonType::Number,
            Some(Entry::String(_) | Entry::Name(_)) => JsonType::String,
            Some(Entry::Array { .. }) => JsonType::Array,
            Some(Entry::Object { .. }) => JsonType::Object,
            Some(Entry::Null) | None => JsonType::Null,
        }
    }

    // `enum` and `const` compare scalars on every call; only a container builds its `Value`.
    fn equals_value(&self, expected: &Value) -> bool {
        match (self.entry(), expected) {
            (Some(Entry::Null), Value::Null) => true,
            (Some(Entry::Bool(value)), Value::Bool(other)) => value == other,
            (Some(Entry::String(text) | Entry::Name(text)), Value::String(other)) => text == other,
            (Some(Entry::Number(number)), Value::Number(other)) => {
                cmp::equal_numbers(&number, other)
            }
            (Some(Entry::Array { .. } | Entry::Object { .. }), _) => {
                cmp::equal(&self.to_value(), expected)
            }
            _ => false,
        }
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(value_at(*self))
    }

    fn identity(&self) -> Option<NodeIdentity> {
        self.entry()
            .map(|entry| NodeIdentity::new(std::ptr::from_ref(entry) as usize))
    }
}

/// The `Value` serde_json would have read for a node (for error details and comparisons).
fn value_at(node: TapeNode<'_>) -> Value {
    match node.entry() {
        None | Some(Entry::Null) => Value::Null,
        Some(Entry::Bool(value)) => Value::Bool(*value),
        Some(Entry::Number(number)) => Value::Number(number.clone()),
        Some(Entry::String(text) | Entry::Name(text)) => Value::String(text.clone().into_owned()),
        Some(Entry::Array { .. }) => {
            Value::Array(TapeArray(node).elements().map(value_at).collect())
        }
        Some(Entry::Object { .. }) => {
            let members: Map<String, Value> = TapeObject(node)
                .members()
                .map(|(name, value)| (name.to_owned(), value_at(value)))
                .collect();
            Value::Object(members)
        }
    }
}

/// An object on a tape.
#[derive(Clone, Copy)]
pub struct TapeObject<'a>(TapeNode<'a>);

impl<'a> Object<'a, Tape> for TapeObject<'a> {
    type Node = TapeNode<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        self.0.len()
    }

    fn get(&self, key: &Box<str>) -> Option<TapeNode<'a>> {
        self.members()
            .find(|(name, _)| *name == key.as_ref())
            .map(|(_, value)| value)
    }

    fn members(&self) -> Members<'a> {
        Members(Children::of(self.0))
    }
}

/// A walk over what a container holds, in the order the text has it: an array's elements, or
/// an object's names each followed by its value.
struct Children<'a> {
    entries: &'a [Entry<'a>],
    next: usize,
    end: usize,
}

impl<'a> Children<'a> {
    fn of(container: TapeNode<'a>) -> Self {
        Children {
            entries: container.entries,
            next: container.at + 1,
            end: container.end(),
        }
    }

    /// The entry the walk is at; none once it is past the container's end.
    fn peek(&self) -> Option<&'a Entry<'a>> {
        if self.at_end() {
            return None;
        }
        self.entries.get(self.next)
    }

    fn at_end(&self) -> bool {
        self.next >= self.end
    }

    /// The node at `at` (the walk's position, or just after a name), and the walk moved past it.
    fn step_over(&mut self, at: usize) -> TapeNode<'a> {
        let node = TapeNode {
            entries: self.entries,
            at,
        };
        self.next = node.end();
        node
    }
}

/// An object's members, in the order the text has them.
pub struct Members<'a>(Children<'a>);

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, TapeNode<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        let Entry::Name(name) = self.0.peek()? else {
            return None;
        };
        let value = self.0.step_over(self.0.next + 1);
        Some((name.as_ref(), value))
    }
}

/// An array on a tape.
#[derive(Clone, Copy)]
pub struct TapeArray<'a>(TapeNode<'a>);

impl<'a> Array<'a, Tape> for TapeArray<'a> {
    type Node = TapeNode<'a>;
    type ElementsIter = Elements<'a>;

    fn len(&self) -> usize {
        self.0.len()
    }

    fn elements(&self) -> Elements<'a> {
        Elements(Children::of(self.0))
    }
}

/// An array's elements, in order.
pub struct Elements<'a>(Children<'a>);

impl<'a> Iterator for Elements<'a> {
    type Item = TapeNode<'a>;

    fn next(&mut self) -> Option<TapeNode<'a>> {
        if self.0.at_end() {
            return None;
        }
        Some(self.0.step_over(self.0.next))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// A JSON value as the generator builds it, before it is written out in one of the many
    /// spellings JSON allows for the same value.
    #[derive(Debug, Clone)]
    enum Model {
        Null,
        Bool(bool),
        /// A number as written: the spelling decides which of serde_json's numbers it reads as.
        Number(String),
        String(String),
        Array(Vec<Model>),
        Object(Vec<(String, Model)>),
    }

    impl Model {
        /// Whether some object in the value repeats a member name (after unescaping).
        fn repeats_a_name(&self) -> bool {
            match self {
                Model::Array(elements) => elements.iter().any(Model::repeats_a_name),
                Model::Object(members) => {
                    members.iter().enumerate().any(|(index, (name, _))| {
                        members[..index].iter().any(|(other, _)| other == name)
                    }) || members.iter().any(|(_, value)| value.repeats_a_name())
                }
                _ => false,
            }
        }
    }

    /// Whitespace JSON allows between tokens.
    fn space() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec!["", "", " ", "\n", "\t ", "\r\n  "])
    }

    /// Number spellings around every boundary of serde_json's three numbers.
    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "0",
                "-0",
                "1",
                "-1",
                "2",
                "1.0",
                "-0.0",
                "1e2",
                "1E+2",
                "2.5e-3",
                "0.1",
                "14",
                "15",
                "14.5",
                "18446744073709551615",
                "18446744073709551616",
                "-9223372036854775808",
                "-9223372036854775809",
                "123456789012345678901234567890",
                "1e308",
                "1e400",
                "1.7976931348623157e308",
                "5e-324",
            ])
            .prop_map(str::to_owned),
            any::<i64>().prop_map(|value| value.to_string()),
            any::<f64>()
                .prop_filter("finite", |value| value.is_finite())
                .prop_map(|value| value.to_string()),
        ]
    }

    /// Text with what makes strings differ: escapes, characters past ASCII, schema words.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "",
                "a",
                "b",
                "c",
                "city",
                "days",
                "tags",
                "Paris",
                "celsius",
                "a@b.c",
                "2024-01-01",
                "x/y",
                "é",
                "🦀",
                "line\nbreak",
                "quote\"d",
                "back\\slash",
            ])
            .prop_map(str::to_owned),
            "[a-c\\\\\"/é🦀\u{1}\n]{0,6}",
        ]
    }

    fn model() -> impl Strategy<Value = Model> {
        let leaf = prop_oneof![
            Just(Model::Null),
            any::<bool>().prop_map(Model::Bool),
            number().prop_map(Model::Number),
            text().prop_map(Model::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Model::Array),
                prop::collection::vec((text(), inner), 0..4).prop_map(Model::Object),
            ]
        })
    }

    /// A JSON string spelling `text`: each character as itself or as an escape.
    fn written_string(text: &str, escapes: &[bool]) -> String {
        let mut written = String::from("\"");
        for (index, character) in text.chars().enumerate() {
            let escaped = escapes.get(index % escapes.len().max(1)) == Some(&true);
            match character {
                '"' => written.push_str("\\\""),
                '\\' => written.push_str("\\\\"),
                '\n' if !escaped => written.push_str("\\n"),
                '/' if escaped => written.push_str("\\/"),
                character if escaped || character < ' ' => {
                    let mut units = [0u16; 2];
                    for unit in character.encode_utf16(&mut units) {
                        written.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                character => written.push(character),
            }
        }
        written.push('"');
        written
    }

    /// The model written out, with `spaces` and `escapes` choosing among equal spellings.
    fn written(model: &Model, spaces: &[&str], escapes: &[bool], out: &mut String, at: &mut usize) {
        fn space<'s>(spaces: &[&'s str], at: &mut usize) -> &'s str {
            *at += 1;
            spaces[*at % spaces.len()]
        }
        out.push_str(space(spaces, at));
        match model {
            Model::Null => out.push_str("null"),
            Model::Bool(value) => out.push_str(if *value { "true" } else { "false" }),
            Model::Number(number) => out.push_str(number),
            Model::String(text) => out.push_str(&written_string(text, escapes)),
            Model::Array(elements) => {
                out.push('[');
                for (index, element) in elements.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    written(element, spaces, escapes, out, at);
                }
                out.push_str(space(spaces, at));
                out.push(']');
            }
            Model::Object(members) => {
                out.push('{');
                for (index, (name, value)) in members.iter().enumerate() {
                    if index > 0 {
                        out.push(',');
                    }
                    out.push_str(space(spaces, at));
                    let shift = escapes.len().max(1);
                    let rotated: Vec<bool> = (0..shift)
                        .map(|i| escapes.get((i + *at) % shift) == Some(&true))
                        .collect();
                    out.push_str(&written_string(name, &rotated));
                    out.push_str(space(spaces, at));
                    out.push(':');
                    written(value, spaces, escapes, out, at);
                }
                out.push_str(space(spaces, at));
                out.push('}');
            }
        }
        out.push_str(space(spaces, at));
    }

    /// A generated value's text, and whether some object in it repeats a name.
    fn document() -> impl Strategy<Value = (String, bool)> {
        (
            model(),
            prop::collection::vec(space(), 1..8),
            prop::collection::vec(prop::bool::weighted(0.2), 1..8),
        )
            .prop_map(|(model, spaces, escapes)| {
                let mut text = String::new();
                written(&model, &spaces, &escapes, &mut text, &mut 0);
                (text, model.repeats_a_name())
            })
    }

    /// Damage serde_json refuses (or, for a few, reads differently): the tape must follow it.
    fn damaged() -> impl Strategy<Value = String> {
        (document(), any::<prop::sample::Index>(), 0..6usize).prop_map(
            |((mut text, _), index, damage)| {
                let at = index.index(text.len() + 1);
                let at = (0..=at)
                    .rev()
                    .find(|&at| text.is_char_boundary(at))
                    .unwrap_or(0);
                let inserted = [",", "}", "]", "\"", "\\u12", "\u{0}"][damage];
                text.insert_str(at, inserted);
                text
            },
        )
    }

    /// The schemas every generated value is checked against: each keyword family jsonschema
    /// reads an instance through (types, scalars, objects, arrays, combinators, references).
    fn schemas() -> Vec<Value> {
        vec![
            json!({"type": "object"}),
            json!({"type": ["string", "null"]}),
            json!({"type": "integer"}),
            json!({"type": "number", "minimum": 1, "maximum": 14}),
            json!({"exclusiveMinimum": 0, "exclusiveMaximum": 15, "multipleOf": 0.5}),
            json!({"enum": ["celsius", "fahrenheit", 1, null, [1], {"a": 1}]}),
            json!({"const": {"a": [1, 2.0]}}),
            json!({"const": 1.0}),
            json!({"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"}),
            json!({"format": "email"}),
            json!({
                "type": "object",
                "properties": {"city": {"type": "string", "minLength": 1},
                               "days": {"type": "integer", "minimum": 1, "maximum": 14}},
                "required": ["city"],
                "additionalProperties": false
            }),
            json!({"patternProperties": {"^[ab]$": {"type": "number"}},
                   "additionalProperties": {"type": "string"}}),
            json!({"minProperties": 1, "maxProperties": 2, "propertyNames": {"maxLength": 1}}),
            json!({"dependentRequired": {"a": ["b"]}, "dependentSchemas": {"c": {"required": ["a"]}}}),
            json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
            json!({"prefixItems": [{"type": "string"}, {"type": "number"}], "items": false}),
            json!({"contains": {"type": "null"}, "minContains": 1, "maxContains": 2}),
            json!({"uniqueItems": true}),
            json!({"allOf": [{"type": "object"}, {"required": ["a"]}]}),
            json!({"required": ["a", "b"]}),
            json!({"required": ["a", "b", "c"]}),
            json!({"required": ["a", "b", "c", "city", "days", "tags", "é", "x/y", "", "Paris"]}),
            json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "boolean"}}]}),
            json!({"oneOf": [{"type": "number"}, {"type": "integer"}]}),
            json!({"not": {"type": "object", "required": ["b"]}}),
            json!({"if": {"required": ["a"]}, "then": {"required": ["b"]}, "else": {"maxProperties": 0}}),
            json!({"unevaluatedProperties": false, "properties": {"a": true},
                   "anyOf": [{"properties": {"b": true}}, {"required": ["c"]}]}),
            json!({"unevaluatedItems": false, "prefixItems": [true]}),
            json!({"$defs": {"tree": {"type": ["object", "array", "number", "string", "null", "boolean"],
                                      "items": {"$ref": "#/$defs/tree"},
                                      "additionalProperties": {"$ref": "#/$defs/tree"},
                                      "maxProperties": 3}},
                   "$ref": "#/$defs/tree"}),
            json!({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}),
            json!({"$schema": "http://json-schema.org/draft-07/schema#",
                   "items": [{"type": "string"}], "additionalItems": {"type": "number"},
                   "dependencies": {"a": ["b"], "c": {"required": ["a"]}}}),
        ]
    }

    fn validators() -> Vec<(Value, jsonschema::Validator, jsonschema::Validator<Tape>)> {
        schemas()
            .into_iter()
            .map(|schema| {
                let values = jsonschema::options().offline().build(&schema);
                let tape = jsonschema::options_for::<Tape>().offline().build(&schema);
                match (values, tape) {
                    (Ok(values), Ok(tape)) => (schema, values, tape),
                    (values, tape) => panic!(
                        "{schema}: {:?} {:?}",
                        values.err().map(|e| e.to_string()),
                        tape.err().map(|e| e.to_string())
                    ),
                }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn the_tape_reads_what_serde_json_reads((text, repeats) in document()) {
            match (Taped::read(&text), serde_json::from_str::<Value>(&text)) {
                (Some(taped), Ok(value)) => {
                    prop_assert!(!repeats, "{text}: taped despite a repeated name");
                    prop_assert_eq!(value_at(taped.root()), value, "{}", text);
                }
                (Some(_), Err(error)) => prop_assert!(false, "{text}: taped; serde_json: {error}"),
                (None, Ok(_)) => prop_assert!(repeats, "{text}: not taped"),
                (None, Err(_)) => {}
            }
        }

        #[test]
        fn the_tape_refuses_damaged_text_serde_json_refuses(text in damaged()) {
            match (Taped::read(&text), serde_json::from_str::<Value>(&text)) {
                (Some(taped), Ok(value)) => prop_assert_eq!(value_at(taped.root()), value),
                (Some(_), Err(error)) => prop_assert!(false, "{text}: taped; serde_json: {error}"),
                (None, _) => {}
            }
        }

        #[test]
        fn every_schema_gives_a_taped_value_the_verdict_it_gives_the_value(
            (text, _) in document()
        ) {
            let (Some(taped), Ok(value)) = (Taped::read(&text), serde_json::from_str::<Value>(&text))
            else {
                return Ok(());
            };
            for (schema, values, tape) in VALIDATORS.with(|validators| validators.clone()) {
                prop_assert_eq!(
                    tape.is_valid(taped.root()),
                    values.is_valid(&value),
                    "schema {} on {}", schema, text
                );
            }
        }
    }

    /// Small values a generated schema compares with: bounds, lengths, names, constants.
    fn small_value() -> impl Strategy<Value = Value> {
        prop::sample::select(vec![
            json!(null),
            json!(true),
            json!(0),
            json!(1),
            json!(1.0),
            json!(-1),
            json!(2.5),
            json!(14),
            json!(""),
            json!("a"),
            json!("celsius"),
            json!([1]),
            json!({"a": 1}),
        ])
    }

    /// A schema's keywords on their own: one keyword family each, with operands near the
    /// generated instances' values, so both verdicts come up.
    fn schema_leaf() -> impl Strategy<Value = Value> {
        let names = || prop::sample::select(vec!["a", "b", "c", "city", "days", "é"]);
        let bound =
            || prop::sample::select(vec![json!(0), json!(1), json!(1.5), json!(14), json!(-1)]);
        let count = || 0..4u32;
        prop_oneof![
            Just(json!(true)),
            Just(json!(false)),
            Just(json!({})),
            prop::sample::select(vec![
                "null", "boolean", "object", "array", "number", "string", "integer"
            ])
            .prop_map(|kind| json!({"type": kind})),
            prop::collection::vec(
                prop::sample::select(vec![
                    "null", "boolean", "object", "array", "number", "string", "integer"
                ]),
                1..4
            )
            .prop_map(|kinds| json!({"type": kinds})),
            (
                prop::sample::select(vec![
                    "minimum",
                    "maximum",
                    "exclusiveMinimum",
                    "exclusiveMaximum"
                ]),
                bound()
            )
                .prop_map(|(keyword, bound)| json!({keyword: bound})),
            prop::sample::select(vec![json!(0.5), json!(2), json!(1.5), json!(1e-3)])
                .prop_map(|step| json!({"multipleOf": step})),
            (
                prop::sample::select(vec!["minLength", "maxLength"]),
                count()
            )
                .prop_map(|(keyword, count)| json!({keyword: count})),
            prop::sample::select(vec!["^a", "é", "[0-9]", "^$", "s$"])
                .prop_map(|pattern| json!({"pattern": pattern})),
            prop::sample::select(vec!["email", "date", "uri", "ipv4", "uuid", "regex"])
                .prop_map(|format| json!({"format": format})),
            prop::collection::vec(small_value(), 1..4).prop_map(|values| json!({"enum": values})),
            small_value().prop_map(|value| json!({"const": value})),
            prop::collection::vec(names(), 1..4).prop_map(|names| json!({"required": names})),
            (
                prop::sample::select(vec![
                    "minProperties",
                    "maxProperties",
                    "minItems",
                    "maxItems"
                ]),
                count()
            )
                .prop_map(|(keyword, count)| json!({keyword: count})),
            Just(json!({"uniqueItems": true})),
            (names(), names())
                .prop_map(|(name, other)| json!({"dependentRequired": {name: [other]}})),
            Just(json!({"contentMediaType": "application/json"})),
            Just(json!({"contentEncoding": "base64", "contentMediaType": "application/json"})),
        ]
    }

    /// Schemas built from the leaves with every keyword that applies a schema to a part of the
    /// instance, nested, combined and merged, behind a `$ref` or not.
    fn schema() -> impl Strategy<Value = Value> {
        let names = || prop::sample::select(vec!["a", "b", "c", "city", "days", "é"]);
        let shaped = schema_leaf().prop_recursive(3, 24, 3, move |inner| {
            prop_oneof![
                (prop::sample::select(vec!["allOf", "anyOf", "oneOf"]),
                 prop::collection::vec(inner.clone(), 1..3))
                    .prop_map(|(keyword, schemas)| json!({keyword: schemas})),
                inner.clone().prop_map(|schema| json!({"not": schema})),
                (inner.clone(), inner.clone(), inner.clone())
                    .prop_map(|(test, then, otherwise)| json!({"if": test, "then": then, "else": otherwise})),
                prop::collection::vec((names(), inner.clone()), 1..3).prop_map(|members| {
                    let properties: Map<String, Value> =
                        members.into_iter().map(|(name, schema)| (name.to_owned(), schema)).collect();
                    json!({"properties": properties})
                }),
                (prop::sample::select(vec![
                    "additionalProperties", "unevaluatedProperties", "propertyNames", "items",
                    "contains", "unevaluatedItems"
                ]), inner.clone())
                    .prop_map(|(keyword, schema)| json!({keyword: schema})),
                (inner.clone(), 0..3u32, 1..3u32)
                    .prop_map(|(schema, least, most)| json!({"contains": schema, "minContains": least, "maxContains": most})),
                prop::collection::vec(inner.clone(), 1..3).prop_map(|schemas| json!({"prefixItems": schemas})),
                (names(), inner.clone()).prop_map(|(name, schema)| json!({"dependentSchemas": {name: schema}})),
                (names(), inner.clone()).prop_map(|(name, schema)| json!({"patternProperties": {format!("^{name}"): schema}})),
                inner.clone().prop_map(|schema| json!({"$defs": {"part": schema}, "$ref": "#/$defs/part"})),
                (inner.clone(), inner.clone()).prop_map(|(first, second)| match (first, second) {
                    (Value::Object(mut first), Value::Object(second)) => {
                        first.extend(second);
                        Value::Object(first)
                    }
                    (first, _) => first,
                }),
            ]
        });
        (
            shaped,
            prop::sample::select(vec![
                None,
                None,
                Some("http://json-schema.org/draft-07/schema#"),
                Some("http://json-schema.org/draft-04/schema#"),
            ]),
        )
            .prop_map(|(schema, draft)| match (schema, draft) {
                (Value::Object(mut schema), Some(draft)) => {
                    schema.insert("$schema".to_owned(), json!(draft));
                    Value::Object(schema)
                }
                (schema, _) => schema,
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Any schema a client could declare, not only the catalogue's: a value the tape
        /// passes and the `Value` fails would be a call let through unchecked.
        #[test]
        fn generated_schemas_give_a_taped_value_the_verdict_they_give_the_value(
            schema in schema(),
            documents in prop::collection::vec(document(), 1..6)
        ) {
            let Ok(values) = jsonschema::options().offline().build(&schema) else {
                return Ok(());
            };
            let tape = jsonschema::options_for::<Tape>().offline().build(&schema);
            prop_assert!(tape.is_ok(), "{schema}: compiles for a Value, not for the tape");
            let Ok(tape) = tape else { return Ok(()) };
            for (text, _) in documents {
                let (Some(taped), Ok(value)) =
                    (Taped::read(&text), serde_json::from_str::<Value>(&text))
                else {
                    continue;
                };
                prop_assert_eq!(
                    tape.is_valid(taped.root()),
                    values.is_valid(&value),
                    "schema {} on {}", schema, text
                );
            }
        }
    }

    thread_local! {
        /// Compiled once per test thread, not once per case.
        static VALIDATORS: Vec<(Value, jsonschema::Validator, jsonschema::Validator<Tape>)> =
            validators();
    }

    #[test]
    fn the_tape_keeps_the_validators_accessor_contract() {
        let document = jsonschema::json::conformance::document().to_string();
        let Some(taped) = Taped::read(&document) else {
            panic!("the conformance document tapes");
        };
        jsonschema::json::conformance::assert_conformance::<Tape>(&taped.root());
    }

    #[test]
    fn numbers_equal_in_value_are_equal_whatever_their_spelling() {
        for (schema, instance, valid) in [
            (json!({"const": 1.0}), "1", true),
            (json!({"enum": [1]}), "1.0", true),
            (json!({"enum": [1]}), "1e0", true),
            (json!({"const": 0}), "-0", true),
            (json!({"const": [1, {"a": 2}]}), "[1.0, {\"a\": 2e0}]", true),
            (json!({"enum": [1]}), "1.5", false),
        ] {
            let Ok(validator) = jsonschema::options_for::<Tape>().build(&schema) else {
                panic!("{schema} compiles");
            };
            let Some(taped) = Taped::read(instance) else {
                panic!("{instance} tapes");
            };
            assert_eq!(
                validator.is_valid(taped.root()),
                valid,
                "{schema} on {instance}"
            );
        }
    }

    #[test]
    fn a_repeated_name_is_left_to_the_value_reading() {
        for text in [r#"{"a":1,"a":2}"#, r#"[{"b":{"a":1,"\u0061":2}}]"#] {
            assert!(Taped::read(text).is_none(), "{text}");
        }
        let many: Vec<String> = (0..40)
            .map(|index| format!("\"k{}\":0", index % 39))
            .collect();
        assert!(Taped::read(&format!("{{{}}}", many.join(","))).is_none());
        let distinct: Vec<String> = (0..40).map(|index| format!("\"k{index}\":0")).collect();
        assert!(Taped::read(&format!("{{{}}}", distinct.join(","))).is_some());
    }

    #[test]
    fn strings_without_escapes_are_borrowed_from_the_text() {
        let text = r#"{"city":"Paris","note":"a\"b"}"#;
        let Some(taped) = Taped::read(text) else {
            panic!("tapes");
        };
        let borrowed: Vec<bool> = taped
            .entries
            .iter()
            .filter_map(|entry| match entry {
                Entry::String(text) | Entry::Name(text) => Some(matches!(text, Cow::Borrowed(_))),
                _ => None,
            })
            .collect();
        assert_eq!(borrowed, [true, true, true, false]);
    }
}
