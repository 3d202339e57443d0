//! Who may see and call which MCP tool: seed 004's filter with its gaps closed.
//!
//! - The caller is identified by toolgate, never by itself: its tenant (by key), or an agent
//!   the tenant asserts with `x-toolgate-agent` and holds in `agents` (anything else is refused
//!   before the policy is consulted).
//! - A server is reachable when the caller's policy lists it in `allowed_servers`; with no
//!   policy for the caller, or a policy without that list, `allow_unknown_servers` decides.
//! - A tool is callable when it is in the server's `exposed_tools` (a ceiling no agent policy
//!   can lift — the seed let overrides reach past it) and in the caller's `tool_overrides` for
//!   that server; when neither list exists for the server, `allow_unknown_tools` decides.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::mcp::{AgentPolicy, Policy};

/// Who is calling, as far as MCP policy goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The tenant's name, or the agent it asserted; `None` for an anonymous caller (a route
    /// with `auth = "none"` and no key).
    pub identity: Option<String>,
}

impl Policy {
    fn agent(&self, caller: &Caller) -> Option<&AgentPolicy> {
        caller
            .identity
            .as_deref()
            .and_then(|identity| self.agents.get(identity))
    }

    /// Whether the caller may reach `server` at all.
    pub fn allows_server(&self, caller: &Caller, server: &str) -> bool {
        match self
            .agent(caller)
            .and_then(|policy| policy.allowed_servers.as_ref())
        {
            Some(allowed) => allowed.contains(server),
            None => self.default.allow_unknown_servers,
        }
    }

    /// Whether the caller may see and call `tool` (its backend name) on `server`.
    pub fn allows_tool(&self, caller: &Caller, server: &str, tool: &str) -> bool {
        if !self.allows_server(caller, server) {
            return false;
        }
        let exposed = self.exposed.get(server);
        let overridden = self
            .agent(caller)
            .and_then(|policy| policy.tool_overrides.get(server));
        match (exposed, overridden) {
            (None, None) => self.default.allow_unknown_tools,
            (exposed, overridden) => {
                exposed.is_none_or(|list| list.contains(tool))
                    && overridden.is_none_or(|list| list.contains(tool))
            }
        }
    }
}

impl Policy {
    /// Whether a call by `caller` to `tool` (its backend name) on `server` waits for a person
    /// to confirm it: the server's list, or the caller's policy, says so.
    pub fn needs_confirmation(&self, caller: &Caller, server: &str, tool: &str) -> bool {
        let listed = |lists: &BTreeMap<String, BTreeSet<String>>| {
            lists.get(server).is_some_and(|tools| tools.contains(tool))
        };
        listed(&self.confirmed)
            || self
                .agent(caller)
                .is_some_and(|policy| listed(&policy.require_confirmation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::mcp::DefaultPolicy;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|item| (*item).to_owned()).collect()
    }

    fn caller(identity: Option<&str>) -> Caller {
        Caller {
            identity: identity.map(str::to_owned),
        }
    }

    fn policy() -> Policy {
        let mut agents = BTreeMap::new();
        agents.insert(
            "dev".to_owned(),
            AgentPolicy {
                allowed_servers: Some(set(&["fs", "memory"])),
                tool_overrides: [("fs".to_owned(), set(&["read_file", "delete_file"]))].into(),
                require_confirmation: [("fs".to_owned(), set(&["read_file"]))].into(),
            },
        );
        agents.insert("open".to_owned(), AgentPolicy::default());
        Policy {
            default: DefaultPolicy::default(),
            agents,
            exposed: [("fs".to_owned(), set(&["read_file", "list_directory"]))].into(),
            confirmed: [("memory".to_owned(), set(&["delete_entities"]))].into(),
        }
    }

    #[test]
    fn confirmation_is_asked_when_the_server_or_the_callers_policy_lists_the_tool() {
        let policy = policy();
        let (dev, open) = (caller(Some("dev")), caller(Some("open")));
        assert!(policy.needs_confirmation(&dev, "fs", "read_file"));
        assert!(!policy.needs_confirmation(&open, "fs", "read_file"));
        assert!(!policy.needs_confirmation(&dev, "fs", "list_directory"));
        for anyone in [&dev, &open, &caller(None)] {
            assert!(policy.needs_confirmation(anyone, "memory", "delete_entities"));
            assert!(!policy.needs_confirmation(anyone, "memory", "read_graph"));
        }
    }

    #[test]
    fn allowed_servers_decide_reach() {
        let policy = policy();
        assert!(policy.allows_server(&caller(Some("dev")), "fs"));
        assert!(!policy.allows_server(&caller(Some("dev")), "github"));
        // No policy, or a policy without the list: the default decides (deny by default).
        assert!(!policy.allows_server(&caller(None), "fs"));
        assert!(!policy.allows_server(&caller(Some("open")), "fs"));
        let mut open = policy.clone();
        open.default.allow_unknown_servers = true;
        assert!(open.allows_server(&caller(Some("stranger")), "fs"));
    }

    #[test]
    fn exposed_tools_are_a_ceiling_overrides_narrow_it() {
        let policy = policy();
        let dev = caller(Some("dev"));
        assert!(policy.allows_tool(&dev, "fs", "read_file"));
        // In the override but not exposed: the ceiling holds.
        assert!(!policy.allows_tool(&dev, "fs", "delete_file"));
        // Exposed but not in the override.
        assert!(!policy.allows_tool(&dev, "fs", "list_directory"));
        // memory has no list at all: the default decides.
        assert!(!policy.allows_tool(&dev, "memory", "read_graph"));
        let mut open = policy.clone();
        open.default.allow_unknown_tools = true;
        assert!(open.allows_tool(&dev, "memory", "read_graph"));
        assert!(!open.allows_tool(&dev, "github", "create_issue"));
    }

    #[test]
    fn without_an_override_exposed_tools_decide() {
        let mut policy = policy();
        policy.default.allow_unknown_servers = true;
        let anyone = caller(None);
        assert!(policy.allows_tool(&anyone, "fs", "list_directory"));
        assert!(!policy.allows_tool(&anyone, "fs", "delete_file"));
    }
}
