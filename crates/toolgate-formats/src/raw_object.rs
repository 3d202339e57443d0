//! A JSON object read as an ordered list of (key, raw value) pairs, so an edit can rewrite one
//! field and write every other field back with its original bytes and order.

use std::fmt;

use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;

pub(crate) struct RawObject<'a>(pub Vec<(String, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for RawObject<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = RawObject<'de>;
            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut fields = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    fields.push((key, value));
                }
                Ok(RawObject(fields))
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}

impl RawObject<'_> {
    /// Writes the object back: `{"key":<raw>,…}` with the original raw values.
    pub(crate) fn write(&self, replacements: &[(&str, Option<String>)]) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            self.0
                .iter()
                .map(|(k, v)| k.len() + v.get().len() + 4)
                .sum(),
        );
        out.push(b'{');
        let mut first = true;
        for (key, value) in &self.0 {
            let replacement = replacements.iter().find(|(name, _)| name == key);
            let text = match replacement {
                Some((_, None)) => continue,
                Some((_, Some(text))) => text.as_str(),
                None => value.get(),
            };
            if !first {
                out.push(b',');
            }
            first = false;
            // A key that serde_json read back from a string always serializes again.
            out.extend_from_slice(serde_json::to_string(key).unwrap_or_default().as_bytes());
            out.push(b':');
            out.extend_from_slice(text.as_bytes());
        }
        out.push(b'}');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_fields_keep_their_bytes_and_order() {
        let body = r#"{"z": 1.0e2, "tools": [1,2], "a": {"b" : true}}"#;
        let object: RawObject = serde_json::from_str(body).unwrap();
        let written = object.write(&[("tools", Some("[1]".into()))]);
        assert_eq!(
            String::from_utf8(written).unwrap(),
            r#"{"z":1.0e2,"tools":[1],"a":{"b" : true}}"#
        );
    }

    #[test]
    fn a_replacement_of_none_removes_the_field() {
        let object: RawObject = serde_json::from_str(r#"{"a":1,"b":2}"#).unwrap();
        assert_eq!(object.write(&[("a", None)]), br#"{"b":2}"#);
    }
}
