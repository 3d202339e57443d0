//! Tenants under access control: a tenant asking for groups beyond its own is refused (and
//! counted), tenants never see each other's tools, and the admin listener says which tools a
//! tenant's request would get and why not the others.

use super::{CATALOG, SEED_TOOLS, forwarded_tools, refused_in_groups, request, sdk_chat_as};
use crate::common::answers::{assert_sdk_error, sdk_api_error};
use crate::common::{Reply, ScriptedUpstream, TestGateway};
use serde_json::Value;

fn tenant_config() -> String {
    format!(
        "{CATALOG}\n\
         [tenants.reader]\napi_keys = [\"sk-reader\"]\ngroups = [\"read-only\", \"default\"]\naccess_level = \"restricted\"\n\n\
         [tenants.operator]\napi_keys = [\"sk-operator\"]\ngroups = [\"*\"]\naccess_level = \"elevated\"\ndenied_tools = [\"reset-*\"]\n\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"llm\"\n\
         [[routes.plugins]]\nname = \"tool_groups\"\n\
         [[routes.plugins]]\nname = \"tool_permission\"\n"
    )
}

#[tokio::test]
async fn a_tenant_asking_for_groups_beyond_its_own_is_refused() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &tenant_config()).await;
    let error = refused_in_groups(
        &gateway,
        "sk-reader",
        "read-only,admin",
        &SEED_TOOLS,
        "admin is not the reader's",
    )
    .await;
    let body = assert_sdk_error(error, 403, "group_access_denied");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("insufficient permissions for requested tool groups"),
        "{message}"
    );
    assert_eq!(upstream.request_count(), 0);

    gateway
        .assert_metrics_contain(&[
            "agent_group_access_denied_total{group=\"admin\"} 1",
            "agent_privilege_escalation_attempts_total{tenant=\"reader\"} 1",
        ])
        .await;
}

#[tokio::test]
async fn tenants_never_see_each_others_tools() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &tenant_config()).await;
    let mut seen = Vec::new();
    for (key, groups) in [("sk-reader", "read-only"), ("sk-operator", "*")] {
        upstream.push(Reply::chat_text("ok"));
        sdk_chat_as(
            &gateway,
            key,
            &[
                ("x-toolgate-group", groups),
                ("x-toolgate-state", "analysis"),
            ],
            request(&SEED_TOOLS, vec![]),
        )
        .await
        .expect("allowed");
        let forwarded = upstream.last_request().expect("forwarded");
        assert_eq!(
            forwarded.header("authorization"),
            None,
            "the tenant key stays here"
        );
        seen.push(forwarded_tools(&upstream));
    }
    // reader: read-only tools in analysis (none: knowledge-query is for undefined/research;
    // text-completion is analytics, open to restricted).
    assert_eq!(seen[0], Some(vec!["text-completion".into()]));
    // operator: every group, elevated, but reset-* denied to it.
    assert_eq!(
        seen[1],
        Some(vec![
            "graph-update".into(),
            "text-completion".into(),
            "complex-analysis".into(),
            "weather".into()
        ])
    );
    // The reader is never shown an operator-only tool, even asking by name in its own groups.
    upstream.push(Reply::chat_calls(&[("c1", "graph-update", "{}")]));
    let error = refused_in_groups(
        &gateway,
        "sk-reader",
        "read-only",
        &["graph-update"],
        "blocked",
    )
    .await;
    assert_eq!(sdk_api_error(error).0, 403);
}

#[tokio::test]
async fn the_admin_listener_says_which_tools_a_request_would_get_and_why_not() {
    let upstream = ScriptedUpstream::start().await;
    let gateway = TestGateway::start(&upstream, &tenant_config()).await;
    let answer = gateway
        .admin_json("/tools?group=read-only&tenant=reader")
        .await;
    let names = |list: &Value| -> Vec<String> {
        list.as_array()
            .expect("list")
            .iter()
            .map(|tool| tool["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(names(&answer["available"]), ["text-completion"]);
    let unavailable = answer["unavailable"].as_array().expect("list");
    let query = unavailable
        .iter()
        .find(|tool| tool["name"] == "knowledge-query")
        .expect("listed with reasons");
    assert_eq!(query["reasons"][0]["plugin"], "tool_permission");
    assert!(
        query["reasons"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("database")
    );
    let update = unavailable
        .iter()
        .find(|tool| tool["name"] == "graph-update")
        .expect("listed");
    assert_eq!(update["reasons"][0]["check"], "group");

    let refused = gateway.admin_json("/tools?group=admin&tenant=reader").await;
    assert_eq!(
        refused["unavailable"][0]["reasons"][0]["code"],
        "group_access_denied"
    );
    assert_eq!(
        gateway.admin_get("/tools?tenant=nobody").await.status(),
        404
    );
    assert_eq!(gateway.admin_get("/tools?colour=red").await.status(), 400);
}
