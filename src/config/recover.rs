//! Reading the file into [`RawConfig`] with every shape error reported, not only the first:
//! serde stops at the first unknown key or mistyped value, so the offending value is taken out
//! of the document and the rest read again, until it reads or an error cannot be taken out (a
//! whole table missing a required key: removing it would only cause other errors). Each error
//! is located in the file as written.

use toml_edit::{DocumentMut, Item, TableLike, Value};

use super::RawConfig;
use super::source::{ConfigError, KeyPath, KeyStep, Source};

/// More than any real file has; a bound so a value that keeps failing cannot loop.
const MOST_ERRORS: usize = 64;

/// What reading the file gave.
pub(super) struct Reading {
    /// The file as read once every error's value was taken out; `None` when one could not be.
    pub raw: Option<RawConfig>,
    /// The shape errors, in the order they were found.
    pub errors: Vec<ConfigError>,
    /// The values taken out: an error found later at or below one of them is their echo.
    pub removed: Vec<KeyPath>,
}

impl Reading {
    /// Whether `error` (found while building) concerns a value taken out.
    pub fn concerns_removed(&self, error: &ConfigError) -> bool {
        error.key.as_deref().is_some_and(|key| {
            self.removed.iter().any(|path| {
                let path = path.to_string();
                key == path
                    || key.starts_with(&format!("{path}."))
                    || key.starts_with(&format!("{path}["))
            })
        })
    }
}

pub(super) fn read(source: &Source) -> Reading {
    let mut reading = Reading {
        raw: None,
        errors: Vec::new(),
        removed: Vec::new(),
    };
    let mut document: Option<DocumentMut> = None;
    let mut text = source.text.to_owned();
    while reading.errors.len() < MOST_ERRORS {
        let error = match toml::from_str::<RawConfig>(&text) {
            Ok(raw) => {
                reading.raw = Some(raw);
                break;
            }
            Err(error) => error,
        };
        let current = Source {
            origin: source.origin,
            text: &text,
        };
        let path = error.span().and_then(|span| current.key_at(span.start));
        let message = error.message().trim_end().to_owned();
        // A table now missing the value taken out of it: the echo of an error already told.
        if message.starts_with("missing field")
            && path.as_ref().is_some_and(|path| {
                reading
                    .removed
                    .iter()
                    .any(|gone| gone.0.starts_with(&path.0))
            })
        {
            break;
        }
        reading.errors.push(match &path {
            // The text is still the file's: the parser's own span is the most precise place.
            _ if reading.removed.is_empty() => source.error_at(
                error.span(),
                path.as_ref().map(ToString::to_string),
                message,
            ),
            Some(path) => source.error_at_key(path, message),
            None => source.error_at(None, None, message),
        });
        let Some(path) = path.map(value_path) else {
            break;
        };
        if document.is_none() {
            // A syntax error has no document to repair: it is the one error there is.
            document = text.parse::<DocumentMut>().ok();
        }
        let Some(editable) = document.as_mut() else {
            break;
        };
        if reading.removed.contains(&path) || !remove_value(editable, &path) {
            break;
        }
        reading.removed.push(path);
        text = editable.to_string();
    }
    // serde meets them in its fields' order; the file's order is the one people read in.
    reading
        .errors
        .sort_by_key(|error| error.line_column.unwrap_or((usize::MAX, 0)));
    reading
}

/// The path of the value to take out: an element of a list of values goes with its list.
fn value_path(mut path: KeyPath) -> KeyPath {
    while matches!(path.0.last(), Some(KeyStep::Index(_))) {
        path.0.pop();
    }
    path
}

/// Takes the value at `path` out of `document`; false when `path` is not a value (a table, a
/// list of tables) or is not there.
fn remove_value(document: &mut DocumentMut, path: &KeyPath) -> bool {
    let Some((KeyStep::Key(last), parents)) = path.0.split_last() else {
        return false;
    };
    let mut table: &mut dyn TableLike = document.as_table_mut();
    let mut steps = parents.iter().peekable();
    while let Some(step) = steps.next() {
        let KeyStep::Key(key) = step else {
            return false;
        };
        let index = match steps.peek() {
            Some(KeyStep::Index(index)) => {
                steps.next();
                Some(*index)
            }
            _ => None,
        };
        let Some(item) = table.get_mut(key) else {
            return false;
        };
        table = match (item, index) {
            (Item::Table(inner), None) => inner,
            (Item::Value(Value::InlineTable(inner)), None) => inner,
            (Item::ArrayOfTables(tables), Some(index)) => match tables.get_mut(index) {
                Some(inner) => inner,
                None => return false,
            },
            (Item::Value(Value::Array(values)), Some(index)) => match values.get_mut(index) {
                Some(Value::InlineTable(inner)) => inner,
                _ => return false,
            },
            _ => return false,
        };
    }
    match table.get(last) {
        Some(Item::Value(_)) => table.remove(last).is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use toolgate_plugin::testing::assert_lines_contain;

    use super::*;

    /// `text` read as the file `t.toml`, and its errors as they are shown.
    fn read_as_shown(text: &str) -> (Reading, Vec<String>) {
        let reading = read(&Source {
            origin: "t.toml",
            text,
        });
        let shown = reading.errors.iter().map(ToString::to_string).collect();
        (reading, shown)
    }

    #[test]
    fn every_unknown_key_and_mistyped_value_is_reported_at_its_line() {
        let text = "[server]\nlisten = \"127.0.0.1:0\"\ncolour = \"blue\"\n\n\
                    [upstreams.llm]\nurl = \"http://127.0.0.1:1\"\nconnect_timeout_ms = \"soon\"\n\n\
                    [[routes]]\npath = \"/v1\"\nupstream = \"llm\"\nflavour = 1\n";
        let (reading, shown) = read_as_shown(text);
        assert_eq!(shown.len(), 3, "{shown:#?}");
        assert_lines_contain(
            &shown,
            &[
                (0, "t.toml:3:1: server.colour: unknown field"),
                (1, "t.toml:7:"),
                (1, "upstreams.llm.connect_timeout_ms"),
                (2, "t.toml:12:1: routes[0].flavour"),
            ],
        );
        assert!(reading.raw.is_some(), "the rest reads");
    }

    #[test]
    fn a_required_value_taken_out_is_reported_once() {
        let (_, shown) = read_as_shown("[upstreams.llm]\nurl = 8080\n\n[server]\ncolour = 1\n");
        assert_eq!(shown.len(), 2, "{shown:#?}");
        let parts = [(0, "upstreams.llm.url: invalid type"), (1, "server.colour")];
        assert_lines_contain(&shown, &parts);
        assert!(
            !shown.iter().any(|line| line.contains("missing field")),
            "not 'missing field url' as well: {shown:#?}"
        );
    }

    #[test]
    fn a_table_missing_a_required_key_stops_the_reading() {
        let (reading, _) = read_as_shown("[upstreams.llm]\nretries = 3\n");
        assert!(reading.raw.is_none());
        assert!(!reading.errors.is_empty());
    }
}
