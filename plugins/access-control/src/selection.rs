//! What a request asks for: its tool groups and workflow state, read from the `x-toolgate-*`
//! headers or the body's `toolgate` object, checked against the tenant's holdings, and the
//! state carried forward through the conversation's completed tool calls (seed 000 §4.2).

use http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use toolgate_plugin::catalog::{CatalogTool, DEFAULT_GROUP, INITIAL_STATE, WILDCARD};
use toolgate_plugin::directives::{self, GROUP_HEADER, STATE_HEADER};
use toolgate_plugin::{
    CallOutcome, Check, Parsed, Rejection, Tenant, ToolCatalog, ToolRequest, Violation,
};

/// The groups and state a request runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The groups asked for, after defaults: `["default"]` when none were named.
    pub groups: Vec<String>,
    /// The state the request named (or `undefined`).
    pub initial_state: String,
    /// The state after the history's completed calls: the one tools are filtered by.
    pub state: String,
    /// The transitions this request records: those made by the calls of the model's latest
    /// turn, whose results are new to this request. Earlier ones were recorded by the request
    /// that brought their results, so a conversation counts each transition once.
    pub transitions: Vec<Transition>,
    /// Calls of the latest turn to tools not available in the state they ran in.
    pub invalid_transitions: usize,
    /// The state the request named itself (header or body), if it named one.
    pub claimed_state: Option<String>,
    /// The conversation the body's `toolgate` object names, if it names one.
    pub conversation: Option<String>,
    /// `store` mode, `on_invalid_transition = "allow"`: results of the latest turn that
    /// answer no call toolgate delivered, so they moved nothing (for the audit).
    pub ignored_results: Vec<CallRef>,
}

/// A call as its result names it: the id the result answers, and the tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRef {
    /// The call's id (legacy `function_call`s have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The tool's name as the model wrote it.
    pub tool: String,
}

/// One state change read from the conversation, as seed 000 §8.2 audits it: the tool, the
/// states it moved between, and when (RFC 3339, UTC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub tool: String,
    pub from: String,
    pub to: String,
    /// When toolgate saw it (RFC 3339, UTC, milliseconds), in both state sources.
    #[serde(default)]
    pub timestamp: String,
    /// The same instant in ms since the Unix epoch, for a state toolgate keeps itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
}

impl Transition {
    /// A transition seen now; `keeps_millis` adds the epoch milliseconds a kept record holds.
    pub fn now(tool: String, from: String, to: String, keeps_millis: bool) -> Transition {
        let now = std::time::SystemTime::now();
        let at = keeps_millis.then(|| {
            now.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as u64)
        });
        Transition {
            tool,
            from,
            to,
            timestamp: humantime::format_rfc3339_millis(now).to_string(),
            at,
        }
    }
}

/// Seed 000: a successful call of `tool` moves `state` along the tool's transition, if it has
/// one; the move is recorded in `transitions` when it is given. The catalog's spelling names
/// the tool: one tool is one metric label, however a client cased the call.
pub(crate) fn follow_transition(
    tool: &CatalogTool,
    state: &mut String,
    transitions: Option<&mut Vec<Transition>>,
    keeps_millis: bool,
) {
    let Some(to) = &tool.transition else {
        return;
    };
    if let Some(transitions) = transitions {
        let from = state.clone();
        let moved = Transition::now(tool.name.clone(), from, to.clone(), keeps_millis);
        transitions.push(moved);
    }
    *state = to.clone();
}

/// Why a request's selection is refused, with the groups to count as denied.
#[derive(Debug)]
pub(crate) struct Refusal {
    /// Boxed: a refusal is rare, and the happy path's `Result` stays small.
    pub rejection: Box<Rejection>,
    pub denied_groups: Vec<String>,
}

impl Selection {
    /// Whether `tool` is offered to this request: in one of its groups (or `*` asked for) and
    /// available in its current state.
    pub fn offers(&self, tool: &CatalogTool) -> bool {
        self.in_groups(tool) && tool.available_in(&self.state)
    }

    pub fn in_groups(&self, tool: &CatalogTool) -> bool {
        self.groups.iter().any(|group| group == WILDCARD)
            || tool.groups.iter().any(|group| self.groups.contains(group))
    }
}

/// The catalog entry a tool name resolves to (by its key, so `Graph-Update` cannot dodge the
/// groups and states of `graph-update`), or the defaults of a tool the catalog does not describe.
pub(crate) fn entry_of<'a>(
    catalog: &'a ToolCatalog,
    name: &str,
    fallback: &'a mut Option<CatalogTool>,
) -> &'a CatalogTool {
    match catalog.resolve(name) {
        Some(tool) => tool,
        None => fallback.insert(CatalogTool::new(name)),
    }
}

/// Reads and checks the request's groups and state. `request` gives the body's `toolgate`
/// object and the history, when the body was read.
pub(crate) fn read(
    headers: &HeaderMap,
    request: &Parsed<ToolRequest>,
    tenant: Option<&Tenant>,
    catalog: &ToolCatalog,
) -> Result<Selection, Refusal> {
    let request = request.as_parsed();
    let directives = match request.map(ToolRequest::directives).transpose() {
        Ok(directives) => directives.flatten().unwrap_or_default(),
        Err(message) => return Err(bad_request(Check::Group, "invalid_directive", message)),
    };
    let header_groups =
        header_text(headers, GROUP_HEADER)?.map(|text| directives::split_list(&text));
    let header_state = header_text(headers, STATE_HEADER)?.map(|text| text.trim().to_owned());

    let groups = agree(header_groups, directives.group, GROUP_HEADER, "group")?;
    let state = agree(header_state, directives.state, STATE_HEADER, "state")?;
    if let Some(bad) = groups
        .iter()
        .flatten()
        .find(|group| !directives::is_valid_name(group))
    {
        return Err(bad_request(
            Check::Group,
            "invalid_group",
            format!(
                "'{}' is not a valid group name (1-64 of A-Z a-z 0-9 _ . : -, or *)",
                bad.escape_debug()
            ),
        ));
    }
    if let Some(bad) = state
        .as_ref()
        .filter(|state| *state == WILDCARD || !directives::is_valid_name(state))
    {
        return Err(bad_request(
            Check::State,
            "invalid_state",
            format!(
                "'{}' is not a valid state name (1-64 of A-Z a-z 0-9 _ . : -)",
                bad.escape_debug()
            ),
        ));
    }

    let groups = match groups {
        Some(groups) => groups,
        None => default_groups(tenant),
    };
    if let Some(tenant) = tenant {
        let denied: Vec<String> = groups
            .iter()
            .filter(|group| !tenant.holds_group(group))
            .cloned()
            .collect();
        if !denied.is_empty() {
            let violation = Violation::new(
                Check::Group,
                "group_access_denied",
                format!(
                    "insufficient permissions for requested tool groups: tenant '{}' does not hold {}",
                    tenant.name,
                    denied
                        .iter()
                        .map(|group| format!("'{group}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
            return Err(Refusal {
                rejection: Box::new(Rejection::forbidden(vec![violation])),
                denied_groups: denied,
            });
        }
    }

    let initial_state = state.clone().unwrap_or_else(|| INITIAL_STATE.to_owned());
    let mut selection = Selection {
        groups,
        state: initial_state.clone(),
        initial_state,
        transitions: Vec::new(),
        invalid_transitions: 0,
        claimed_state: state,
        conversation: directives.conversation,
        ignored_results: Vec::new(),
    };
    if let Some(request) = request {
        for call in request.history() {
            // Seed 000: a state changes only after a successful execution. A result flagged
            // as an error (Anthropic `is_error`, Responses `failed`) moves nothing.
            // A result whose call is not in the request (a stored response's) names no tool:
            // without memory of what was delivered, client mode cannot follow it.
            if call.outcome != CallOutcome::Completed || call.name.is_empty() {
                continue;
            }
            let mut fallback = None;
            let tool = entry_of(catalog, &call.name, &mut fallback);
            if !tool.available_in(&selection.state) && call.latest_turn {
                selection.invalid_transitions += 1;
            }
            let recorded = call.latest_turn.then_some(&mut selection.transitions);
            follow_transition(tool, &mut selection.state, recorded, false);
        }
    }
    Ok(selection)
}

/// A tenant that names no group gets `default`, or, when it does not hold `default`, the
/// groups it holds; an anonymous request gets `default` (seed 000).
fn default_groups(tenant: Option<&Tenant>) -> Vec<String> {
    match tenant {
        Some(tenant) if !tenant.holds_group(DEFAULT_GROUP) => tenant.groups.clone(),
        _ => vec![DEFAULT_GROUP.to_owned()],
    }
}

/// One value from two places: both may be given only if they agree.
fn agree<T: PartialEq + std::fmt::Debug>(
    header: Option<T>,
    body: Option<T>,
    header_name: &str,
    field: &str,
) -> Result<Option<T>, Refusal> {
    match (header, body) {
        (Some(header), Some(body)) if header != body => Err(bad_request(
            if field == "state" {
                Check::State
            } else {
                Check::Group
            },
            "conflicting_directives",
            format!("the {header_name} header and the toolgate.{field} field disagree; send one"),
        )),
        (header, body) => Ok(header.or(body)),
    }
}

/// A header's value as text (its repeats joined by commas); odd bytes are refused.
pub(crate) fn header_text(headers: &HeaderMap, name: &str) -> Result<Option<String>, Refusal> {
    let mut values = headers.get_all(name).iter().peekable();
    if values.peek().is_none() {
        return Ok(None);
    }
    let mut parts = Vec::new();
    for value in values {
        match value.to_str() {
            Ok(text) => parts.push(text.to_owned()),
            Err(_) => {
                return Err(bad_request(
                    Check::Group,
                    "invalid_directive",
                    format!("the {name} header is not visible ASCII"),
                ));
            }
        }
    }
    Ok(Some(parts.join(",")))
}

/// A 403 refusal with one violation, counting no group as denied.
pub(crate) fn forbidden(check: Check, code: &str, message: impl Into<String>) -> Refusal {
    Refusal {
        rejection: Box::new(Rejection::forbidden(vec![Violation::new(
            check, code, message,
        )])),
        denied_groups: Vec::new(),
    }
}

pub(crate) fn bad_request(check: Check, code: &str, message: impl Into<String>) -> Refusal {
    Refusal {
        rejection: Box::new(
            Rejection::forbidden(vec![Violation::new(check, code, message)])
                .with_status(StatusCode::BAD_REQUEST, "invalid_request_error"),
        ),
        denied_groups: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http::HeaderValue;
    use toolgate_plugin::WireFormat;

    fn catalog() -> ToolCatalog {
        let mut query = CatalogTool::new("knowledge-query");
        query.groups = vec!["read-only".into(), "knowledge".into(), "basic".into()];
        query.transition = Some("analysis".into());
        query.available_in_states = vec!["undefined".into(), "research".into()];
        let mut analysis = CatalogTool::new("complex-analysis");
        analysis.groups = vec!["advanced".into(), "compute".into()];
        analysis.transition = Some("results".into());
        analysis.available_in_states = vec!["analysis".into()];
        ToolCatalog::new([query, analysis])
    }

    fn request(json: &str) -> Parsed<ToolRequest> {
        Parsed::Parsed(
            WireFormat::ChatCompletions
                .parse_request(Bytes::from(json.to_owned()))
                .expect("parses"),
        )
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(*name, HeaderValue::from_static(value));
        }
        headers
    }

    fn refusal_code(result: Result<Selection, Refusal>) -> (u16, String) {
        match result {
            Ok(selection) => panic!("expected a refusal, got {selection:?}"),
            Err(refusal) => (
                refusal.rejection.status.as_u16(),
                refusal.rejection.violations[0].code.clone(),
            ),
        }
    }

    #[test]
    fn defaults_are_the_default_group_and_the_undefined_state() {
        let selection = read(&HeaderMap::new(), &Parsed::Absent, None, &catalog()).expect("ok");
        assert_eq!(selection.groups, ["default"]);
        assert_eq!(selection.state, "undefined");
    }

    #[test]
    fn headers_and_the_body_object_are_read_and_must_agree() {
        let catalog = catalog();
        let from_header = read(
            &headers(&[("x-toolgate-group", "a, b"), ("x-toolgate-group", "c")]),
            &Parsed::Absent,
            None,
            &catalog,
        )
        .expect("ok");
        assert_eq!(from_header.groups, ["a", "b", "c"]);
        let from_body = read(
            &HeaderMap::new(),
            &request(r#"{"messages":[],"toolgate":{"group":["x"],"state":"analysis"}}"#),
            None,
            &catalog,
        )
        .expect("ok");
        assert_eq!(
            (from_body.groups.as_slice(), from_body.state.as_str()),
            (&["x".to_owned()][..], "analysis")
        );
        let conflict = read(
            &headers(&[("x-toolgate-state", "results")]),
            &request(r#"{"messages":[],"toolgate":{"state":"analysis"}}"#),
            None,
            &catalog,
        );
        assert_eq!(
            refusal_code(conflict),
            (400, "conflicting_directives".into())
        );
    }

    #[test]
    fn malformed_input_is_refused_not_widened() {
        let catalog = catalog();
        for (headers, body, code) in [
            (
                headers(&[("x-toolgate-group", "admin;drop")]),
                Parsed::Absent,
                "invalid_group",
            ),
            (
                headers(&[("x-toolgate-state", "*")]),
                Parsed::Absent,
                "invalid_state",
            ),
            (
                HeaderMap::new(),
                request(r#"{"messages":[],"toolgate":{"group":1}}"#),
                "invalid_directive",
            ),
            (
                HeaderMap::new(),
                request(r#"{"messages":[],"toolgate":{"groups":["a"],"admin":true}}"#),
                "invalid_directive",
            ),
        ] {
            assert_eq!(
                refusal_code(read(&headers, &body, None, &catalog)),
                (400, code.to_owned())
            );
        }
    }

    #[test]
    fn a_tenant_may_ask_only_for_groups_it_holds() {
        let tenant = Tenant {
            name: "reader".into(),
            groups: vec!["read-only".into()],
            ..Tenant::default()
        };
        let catalog = catalog();
        let asked = headers(&[("x-toolgate-group", "read-only,admin")]);
        assert_eq!(
            refusal_code(read(&asked, &Parsed::Absent, Some(&tenant), &catalog)),
            (403, "group_access_denied".into())
        );
        let wildcard = headers(&[("x-toolgate-group", "*")]);
        assert_eq!(
            refusal_code(read(&wildcard, &Parsed::Absent, Some(&tenant), &catalog)),
            (403, "group_access_denied".into())
        );
        let none_named =
            read(&HeaderMap::new(), &Parsed::Absent, Some(&tenant), &catalog).expect("ok");
        assert_eq!(
            none_named.groups,
            ["read-only"],
            "its own groups when it lacks default"
        );
    }

    // Turns of the conversation tests: the user's ask, then a knowledge-query call and its
    // result (which move the state to analysis), then a complex-analysis call and its result.
    const ASK: &str = r#"{"role":"user","content":"go"}"#;
    const QUERY: &str = r#"{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"knowledge-query","arguments":"{}"}}]}"#;
    const QUERY_RESULT: &str = r#"{"role":"tool","tool_call_id":"c1","content":"found"}"#;
    const ANALYSIS: &str = r#"{"role":"assistant","tool_calls":[{"id":"c2","type":"function","function":{"name":"complex-analysis","arguments":"{}"}}]}"#;
    const ANALYSIS_RESULT: &str = r#"{"role":"tool","tool_call_id":"c2","content":"done"}"#;

    /// What `read` makes of a chat request whose `messages` are `turns`, without headers or
    /// tenant.
    fn selection_after(turns: &[&str]) -> Selection {
        let body = format!(r#"{{"messages":[{}]}}"#, turns.join(","));
        read(&HeaderMap::new(), &request(&body), None, &catalog()).expect("ok")
    }

    #[test]
    fn completed_calls_move_the_state_and_failed_ones_do_not() {
        let selection = selection_after(&[ASK, QUERY, QUERY_RESULT, ANALYSIS]);
        assert_eq!(selection.initial_state, "undefined");
        assert_eq!(selection.state, "analysis", "c2 has no result yet");
        assert_eq!(
            selection.transitions,
            [],
            "c1's transition was recorded by the request that brought its result"
        );
        assert_eq!(selection.invalid_transitions, 0);
    }

    #[test]
    fn only_the_latest_turn_records_its_transitions() {
        let selection = selection_after(&[ASK, QUERY, QUERY_RESULT, ANALYSIS, ANALYSIS_RESULT]);
        assert_eq!(selection.state, "results");
        assert_eq!(
            selection
                .transitions
                .iter()
                .map(|t| (t.tool.as_str(), t.from.as_str(), t.to.as_str(), t.at))
                .collect::<Vec<_>>(),
            [("complex-analysis", "analysis", "results", None)]
        );
        assert!(
            selection.transitions[0].timestamp.ends_with('Z'),
            "{:?}",
            selection.transitions[0]
        );
        // The model answered in text since: nothing new to record.
        let selection = selection_after(&[
            ASK,
            QUERY,
            QUERY_RESULT,
            ANALYSIS,
            ANALYSIS_RESULT,
            r#"{"role":"assistant","content":"all done"}"#,
            r#"{"role":"user","content":"thanks"}"#,
        ]);
        assert_eq!(selection.state, "results");
        assert_eq!(selection.transitions, []);
    }

    #[test]
    fn a_history_call_is_resolved_to_its_catalog_entry_by_key() {
        let spelled_otherwise = r#"{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":" Knowledge-QUERY","arguments":"{}"}}]}"#;
        let selection = selection_after(&[ASK, spelled_otherwise, QUERY_RESULT]);
        assert_eq!(selection.state, "analysis");
        assert_eq!(selection.transitions[0].tool, "knowledge-query");
    }
}
