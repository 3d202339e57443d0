//! Calls a person confirms first (`require_confirmation`, per server or per agent policy):
//! toolgate asks the caller's client through MCP elicitation, showing the tool and its
//! arguments, and forwards only on a yes; a no, or a client that cannot ask, is a refusal and
//! nothing reaches the backend.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation,
};
use rmcp::service::RequestContext;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::json;

use super::{
    call, config_with_own_ops_policy, connect, refusal_data, servers_dir, start_config, temp_dir,
    text_of,
};
use crate::common::TestGateway;

/// A client whose person answers every confirmation with `yes`, and remembers the questions.
#[derive(Clone)]
struct Person {
    yes: bool,
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Person {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        if let ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().expect("not poisoned").push(message);
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"confirm": self.yes})))
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("person", "1"),
        )
    }
}

async fn connect_person(
    gateway: &TestGateway,
    key: &str,
    yes: bool,
) -> (
    rmcp::service::RunningService<RoleClient, Person>,
    Arc<Mutex<Vec<String>>>,
) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let person = Person {
        yes,
        asked: asked.clone(),
    };
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", gateway.url()))
        .auth_header(key);
    let client = person
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .expect("initialize");
    (client, asked)
}

#[tokio::test]
async fn a_confirmed_call_is_forwarded_and_any_other_answer_refuses_it() {
    let Some(servers) = servers_dir() else { return };
    let files = temp_dir("confirm");
    // echo needs a person's yes for everyone; get-sum only for ops.
    let extra = "[mcp.agent_policies.ops]\nrequire_confirmation = { everything = [\"get-sum\"] }\n\
                 allowed_servers = [\"everything\"]\n";
    let config = config_with_own_ops_policy(&servers, &files, extra).replace(
        "call_timeout_ms = 1500",
        "call_timeout_ms = 1500\nrequire_confirmation = [\"echo\"]",
    );
    let (_upstream, gateway) = start_config(&config, &["everything"]).await;

    // Yes: forwarded, after a question that names the tool and shows the arguments.
    let (yes, asked) = connect_person(&gateway, "sk-dev", true).await;
    let echo = yes
        .call_tool(
            rmcp::model::CallToolRequestParams::new("everything__echo")
                .with_arguments(super::arguments(json!({"message": "launch"}))),
        )
        .await
        .expect("confirmed, then forwarded");
    assert!(text_of(&echo).contains("launch"), "{echo:?}");
    let questions = asked.lock().expect("not poisoned").clone();
    assert_eq!(questions.len(), 1, "{questions:?}");
    assert!(
        questions[0].contains("everything__echo") && questions[0].contains("launch"),
        "{questions:?}"
    );

    // No: refused, nothing forwarded. A tool nobody listed is not asked about.
    let (no, asked) = connect_person(&gateway, "sk-dev", false).await;
    let error = no
        .call_tool(
            rmcp::model::CallToolRequestParams::new("everything__echo")
                .with_arguments(super::arguments(json!({"message": "launch"}))),
        )
        .await
        .expect_err("not confirmed");
    let rmcp::ServiceError::McpError(error) = error else {
        panic!("a JSON-RPC refusal, not {error:?}");
    };
    assert_eq!(error.code.0, -32001, "{error:?}");
    assert_eq!(
        refusal_data(&error)["violations"][0]["code"],
        "confirmation_declined"
    );
    no.call_tool(
        rmcp::model::CallToolRequestParams::new("everything__get-sum")
            .with_arguments(super::arguments(json!({"a": 1, "b": 2}))),
    )
    .await
    .expect("get-sum needs no confirmation for dev");
    assert_eq!(asked.lock().expect("not poisoned").len(), 1);

    // A client that cannot ask (no elicitation capability) cannot call a confirmed tool; the
    // agent policy adds get-sum for ops.
    let plain = connect(&gateway, "sk-ops", None).await;
    for (tool, arguments) in [
        ("everything__echo", json!({"message": "x"})),
        ("everything__get-sum", json!({"a": 1, "b": 2})),
    ] {
        let error = call(&plain, tool, arguments)
            .await
            .expect_err("no way to ask");
        assert_eq!(
            refusal_data(&error)["violations"][0]["code"],
            "confirmation_unavailable",
            "{tool}"
        );
    }
}
