//! Configuration errors located in their file: `path:line:column: key: message`. Locations come
//! from the parser's own spans for syntax and type errors, and from a key path resolved against
//! the parsed document for errors found while building the gateway (unknown upstream, bad
//! plugin settings).

use std::fmt;
use std::ops::Range;

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub origin: String,
    /// 1-based line and column, when the problem could be located.
    pub line_column: Option<(usize, usize)>,
    /// The offending key as a path (`routes[0].upstream`), when there is one.
    pub key: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.origin)?;
        if let Some((line, column)) = self.line_column {
            write!(f, ":{line}:{column}")?;
        }
        write!(f, ": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

/// Every problem found in one file; loading reports them all at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyStep {
    Key(String),
    Index(usize),
}

/// A key path such as `routes[0].plugins[1].settings.model`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyPath(pub Vec<KeyStep>);

impl KeyPath {
    pub fn key(mut self, key: &str) -> Self {
        self.0.push(KeyStep::Key(key.to_owned()));
        self
    }

    pub fn index(mut self, index: usize) -> Self {
        self.0.push(KeyStep::Index(index));
        self
    }

    /// Appends a dotted path as serde_path_to_error writes it (`a.b[2].c`).
    pub fn dotted(mut self, dotted: &str) -> Self {
        for segment in dotted.split('.').filter(|s| !s.is_empty()) {
            let (name, indexes) = segment.split_once('[').unwrap_or((segment, ""));
            if !name.is_empty() {
                self.0.push(KeyStep::Key(name.to_owned()));
            }
            for index in indexes.split('[') {
                if let Ok(index) = index.trim_end_matches(']').parse() {
                    self.0.push(KeyStep::Index(index));
                }
            }
        }
        self
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (position, step) in self.0.iter().enumerate() {
            match step {
                KeyStep::Key(key) if position == 0 => write!(f, "{key}")?,
                KeyStep::Key(key) => write!(f, ".{key}")?,
                KeyStep::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// The text of a configuration file, for locating errors in it.
pub struct Source<'a> {
    pub origin: &'a str,
    pub text: &'a str,
}

impl Source<'_> {
    /// An error at a byte span.
    pub fn error_at(
        &self,
        span: Option<Range<usize>>,
        key: Option<String>,
        message: String,
    ) -> ConfigError {
        ConfigError {
            origin: self.origin.to_owned(),
            line_column: span.map(|span| self.line_column(span.start)),
            key,
            message,
        }
    }

    /// An error at a key path, located as precisely as the document allows: the deepest key of
    /// the path that exists in the file.
    pub fn error_at_key(&self, path: &KeyPath, message: impl Into<String>) -> ConfigError {
        self.error_at(self.span_of(path), Some(path.to_string()), message.into())
    }

    /// A path written in the file: relative ones are taken from the file's folder (the
    /// working directory for a text that is not a file).
    pub fn relative_path(&self, written: &str) -> std::path::PathBuf {
        let written = std::path::Path::new(written);
        match std::path::Path::new(self.origin).parent() {
            Some(folder) if written.is_relative() && !folder.as_os_str().is_empty() => {
                folder.join(written)
            }
            _ => written.to_path_buf(),
        }
    }

    /// The key path of the entry at a byte offset (for parser errors, which carry only a span).
    pub fn key_at(&self, offset: usize) -> Option<KeyPath> {
        let document = toml_edit::Document::parse(self.text).ok()?;
        let table: &dyn toml_edit::TableLike = document.as_table();
        key_within(table, offset, KeyPath::default())
    }

    fn span_of(&self, path: &KeyPath) -> Option<Range<usize>> {
        let document = toml_edit::Document::parse(self.text).ok()?;
        resolve(Node::Item(document.as_item()), &path.0, None)
    }

    fn line_column(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        (line, before[line_start..].chars().count() + 1)
    }
}

/// A place in the parsed document: an item, or one table of an array of tables (which is not an
/// `Item` of its own in toml_edit).
#[derive(Clone, Copy)]
enum Node<'a> {
    Item(&'a toml_edit::Item),
    Table(&'a toml_edit::Table),
}

/// Walks `steps` down from `node`, remembering the span of the deepest step found, so an error
/// about a key that is absent points at its nearest existing parent.
fn resolve(node: Node<'_>, steps: &[KeyStep], best: Option<Range<usize>>) -> Option<Range<usize>> {
    let Some((step, rest)) = steps.split_first() else {
        return best;
    };
    match step {
        KeyStep::Key(name) => {
            let table: &dyn toml_edit::TableLike = match node {
                Node::Item(item) => match item.as_table_like() {
                    Some(table) => table,
                    None => return best,
                },
                Node::Table(table) => table,
            };
            match table.get_key_value(name) {
                Some((key, value)) => resolve(
                    Node::Item(value),
                    rest,
                    key.span().or(value.span()).or(best),
                ),
                None => best,
            }
        }
        KeyStep::Index(index) => match node {
            Node::Item(toml_edit::Item::ArrayOfTables(tables)) => match tables.get(*index) {
                Some(table) => resolve(Node::Table(table), rest, table.span().or(best)),
                None => best,
            },
            Node::Item(toml_edit::Item::Value(toml_edit::Value::Array(array))) => {
                match array.get(*index) {
                    Some(value) => value.span().or(best),
                    None => best,
                }
            }
            _ => best,
        },
    }
}

/// The deepest key whose name or value covers `offset`, searching every nested table.
fn key_within(table: &dyn toml_edit::TableLike, offset: usize, path: KeyPath) -> Option<KeyPath> {
    for (name, item) in table.iter() {
        let here = path.clone().key(name);
        let covers = |span: Option<Range<usize>>| span.is_some_and(|span| span.contains(&offset));
        let key_span = table.get_key_value(name).and_then(|(key, _)| key.span());
        let nested = match item {
            toml_edit::Item::Table(inner) => key_within(inner, offset, here.clone()),
            toml_edit::Item::Value(toml_edit::Value::InlineTable(inner)) => {
                key_within(inner, offset, here.clone())
            }
            toml_edit::Item::ArrayOfTables(tables) => tables
                .iter()
                .enumerate()
                .find_map(|(index, inner)| key_within(inner, offset, here.clone().index(index))),
            _ => None,
        };
        if nested.is_some() {
            return nested;
        }
        if covers(key_span) || covers(item.span()) {
            return Some(here);
        }
    }
    None
}
