//! `[[plugins]]` and each route's `plugins`: the gateway-wide entries merged into every route's
//! chain, each plugin built from its settings, its mode and its `on_block`.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use toolgate_plugin::BuildContext;

use super::super::source::{ConfigError, KeyPath, Source};
use super::super::{OnBlockMode, RawConfig, RawPluginEntry, settings_to_json};
use super::PluginRegistry;
use crate::on_block::{DEFAULT_MAX_RETRIES, DEFAULT_RETRY_DEADLINE, OnBlock, RetryLimits};
use crate::pipeline::Mode;
use crate::pipeline::{Chain, ChainEntry};

/// The gateway-wide entries: each names a known plugin, once.
pub(super) fn check_gateway_entries(
    raw: &RawConfig,
    source: &Source,
    plugins: &PluginRegistry,
    errors: &mut Vec<ConfigError>,
) {
    let mut global_keys = HashSet::new();
    for (index, entry) in raw.plugins.iter().enumerate() {
        let entry_path = KeyPath::default().key("plugins").index(index);
        if plugins.get(&entry.name).is_none() {
            let path = entry_path.clone().key("name");
            errors.push(source.error_at_key(&path, unknown_plugin(&entry.name, plugins)));
        }
        if !global_keys.insert(entry.id.as_deref().unwrap_or(&entry.name)) {
            errors.push(duplicate_entry(entry, &entry_path, source));
        }
    }
}

/// A second entry with the same key in one list of plugins.
fn duplicate_entry(entry: &RawPluginEntry, entry_path: &KeyPath, source: &Source) -> ConfigError {
    match &entry.id {
        Some(id) => source.error_at_key(
            &entry_path.clone().key("id"),
            format!("id '{id}' is used twice in this list of plugins"),
        ),
        None => source.error_at_key(
            &entry_path.clone().key("name"),
            format!(
                "plugin '{}' appears twice in this list: give each entry a distinct `id`",
                entry.name
            ),
        ),
    }
}

fn unknown_plugin(name: &str, plugins: &PluginRegistry) -> String {
    format!("unknown plugin '{name}' (available: {})", plugins.names())
}

/// One plugin of a route's chain, as merged from the gateway-wide and the route's entries.
struct MergedEntry<'a> {
    /// The merge key: the entry's `id`, or its plugin name.
    key: &'a str,
    name: &'a str,
    enabled: bool,
    mode: Mode,
    priority: Option<i32>,
    on_block: Option<OnBlockMode>,
    /// Whether the route's own entry set `on_block` (not only the gateway-wide one).
    on_block_from_route: bool,
    max_retries: Option<u32>,
    retry_deadline_ms: Option<u64>,
    hold_text: Option<bool>,
    /// Whether the route's own entry set `hold_text`.
    hold_text_from_route: bool,
    settings: toml::Table,
    /// Where each top-level settings key came from, to point errors at the right line.
    key_origins: BTreeMap<String, KeyPath>,
    entry_path: KeyPath,
}

/// Merges the gateway-wide entries and the route's into one chain: a route entry overrides the
/// gateway-wide entry with the same key (its `id`, else its plugin name). Within one list a key
/// may appear once, so two instances of a plugin need distinct ids.
pub(super) fn build_chain(
    global: &[RawPluginEntry],
    local: &[RawPluginEntry],
    route_path: &KeyPath,
    source: &Source,
    plugins: &PluginRegistry,
    context: &BuildContext,
    errors: &mut Vec<ConfigError>,
) -> Chain {
    let merged = merge_entries(global, local, route_path, source, errors);
    let chain: Vec<ChainEntry> = merged
        .iter()
        .filter(|entry| entry.enabled)
        .filter_map(|entry| build_entry(entry, source, plugins, context, errors))
        .collect();
    // One view of the tools per request: two disclosures would each hide what the other shows.
    let disclosures: Vec<&str> = (chain.iter())
        .filter(|entry| entry.plugin.disclosure().is_some())
        .map(|entry| entry.name.as_str())
        .collect();
    if disclosures.len() > 1 {
        errors.push(source.error_at_key(
            route_path,
            format!(
                "a route discloses tools once; it has {} entries that do: {}",
                disclosures.len(),
                disclosures.join(", ")
            ),
        ));
    }
    Chain::new(chain)
}

/// The route's entries over the gateway-wide ones: an entry of the same id (or plugin name)
/// overrides the keys it sets and keeps the others.
fn merge_entries<'a>(
    global: &'a [RawPluginEntry],
    local: &'a [RawPluginEntry],
    route_path: &KeyPath,
    source: &Source,
    errors: &mut Vec<ConfigError>,
) -> Vec<MergedEntry<'a>> {
    let mut merged: Vec<MergedEntry> = Vec::new();
    let global_path = KeyPath::default().key("plugins");
    let local_path = route_path.clone().key("plugins");
    for (list, list_path) in [(global, &global_path), (local, &local_path)] {
        let mut keys_in_list = HashSet::new();
        for (index, entry) in list.iter().enumerate() {
            let entry_path = list_path.clone().index(index);
            let key = entry.id.as_deref().unwrap_or(&entry.name);
            if !keys_in_list.insert(key) {
                // The gateway-wide list is reported once, in `build`, not once per route.
                if list_path == &local_path {
                    errors.push(duplicate_entry(entry, &entry_path, source));
                }
                continue;
            }
            let position = merged.iter().position(|existing| existing.key == key);
            let target = match position {
                Some(position) => &mut merged[position],
                None => {
                    merged.push(MergedEntry {
                        key,
                        name: &entry.name,
                        enabled: true,
                        mode: Mode::Enforce,
                        priority: None,
                        on_block: None,
                        on_block_from_route: false,
                        max_retries: None,
                        retry_deadline_ms: None,
                        hold_text: None,
                        hold_text_from_route: false,
                        settings: toml::Table::new(),
                        key_origins: BTreeMap::new(),
                        entry_path: entry_path.clone(),
                    });
                    let last = merged.len() - 1;
                    &mut merged[last]
                }
            };
            if target.name != entry.name {
                errors.push(source.error_at_key(
                    &entry_path.clone().key("name"),
                    format!(
                        "entry '{key}' is plugin '{}' in the gateway-wide chain, not '{}': an override must name the same plugin",
                        target.name, entry.name
                    ),
                ));
                continue;
            }
            target.enabled = entry.enabled.unwrap_or(target.enabled);
            target.mode = entry.mode.unwrap_or(target.mode);
            target.priority = entry.priority.or(target.priority);
            if let Some(error) = retry_keys_without_retry(entry, &entry_path, source) {
                errors.push(error);
            }
            target.on_block = entry.on_block.or(target.on_block);
            target.on_block_from_route |= entry.on_block.is_some() && list_path == &local_path;
            target.max_retries = entry.max_retries.or(target.max_retries);
            target.retry_deadline_ms = entry.retry_deadline_ms.or(target.retry_deadline_ms);
            target.hold_text = entry.hold_text.or(target.hold_text);
            target.hold_text_from_route |= entry.hold_text.is_some() && list_path == &local_path;
            for (setting, value) in entry.settings.iter().flatten() {
                target.settings.insert(setting.clone(), value.clone());
                target.key_origins.insert(
                    setting.clone(),
                    entry_path.clone().key("settings").key(setting),
                );
            }
            target.entry_path = entry_path;
        }
    }
    merged
}

/// One plugin of the chain, built from its merged settings, with its mode and `on_block`.
fn build_entry(
    entry: &MergedEntry<'_>,
    source: &Source,
    plugins: &PluginRegistry,
    context: &BuildContext,
    errors: &mut Vec<ConfigError>,
) -> Option<ChainEntry> {
    let Some(factory) = plugins.get(entry.name) else {
        if entry.entry_path.0.len() > 2 {
            errors.push(source.error_at_key(
                &entry.entry_path.clone().key("name"),
                unknown_plugin(entry.name, plugins),
            ));
        }
        return None;
    };
    let locate = |dotted: &str| {
        let first = dotted.split(['.', '[']).next().unwrap_or_default();
        match entry.key_origins.get(first) {
            Some(origin) => {
                let rest = dotted.strip_prefix(first).unwrap_or_default();
                origin.clone().dotted(rest)
            }
            None => entry.entry_path.clone().key("settings").dotted(dotted),
        }
    };
    let settings = match settings_to_json(&entry.settings) {
        Ok(settings) => settings,
        Err((path, message)) => {
            errors.push(source.error_at_key(&locate(&path), message));
            return None;
        }
    };
    let on_block = match on_block(entry, source) {
        // The client of an MCP call gets a JSON-RPC error: there is no model to ask again
        // and no answer to put a message in.
        // A gateway-wide choice is for the LLM routes; one the MCP route makes is a mistake.
        Ok(on_block) if context.mcp_route && on_block != OnBlock::Error => {
            if entry.on_block_from_route {
                errors.push(source.error_at_key(
                    &entry.entry_path.clone().key("on_block"),
                    "on_block has no effect on an MCP route: a refused MCP call is a JSON-RPC error",
                ));
                return None;
            }
            OnBlock::Error
        }
        Ok(on_block) => on_block,
        Err(error) => {
            errors.push(error);
            return None;
        }
    };
    // Like on_block, a gateway-wide hold_text is for the LLM routes; the MCP route's own is
    // a setting that cannot take effect.
    if context.mcp_route && entry.hold_text_from_route {
        errors.push(source.error_at_key(
            &entry.entry_path.clone().key("hold_text"),
            "hold_text has no effect on an MCP route: an MCP call has no text stream to hold",
        ));
        return None;
    }
    let hold_text = entry.hold_text == Some(true) && !context.mcp_route;
    // Holding text only serves a recovery; without one it would delay every stream for
    // nothing. (A gateway-wide entry that an MCP route turns to `error` holds nothing.)
    if hold_text && on_block == OnBlock::Error && !context.mcp_route {
        errors.push(source.error_at_key(
            &entry.entry_path.clone().key("hold_text"),
            "hold_text applies only with on_block = \"retry\" or \"message\"",
        ));
        return None;
    }
    match factory.build(&settings, context) {
        Ok(plugin) => Some(ChainEntry {
            name: entry.key.to_owned(),
            plugin,
            mode: entry.mode,
            priority: entry.priority.unwrap_or_else(|| factory.default_priority()),
            on_block,
            hold_text,
            work: Default::default(),
        }),
        Err(error) => {
            errors.extend(
                error
                    .each()
                    .into_iter()
                    .map(|error| source.error_at_key(&locate(&error.path), error.message)),
            );
            None
        }
    }
}

/// `max_retries` or `retry_deadline_ms` on an entry that itself says its blocks are not
/// retried: a setting that would do nothing is an error, not a silent no-op.
fn retry_keys_without_retry(
    entry: &RawPluginEntry,
    entry_path: &KeyPath,
    source: &Source,
) -> Option<ConfigError> {
    let key = if entry.max_retries.is_some() {
        "max_retries"
    } else if entry.retry_deadline_ms.is_some() {
        "retry_deadline_ms"
    } else {
        return None;
    };
    match entry.on_block {
        Some(OnBlockMode::Retry) => None,
        Some(_) => Some(source.error_at_key(
            &entry_path.clone().key(key),
            format!("{key} applies only with on_block = \"retry\""),
        )),
        None => None,
    }
}

/// The merged entry's `on_block`, with its retry limits checked.
fn on_block(entry: &MergedEntry<'_>, source: &Source) -> Result<OnBlock, ConfigError> {
    let at = |key: &str| entry.entry_path.clone().key(key);
    // Set with no `on_block` at any level, the limits would do nothing (the default is
    // `error`); set beside an explicit other choice, `retry_keys_without_retry` said so.
    if entry.on_block.is_none() {
        let key = if entry.max_retries.is_some() {
            Some("max_retries")
        } else {
            entry.retry_deadline_ms.map(|_| "retry_deadline_ms")
        };
        if let Some(key) = key {
            return Err(source.error_at_key(
                &at(key),
                format!("{key} applies only with on_block = \"retry\" (the default is \"error\")"),
            ));
        }
    }
    match entry.on_block {
        None | Some(OnBlockMode::Error) => Ok(OnBlock::Error),
        Some(OnBlockMode::Message) => Ok(OnBlock::Message),
        Some(OnBlockMode::Retry) => {
            let max_retries = entry.max_retries.unwrap_or(DEFAULT_MAX_RETRIES);
            if !(1..=10).contains(&max_retries) {
                return Err(source.error_at_key(
                    &at("max_retries"),
                    format!("max_retries must be between 1 and 10, not {max_retries}"),
                ));
            }
            let deadline = match entry.retry_deadline_ms {
                None => DEFAULT_RETRY_DEADLINE,
                Some(0) => {
                    return Err(source.error_at_key(
                        &at("retry_deadline_ms"),
                        "retry_deadline_ms must be more than 0",
                    ));
                }
                Some(ms) => Duration::from_millis(ms),
            };
            Ok(OnBlock::Retry(RetryLimits {
                max_retries,
                deadline,
            }))
        }
    }
}
