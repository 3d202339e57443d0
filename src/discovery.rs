//! `GET /tools` on the admin listener: which catalog tools a request would be offered on a
//! route, for a group, state and tenant, and for each tool that would not, which plugin keeps
//! it back and why. The plugins answer with the rules they enforce, so this never drifts.

use http::StatusCode;
use serde::Serialize;
use toolgate_plugin::{AvailabilityQuery, CatalogTool, Violation};

use crate::config::Config;

/// The route asked about when the query names none: where OpenAI clients send tool calls.
const DEFAULT_ROUTE_PATH: &str = "/v1/chat/completions";

#[derive(Serialize)]
struct Answer<'a> {
    route: &'a str,
    groups: Option<&'a [String]>,
    state: Option<&'a str>,
    tenant: Option<&'a str>,
    available: Vec<ToolView<'a>>,
    unavailable: Vec<Unavailable<'a>>,
}

#[derive(Serialize)]
struct ToolView<'a> {
    name: &'a str,
    groups: &'a [String],
    available_in_states: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    category: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    action: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
}

impl<'a> From<&'a CatalogTool> for ToolView<'a> {
    fn from(tool: &'a CatalogTool) -> Self {
        ToolView {
            name: &tool.name,
            groups: &tool.groups,
            available_in_states: &tool.available_in_states,
            state: tool.transition.as_deref(),
            category: tool.category.as_deref(),
            action: tool.action.as_deref(),
            description: tool.description.as_deref(),
        }
    }
}

#[derive(Serialize)]
struct Unavailable<'a> {
    name: &'a str,
    reasons: Vec<Reason<'a>>,
}

#[derive(Serialize)]
struct Reason<'a> {
    plugin: &'a str,
    #[serde(flatten)]
    violation: Violation,
}

/// Answers one `/tools` query (`route`, `group` (comma-separated, repeatable), `state`,
/// `tenant`, `conversation`) with a status and a JSON body. A conversation whose workflow
/// state toolgate keeps is answered for its stored state, not the `state` given.
pub async fn tools(config: &Config, query: Option<&str>) -> (StatusCode, String) {
    let mut route_path = None;
    let mut groups: Option<Vec<String>> = None;
    let mut state = None;
    let mut tenant_name = None;
    let mut conversation = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        match key.as_ref() {
            "route" => route_path = Some(value.into_owned()),
            "group" | "groups" => groups
                .get_or_insert_with(Vec::new)
                .extend(toolgate_plugin::directives::split_list(&value)),
            "state" => state = Some(value.into_owned()),
            "tenant" => tenant_name = Some(value.into_owned()),
            "conversation" => conversation = Some(value.into_owned()),
            other => {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "unknown parameter '{other}' (route, group, state, tenant, conversation)"
                    ),
                );
            }
        }
    }
    let tenant = match &tenant_name {
        None => None,
        Some(name) => match config.tenants.by_name().get(name) {
            Some(tenant) => Some(tenant.clone()),
            None => return error(StatusCode::NOT_FOUND, format!("no tenant named '{name}'")),
        },
    };
    let path = route_path.as_deref().unwrap_or(DEFAULT_ROUTE_PATH);
    let Some(route) = config.router.find(path) else {
        return error(StatusCode::NOT_FOUND, format!("no route for path '{path}'"));
    };
    let mut availability = AvailabilityQuery {
        groups: groups.clone(),
        state: state.clone(),
        tenant,
        conversation,
    };
    if let Err(why) = route.chain.resolve_availability(&mut availability).await {
        return error(StatusCode::SERVICE_UNAVAILABLE, why);
    }
    let state = availability.state.clone();
    let mut available = Vec::new();
    let mut unavailable = Vec::new();
    for tool in config.catalog.tools() {
        let reasons: Vec<Reason> = route
            .chain
            .unavailability(&availability, &tool.name)
            .into_iter()
            .map(|(plugin, violation)| Reason { plugin, violation })
            .collect();
        if reasons.is_empty() {
            available.push(ToolView::from(tool));
        } else {
            unavailable.push(Unavailable {
                name: &tool.name,
                reasons,
            });
        }
    }
    let answer = Answer {
        route: &route.path,
        groups: groups.as_deref(),
        state: state.as_deref(),
        tenant: tenant_name.as_deref(),
        available,
        unavailable,
    };
    match serde_json::to_string(&answer) {
        Ok(body) => (StatusCode::OK, body),
        Err(failure) => error(StatusCode::INTERNAL_SERVER_ERROR, failure.to_string()),
    }
}

fn error(status: StatusCode, message: String) -> (StatusCode, String) {
    let body = serde_json::json!({"error": {"message": message, "type": "invalid_request_error"}});
    (status, body.to_string())
}
