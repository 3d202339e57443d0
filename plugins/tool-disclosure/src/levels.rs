//! Seed 003's three levels of a tool, built from its declaration and the catalog: L1, the
//! index line (name, one-line description, category, cost tier); L2, the body shown when the
//! model loads it (the declaration as written, with the catalog's examples and failure modes);
//! L3, the catalog's resources. Token counts are estimated as one token per four characters
//! (docs/disclosure.md): close enough for English text and JSON to keep within a budget,
//! and the same on every replica.

use serde_json::{Value, json};
use toolgate_plugin::{CatalogTool, CostTier, ToolDefinition};

/// The longest one-line description in the index.
const MAX_LINE_DESCRIPTION: usize = 200;

/// A permitted tool, as disclosure shows it: its declaration, and its catalog entry if the
/// catalog has one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry<'a> {
    pub declared: &'a ToolDefinition,
    pub catalog: Option<&'a CatalogTool>,
}

/// The estimated tokens of `text`: one per four characters, rounded up.
pub(crate) fn tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

impl<'a> Entry<'a> {
    pub(crate) fn name(&self) -> &'a str {
        &self.declared.name
    }

    /// The L1 line: `- name [category, cost]: description`.
    pub(crate) fn index_line(&self) -> String {
        let docs = self.catalog.map(|tool| &tool.docs);
        let mut tags = Vec::new();
        if let Some(category) = self.catalog.and_then(|tool| tool.category.as_ref()) {
            tags.push(category.clone());
        }
        if let Some(cost) = docs.and_then(|docs| docs.cost_tier) {
            tags.push(cost_name(cost).to_owned());
        }
        let mut line = format!("- {}", self.name());
        if !tags.is_empty() {
            line.push_str(&format!(" [{}]", tags.join(", ")));
        }
        if let Some(description) = self.short_description() {
            line.push_str(": ");
            line.push_str(&description);
        }
        line
    }

    /// The catalog's `short_description`, else the first sentence of the declared description
    /// (at most 200 characters).
    fn short_description(&self) -> Option<String> {
        let docs = self.catalog.map(|tool| &tool.docs);
        if let Some(short) = docs.and_then(|docs| docs.short_description.clone()) {
            return Some(short);
        }
        let described = self.declared.description.as_deref()?.trim();
        (!described.is_empty()).then(|| first_sentence(described))
    }

    /// The L2 body, as the result of `load_tool`: the declaration as the client wrote it, the
    /// catalog's examples and failure modes, and the ids of its resources.
    pub(crate) fn body(&self) -> String {
        let definition: Value =
            serde_json::from_str(&self.declared.definition).unwrap_or(Value::Null);
        let mut body = json!({
            "tool": self.name(),
            "loaded": true,
            "definition": definition,
        });
        if let Some(tool) = self.catalog {
            let docs = &tool.docs;
            if !docs.examples.is_empty() {
                body["examples"] = Value::from(docs.examples.clone());
            }
            if !docs.failure_modes.is_empty() {
                body["failure_modes"] = Value::from(docs.failure_modes.clone());
            }
            if !docs.resources.is_empty() {
                body["resources"] = docs
                    .resources
                    .iter()
                    .map(|resource| json!({"resource_id": resource.id, "content_type": resource.content_type}))
                    .collect();
            }
        }
        body.to_string()
    }

    /// What the tool costs while loaded: its declaration (sent in `tools`) and its body
    /// (in the conversation's result).
    pub(crate) fn loaded_tokens(&self) -> usize {
        tokens(&self.declared.definition) + tokens(&self.body())
    }

    /// An L3 resource, as the result of `load_tool_resource`.
    pub(crate) fn resource(&self, id: &str) -> Option<String> {
        let tool = self.catalog?;
        let resource = tool
            .docs
            .resources
            .iter()
            .find(|resource| resource.id == id)?;
        Some(
            json!({"tool": self.name(), "resource_id": resource.id,
                "content_type": resource.content_type, "content": resource.content})
            .to_string(),
        )
    }

    /// The ids of the tool's resources.
    pub(crate) fn resource_ids(&self) -> Vec<&'a str> {
        self.catalog.map_or_else(Vec::new, |tool| {
            tool.docs
                .resources
                .iter()
                .map(|resource| resource.id.as_str())
                .collect()
        })
    }
}

fn cost_name(cost: CostTier) -> &'static str {
    match cost {
        CostTier::Cheap => "cheap",
        CostTier::Medium => "medium",
        CostTier::Expensive => "expensive",
    }
}

/// The text up to the end of its first sentence (a `.`, `!` or `?` before a space or the end),
/// on one line, at most 200 characters.
pub(crate) fn first_sentence(text: &str) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let chars: Vec<char> = flat.chars().collect();
    let mut end = chars.len();
    for (position, c) in chars.iter().enumerate() {
        let at_break = chars.get(position + 1).is_none_or(|next| *next == ' ');
        if matches!(c, '.' | '!' | '?') && at_break {
            end = position + 1;
            break;
        }
    }
    if end > MAX_LINE_DESCRIPTION {
        let mut cut: String = chars[..MAX_LINE_DESCRIPTION - 1].iter().collect();
        cut.push('…');
        return cut;
    }
    chars[..end].iter().collect()
}

/// The index for the system prompt: how to use the discovery tools, then the lines of the
/// tools, as many as the L1 budget holds (loaded tools first, then in declared order); the
/// rest are named by `list_tools`.
pub(crate) fn index(entries: &[Entry], loaded: &[String], budget: usize) -> String {
    let mut text = format!(
        "You can use {} tools. Only loaded tools are declared with their full definitions; the others are listed below by name, category and cost. Before calling a tool that is not loaded, call load_tool with its name to load its definition, and load_tool_resource for a guide it lists. Call list_tools to list them all, or to search them by a word. Call these discovery tools before you answer, not after.\n\nTools:",
        entries.len()
    );
    let mut used = tokens(&text);
    let ordered = loaded
        .iter()
        .filter_map(|name| entries.iter().find(|entry| entry.name() == name))
        .chain(
            entries
                .iter()
                .filter(|entry| !loaded.iter().any(|name| name == entry.name())),
        );
    let mut shown = 0;
    for entry in ordered {
        let mut line = entry.index_line();
        if loaded.iter().any(|name| name == entry.name()) {
            line.push_str(" (loaded)");
        }
        let cost = tokens(&line) + 1;
        if used + cost > budget.saturating_sub(20) {
            break;
        }
        used += cost;
        text.push('\n');
        text.push_str(&line);
        shown += 1;
    }
    if shown < entries.len() {
        text.push_str(&format!(
            "\n… and {} more: call list_tools to see them.",
            entries.len() - shown
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(name: &str, description: Option<&str>) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: description.map(str::to_owned),
            definition: format!(r#"{{"name":"{name}"}}"#),
        }
    }

    fn entry(declared: &ToolDefinition) -> Entry<'_> {
        Entry {
            declared,
            catalog: None,
        }
    }

    #[test]
    fn an_index_line_takes_the_first_sentence_of_the_description() {
        let search = declared("search", Some("Finds pages.  Slow on\nSundays."));
        assert_eq!(entry(&search).index_line(), "- search: Finds pages.");
        assert_eq!(
            first_sentence("Version 1.5 of it. More."),
            "Version 1.5 of it."
        );
        let long = "a".repeat(500);
        assert_eq!(first_sentence(&long).chars().count(), 200);
        let mut tool = CatalogTool::new("search");
        tool.category = Some("web".into());
        tool.docs.cost_tier = Some(CostTier::Expensive);
        tool.docs.short_description = Some("Looks things up".into());
        let with_catalog = Entry {
            catalog: Some(&tool),
            ..entry(&search)
        };
        assert_eq!(
            with_catalog.index_line(),
            "- search [web, expensive]: Looks things up"
        );
    }

    #[test]
    fn the_index_keeps_within_its_budget_and_says_how_many_it_left_out() {
        let tools: Vec<ToolDefinition> = (0..200)
            .map(|n| {
                declared(
                    &format!("tool_{n}"),
                    Some("Does one thing well, and only that."),
                )
            })
            .collect();
        let entries: Vec<Entry> = tools.iter().map(entry).collect();
        let text = index(&entries, &["tool_150".to_owned()], 300);
        assert!(tokens(&text) <= 300 + 15, "{} tokens", tokens(&text));
        assert!(text.contains("- tool_150: Does one thing well, and only that. (loaded)"));
        let listed = text.lines().filter(|line| line.starts_with("- ")).count();
        assert!(
            text.contains(&format!("… and {} more", 200 - listed)),
            "{text}"
        );
        let everything = index(&entries, &[], 100_000);
        assert_eq!(
            everything
                .lines()
                .filter(|line| line.starts_with("- "))
                .count(),
            200
        );
        assert!(!everything.contains("more: call list_tools"));
    }
}
