//! An exchange recovering from a block (`on_block`): what a block becomes, the conversation
//! sent again with the blocked calls answered, the usage of blocked attempts billed, and the
//! `message` answer in place of a block.

use std::time::Instant;

use bytes::Bytes;
use toolgate_plugin::{Rejection, ToolCall};

use super::Exchange;
use crate::body::ProxyBody;
use crate::error::GatewayError;
use crate::on_block::{self, AttemptRecord, OnBlock, RetryOutcome};

/// What a blocked answer becomes.
pub enum AfterBlock {
    /// The block's own answer (the 403 with the violations).
    Error(Rejection),
    /// A 200 whose assistant text says what was blocked.
    Message(Rejection),
    /// This request goes upstream again: the conversation with the blocked calls answered.
    /// The block stays with the exchange: the client gets it if the retry fails.
    Retry(Bytes),
}

impl Exchange {
    /// What a block of an answer becomes, by the blocking entries' `on_block`: the 403, the
    /// message, or the conversation sent again with each blocked call answered by why it did
    /// not run — while retries are left, the deadline is not past, and nothing of the answer
    /// has reached the client (`nothing_sent`; else the block's own answer). `calls` are the
    /// blocked answer's, `usage` what its upstream reported.
    pub fn after_block(
        &mut self,
        rejection: Rejection,
        on_block: Option<OnBlock>,
        calls: &[ToolCall],
        usage: Option<serde_json::Value>,
        nothing_sent: bool,
    ) -> AfterBlock {
        let Some(recovery) = self.recovery.as_mut() else {
            return AfterBlock::Error(rejection);
        };
        recovery.add_usage(usage);
        let limits = match on_block {
            Some(OnBlock::Message) if nothing_sent => {
                self.annotations
                    .insert("on_block".to_owned(), "message".into());
                return AfterBlock::Message(rejection);
            }
            Some(OnBlock::Retry(limits)) if nothing_sent => limits,
            _ => return AfterBlock::Error(rejection),
        };
        let retries = recovery.attempts.len() as u32;
        if retries >= limits.max_retries
            || self.started.elapsed() >= limits.deadline
            || recovery.head.is_none()
        {
            return AfterBlock::Error(rejection);
        }
        // The turn of one choice is what goes back: the one the first violation names.
        let choice = rejection
            .violations
            .iter()
            .find_map(|violation| violation.choice)
            .or_else(|| calls.first().map(|call| call.choice));
        let turn: Vec<ToolCall> = calls
            .iter()
            .filter(|call| Some(call.choice) == choice)
            .cloned()
            .collect();
        let declared = self
            .request
            .as_parsed()
            .map_or(&[][..], |request| &*request.declared_tools);
        let feedback = on_block::feedback(&turn, &rejection, declared);
        let continued = match self.disclosed_retry(&feedback) {
            Some(continued) => continued,
            None => match self.recovery.as_ref() {
                Some(recovery) => self.format.retry_request(&recovery.body, &feedback),
                None => return AfterBlock::Error(rejection),
            },
        };
        let Some(recovery) = self.recovery.as_mut() else {
            return AfterBlock::Error(rejection);
        };
        match continued {
            Ok(body) => {
                recovery.body = body.clone();
                recovery.attempts.push(AttemptRecord {
                    attempt: retries + 1,
                    violations: std::mem::take(&mut self.violations),
                });
                recovery.retrying = Some(rejection);
                self.blocked = false;
                AfterBlock::Retry(body)
            }
            Err(error) => {
                tracing::warn!(request_id = %self.meta.request_id, %error, "the blocked answer cannot be retried; answering the block");
                AfterBlock::Error(rejection)
            }
        }
    }

    /// Adds a blocked attempt's usage, once known, to what the answer that reaches the client
    /// bills (a stream reports it after the calls that were blocked).
    pub fn bill_blocked_attempt(&mut self, usage: Option<serde_json::Value>) {
        if let Some(recovery) = self.recovery.as_mut() {
            recovery.add_usage(usage);
        }
    }

    /// Whether the route recovers from blocks, and this exchange keeps what a retry needs.
    pub fn recovers(&self) -> bool {
        self.recovery.is_some()
    }

    /// The usage of the attempts blocked so far, summed.
    pub fn blocked_usage(&self) -> Option<&serde_json::Value> {
        self.recovery.as_ref()?.usage.as_ref()
    }

    /// Sends the conversation upstream again, with the request's head as it first went.
    pub async fn resend(
        &mut self,
        body: Bytes,
    ) -> Result<http::Response<hyper::body::Incoming>, GatewayError> {
        let upstream = self.route.upstream().cloned();
        let head = self
            .recovery
            .as_ref()
            .and_then(|recovery| recovery.head.clone());
        let (Some(upstream), Some(head)) = (upstream, head) else {
            return Err(GatewayError::internal(
                "a retry without its upstream request",
            ));
        };
        let mut request = http::Request::new(crate::body::full(body));
        *request.method_mut() = head.method;
        *request.uri_mut() = head.uri;
        *request.version_mut() = http::Version::HTTP_11;
        *request.headers_mut() = head.headers;
        let started = Instant::now();
        let response = upstream.send(request).await;
        self.upstream_time += started.elapsed();
        Ok(response?)
    }

    /// The latest retry got no answer to check (an error status, a cut): the exchange ends
    /// with the block that retry answered, as if it had not been tried. `None` when no retry
    /// was under way.
    ///
    /// The audit line says so (`retry_failed`: the attempt, and the error when there is one):
    /// without it, a block whose retry failed reads as one never retried.
    pub fn retry_failed(&mut self, why: Option<&GatewayError>) -> Option<Rejection> {
        let recovery = self.recovery.as_mut()?;
        let rejection = recovery.retrying.take()?;
        recovery.outcomes.push(RetryOutcome::Failed);
        let failed_attempt = recovery.attempts.len() + 1;
        if let Some(attempt) = recovery.attempts.pop() {
            self.violations = attempt.violations;
        }
        let mut failed = serde_json::json!({"attempt": failed_attempt});
        if let Some(error) = why {
            failed["status"] = error.status.as_u16().into();
            failed["code"] = error.code.into();
        }
        self.annotations.insert("retry_failed".to_owned(), failed);
        self.blocked = true;
        Some(rejection)
    }

    /// Whether a retry after a block (`on_block = "retry"`) is under way: its answer stands
    /// in for the block's.
    pub fn retry_under_way(&self) -> bool {
        self.recovery
            .as_ref()
            .is_some_and(|recovery| recovery.retrying.is_some())
    }

    /// Records what became of the retry under way, if one is: its answer reached the client,
    /// or was blocked again.
    pub fn settle_retry(&mut self, outcome: RetryOutcome) {
        if let Some(recovery) = self.recovery.as_mut()
            && recovery.retrying.take().is_some()
        {
            recovery.outcomes.push(outcome);
        }
    }

    /// The `message` answer's body: whole, or as the events of a stream.
    pub fn block_notice(&self, rejection: &Rejection, streamed: bool) -> Bytes {
        let text = on_block::message_text(rejection);
        let toolgate = serde_json::json!({
            "blocked": true,
            "request_id": self.meta.request_id,
            "violations": rejection.violations,
        });
        let model = self
            .request
            .as_parsed()
            .and_then(|request| request.model.as_deref())
            .unwrap_or("toolgate");
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let notice = toolgate_formats::on_block::BlockNotice {
            request_id: &self.meta.request_id,
            model,
            text: &text,
            toolgate: &toolgate,
            usage: self
                .recovery
                .as_ref()
                .and_then(|recovery| recovery.usage.as_ref()),
            created,
        };
        if streamed {
            self.format.block_message_stream(&notice)
        } else {
            self.format.block_message(&notice)
        }
    }

    /// The `message` answer of a whole (non-streamed) exchange.
    pub fn message_response(&self, rejection: &Rejection) -> http::Response<ProxyBody> {
        let mut response =
            http::Response::new(crate::body::full(self.block_notice(rejection, false)));
        let headers = response.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        if let Some(value) = on_block::violations_header(&rejection.violations) {
            headers.insert(on_block::VIOLATIONS_HEADER, value);
        }
        response
    }

    /// The answer a client gets for a block of a whole answer, by `after_block`'s choice.
    pub fn blocked_answer(&self, after: AfterBlock) -> Option<http::Response<ProxyBody>> {
        match after {
            AfterBlock::Error(rejection) => Some(self.block_response(&rejection)),
            AfterBlock::Message(rejection) => Some(self.message_response(&rejection)),
            AfterBlock::Retry(_) => None,
        }
    }
}
