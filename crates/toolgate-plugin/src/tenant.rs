//! A tenant: a client of the gateway identified by its API key to toolgate. The gateway
//! authenticates the key and attaches the tenant to the exchange; plugins decide what the
//! tenant may see and call from these fields.

/// One `[tenants.NAME]` entry, without its keys (they never leave the gateway's key table).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tenant {
    /// The tenant's name, `[tenants.NAME]`.
    pub name: String,
    /// The tool groups the tenant may ask for; `*` lets it ask for any.
    pub groups: Vec<String>,
    /// The access level its tools are judged at (`sandboxed` … `elevated`, or a custom one).
    pub access_level: Option<String>,
    /// Tool-name patterns the tenant may always call (below its denied list).
    pub allowed_tools: Vec<String>,
    /// Tool-name patterns the tenant may never call.
    pub denied_tools: Vec<String>,
    /// Agent identities this tenant may assert with `x-toolgate-agent`.
    pub agents: Vec<String>,
}

impl Tenant {
    /// Whether the tenant may ask for `group` (exact, case-sensitive).
    pub fn holds_group(&self, group: &str) -> bool {
        self.groups
            .iter()
            .any(|held| held == crate::catalog::WILDCARD || held == group)
    }
}
