//! The Anthropic Messages adapter (`/v1/messages`). (Interface; filled in by the formats work.)

use bytes::Bytes;

use super::{ParseError, ToolRequest, ToolResponse};
use crate::tool::HistoryCall;
use crate::verdict::Edit;

pub(super) fn parse_request(_body: Bytes) -> Result<ToolRequest, ParseError> {
    Err(ParseError::new("Anthropic Messages are not read yet"))
}

pub(super) fn parse_response(_body: &[u8]) -> Result<ToolResponse, ParseError> {
    Err(ParseError::new("Anthropic Messages are not read yet"))
}

pub(super) fn apply_request_edits(
    _body: &[u8],
    _edits: &[Edit],
) -> Result<Option<Bytes>, ParseError> {
    Ok(None)
}

pub(super) fn latest_user_text(_body: &[u8]) -> Option<String> {
    None
}

pub(super) fn history(_body: &[u8]) -> Vec<HistoryCall> {
    Vec::new()
}
