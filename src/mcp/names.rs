//! MCP tool names as toolgate shows them: `server__tool`, qualified by the backend server so
//! two servers' tools never collide, and still a valid MCP tool name (1–128 of `A-Za-z0-9_.-`)
//! that every LLM API accepts as a function name (`.` is not one of them: OpenAI's function
//! names are `A-Za-z0-9_-`). `tools/call` also takes seed 004's `server:tool`, and a bare
//! `tool` when exactly one permitted server has it.

pub use crate::config::mcp::{MAX_TOOL_NAME, SEPARATOR};

/// Whether `name` is a valid MCP tool name.
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'-'))
}

/// The name a backend tool is listed under, or `None` when the result would not be a valid
/// MCP tool name (too long, or the backend's own name has characters MCP does not allow).
pub fn qualify(server: &str, tool: &str) -> Option<String> {
    let qualified = format!("{server}{SEPARATOR}{tool}");
    is_valid_tool_name(&qualified).then_some(qualified)
}

/// A tool name as a client wrote it in `tools/call`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestedTool<'a> {
    /// `server__tool` or `server:tool`.
    Qualified { server: &'a str, tool: &'a str },
    /// A bare tool name, to be found on exactly one permitted server.
    Bare(&'a str),
}

/// Reads a requested name. `is_server` tells known server names: `a__b` is qualified only when
/// `a` is a server, so a backend tool whose own name contains `__` can still be called bare.
pub fn parse_requested<'a>(name: &'a str, is_server: impl Fn(&str) -> bool) -> RequestedTool<'a> {
    if let Some((server, tool)) = name.split_once(':') {
        return RequestedTool::Qualified { server, tool };
    }
    if let Some((server, tool)) = name.split_once(SEPARATOR)
        && is_server(server)
    {
        return RequestedTool::Qualified { server, tool };
    }
    RequestedTool::Bare(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::mcp::server_name_problem;

    #[test]
    fn server_names_keep_the_split_unambiguous() {
        for good in ["memory", "fs-1", "git_hub", "A9"] {
            assert_eq!(server_name_problem(good), None, "{good}");
        }
        for bad in [
            "",
            "a__b",
            "trailing_",
            "dot.ted",
            "sp ace",
            &"x".repeat(49),
        ] {
            assert!(server_name_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn qualified_names_are_valid_mcp_names_or_nothing() {
        assert_eq!(
            qualify("memory", "read_graph").as_deref(),
            Some("memory__read_graph")
        );
        assert_eq!(qualify("fs", "a.b-c").as_deref(), Some("fs__a.b-c"));
        assert_eq!(qualify("fs", &"t".repeat(126)), None);
        assert_eq!(qualify("fs", "has space"), None);
        assert!(is_valid_tool_name(&"t".repeat(128)));
        assert!(!is_valid_tool_name(""));
    }

    #[test]
    fn requested_names_are_read_in_every_accepted_form() {
        let servers = |name: &str| matches!(name, "memory" | "fs");
        assert_eq!(
            parse_requested("memory__read_graph", servers),
            RequestedTool::Qualified {
                server: "memory",
                tool: "read_graph"
            }
        );
        assert_eq!(
            parse_requested("memory:read_graph", servers),
            RequestedTool::Qualified {
                server: "memory",
                tool: "read_graph"
            }
        );
        assert_eq!(
            parse_requested("fs__x__y", servers),
            RequestedTool::Qualified {
                server: "fs",
                tool: "x__y"
            }
        );
        assert_eq!(
            parse_requested("x__y", servers),
            RequestedTool::Bare("x__y")
        );
        assert_eq!(
            parse_requested("echo", servers),
            RequestedTool::Bare("echo")
        );
    }
}
