//! The stream guard: relays a guarded SSE answer event by event. Text passes through as it
//! arrives; tool-call fragments are held until the calls they build are complete and checked,
//! then released as the upstream's own bytes, or replaced by a block. A block before any byte
//! was sent is a real 403; after, an SSE error frame ends the stream without `[DONE]`. When a
//! check edits a call's arguments (a redaction), the held events are released rewritten, and
//! every later event that repeats those arguments is rewritten too; other events keep their bytes.
//! On a chain that recovers from blocks (`on_block`), a block before anything was sent is
//! retried on a new upstream stream or answered with a message stream; the usage of blocked
//! attempts is read to their streams' end and added into the usage the client reads; and with
//! `hold_text` the text is held with the calls, so an answer with text can still recover.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderName, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::{mpsc, oneshot};
use toolgate_formats::sse::{SseEvent, SseParser};
use toolgate_formats::stream::{StreamAssembler, StreamRewriter, StreamStep, StreamUsage};
use toolgate_plugin::{Edit, ParseError, Parsed, Rejection, ToolCall, ToolResponse};

use crate::body::{BoxError, ChannelBody, Coalesce, ProxyBody};
use crate::error::{ErrorReport, GatewayError};
use crate::exchange::{AfterBlock, Discovered, Exchange};
use crate::on_block::{self, OnBlock, RetryOutcome};
use crate::rounds::{self, Round, Transport};
use crate::state::GatewayState;

/// The longest a blocked attempt's stream is waited on, per read, for the usage it reports.
const BILLING_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// What the client's response head will be.
enum Head {
    /// Stream with the upstream's head, plus header edits from the plugins.
    Stream(Vec<(HeaderName, HeaderValue)>),
    /// Blocked before anything was sent.
    Reject(Rejection),
    /// Failed before anything was sent.
    Fail(GatewayError),
}

/// Starts relaying `body` and returns the client's response once its head is decided.
///
/// The relay is built and spawned here, before the wait: the returned future holds only what
/// the head needs (the upstream's head, the channel the head comes through), not the exchange,
/// while a stream's first event may be seconds away.
pub fn guard(
    state: Arc<GatewayState>,
    mut exchange: Exchange,
    mut parts: http::response::Parts,
    body: Incoming,
    limit: usize,
) -> impl Future<Output = Response<ProxyBody>> + Send {
    exchange.streaming();
    let request_id = exchange.meta().request_id.clone();
    let shape = exchange.error_format();
    let (head_sender, head) = oneshot::channel();
    let (sender, client_body) = ChannelBody::channel(16);
    // Kept apart from the relay's, to end the client's body if the relay panics.
    let cut_off = sender.clone();
    // Under disclosure a round may turn out to be one of discovery, which the client must
    // never see: its text waits for the round's calls.
    let holds_text = exchange.route().chain.holds_text() || exchange.discloses();
    // Only a chain that recovers from blocks bills several attempts.
    let usage = exchange
        .recovers()
        .then(|| StreamUsage::new(exchange.format()));
    let relay = Relay {
        assembler: exchange.format().stream_assembler(),
        usage,
        upstream_ended: false,
        rewriter: StreamRewriter::new(exchange.format()),
        held: Vec::new(),
        held_bytes: 0,
        held_calls: false,
        holds_text,
        exchange,
        head: Some(head_sender),
        sender,
        preamble: BytesMut::new(),
        outbox: BytesMut::new(),
        unparsable_seen: false,
        events_seen: 0,
        limit,
        head_status: parts.status,
    };
    // Kept apart for the record of a relay that panics, which cannot close its exchange.
    let kept_for_panic = (
        state.clone(),
        relay.exchange.meta().clone(),
        relay.exchange.route().clone(),
        relay.exchange.started(),
    );
    // A burst of upstream frames comes as one, so its events leave in one client write. The body
    // is wrapped here, not in `run`, where the bare body and its wrapper would be two slots of the
    // task; and the relay's future is boxed before the `async` block that contains a panic takes
    // it, which would otherwise hold a second copy of it for the stream's whole life.
    let relaying = Box::pin(Box::new(relay).run(state, Coalesce::new(body)));
    tokio::spawn(async move {
        let (state, meta, route, started) = kept_for_panic;
        if crate::panics::contained(&meta.request_id, relaying)
            .await
            .is_none()
        {
            // The client's body ends in an error, so its connection is cut as a broken
            // upstream's would be, not closed as if the stream were whole. Before the head, the
            // head's channel is gone instead, and the client gets the 500 below.
            let _ = cut_off.send(Err(crate::panics::PANICKED.into())).await;
            Box::pin(Exchange::close_panicked(&state, meta, route, started, true)).await;
        }
    });
    async move {
        match head.await {
            Ok(Head::Stream(headers)) => {
                parts.headers.remove(header::CONTENT_LENGTH);
                for (name, value) in headers {
                    parts.headers.insert(name, value);
                }
                Response::from_parts(parts, client_body)
            }
            Ok(Head::Reject(rejection)) => {
                ErrorReport::of_rejection(&rejection, &request_id).response(shape)
            }
            Ok(Head::Fail(error)) => error.report(&request_id).response(shape),
            Err(_) => GatewayError::internal("the stream relay stopped unexpectedly")
                .report(&request_id)
                .response(shape),
        }
    }
}

/// Whether the relay goes on after an event.
enum Flow {
    Continue,
    Stop,
    /// The answer was blocked before any of it was sent, and the route retries: this request
    /// goes upstream, and its stream replaces the blocked one.
    Retry(Bytes),
    /// The answer was blocked before any of it was sent, and the route answers with a message
    /// in its place.
    Notice(Rejection),
}

struct Relay {
    exchange: Exchange,
    assembler: Box<dyn StreamAssembler>,
    /// The usage the current attempt reported so far, on a chain that recovers from blocks:
    /// a blocked attempt is billed in the answer that reaches the client.
    usage: Option<StreamUsage>,
    /// The current attempt's upstream stream has ended.
    upstream_ended: bool,
    /// Present until the head is decided.
    head: Option<oneshot::Sender<Head>>,
    sender: mpsc::Sender<Result<Bytes, BoxError>>,
    /// Events that show nothing yet, held until the head is sent.
    preamble: BytesMut,
    /// Events of tool calls awaiting their check (and whatever followed them), kept as events
    /// so that a check that edits their calls' arguments can release them rewritten.
    held: Vec<SseEvent>,
    /// The size of `held` on the wire, for the response limit.
    held_bytes: usize,
    /// Whether `held` has a call's events, which are checked before they are released.
    held_calls: bool,
    /// The route holds text too (`hold_text`): nothing of an answer is sent before the calls
    /// before it are checked, so a block can still be retried or answered with a message.
    holds_text: bool,
    /// Argument edits made so far; every event from then on passes through it.
    rewriter: StreamRewriter,
    /// What is ready for the client: sent once per burst of upstream frames, not once per
    /// event (one write for the many small events a burst usually carries).
    outbox: BytesMut,
    unparsable_seen: bool,
    /// Events read so far: a Responses error event is numbered after them.
    events_seen: u64,
    limit: usize,
    /// The status the client got, for metrics and the audit line.
    head_status: StatusCode,
}

/// The upstream's stream as the relay reads it, kept across the attempts of one answer: a
/// retry replaces the body and its events, not the bounds it is read within.
struct UpstreamEvents<'g, G> {
    body: Coalesce<Incoming>,
    parser: SseParser,
    /// The longest wait for the next bytes.
    read_timeout: std::time::Duration,
    /// Resolves when the gateway's shutdown grace is over.
    grace_over: std::pin::Pin<&'g mut G>,
}

impl<G> UpstreamEvents<'_, G> {
    /// Reads a retry's stream from its start.
    fn restart(&mut self, body: Incoming) {
        self.body = Coalesce::new(body);
        self.parser = SseParser::new();
    }
}

/// The relay's upstream answers, in the exchange's rounds: the first stream, then each retry's
/// stream, relayed by the one relay as if it were the first.
struct StreamAttempts<'r, 'g, G> {
    relay: &'r mut Relay,
    upstream: UpstreamEvents<'g, G>,
}

impl<G: Future<Output = ()> + Send> Transport for StreamAttempts<'_, '_, G> {
    /// The relay sends the client's answer itself.
    type Answer = ();

    fn exchange(&mut self) -> &mut Exchange {
        &mut self.relay.exchange
    }

    async fn read(&mut self, retry: Option<Response<Incoming>>) -> Round<()> {
        if let Some(response) = retry {
            let is_stream = response.status().is_success()
                && crate::upstream::is_event_stream(response.headers());
            if !is_stream {
                if !self.relay.exchange.retry_under_way() {
                    let error = Exchange::discovery_failed(response.status());
                    return Round::Unusable(Some(error));
                }
                return Round::Unusable(None);
            }
            self.relay.restart();
            self.upstream.restart(response.into_body());
        }
        let flow = self.relay.relay(&mut self.upstream).await;
        // A blocked attempt is billed, whether its place is taken by a retry or a notice.
        if let Flow::Retry(_) | Flow::Notice(_) = flow {
            Box::pin(self.relay.bill_blocked_attempt(&mut self.upstream)).await;
        }
        match flow {
            Flow::Retry(request) => Round::Again(request),
            Flow::Notice(rejection) => {
                self.relay.notice(&rejection);
                Round::Answered(())
            }
            Flow::Continue | Flow::Stop => Round::Answered(()),
        }
    }

    async fn answer_block(&mut self, rejection: Rejection) {
        Box::pin(self.relay.block(rejection)).await;
    }

    async fn answer_error(&mut self, error: GatewayError) {
        Box::pin(self.relay.fail(error)).await;
    }
}

/// What waiting for the upstream's next frame gave.
enum Wait {
    Frame(Option<Result<http_body::Frame<Bytes>, BoxError>>),
    TimedOut,
    ShuttingDown,
}

/// The next frame of `body` within `wait`, unless the shutdown grace ends first.
async fn next_frame<G: Future<Output = ()>>(
    body: &mut Coalesce<Incoming>,
    wait: std::time::Duration,
    grace_over: &mut std::pin::Pin<&mut G>,
) -> Wait {
    tokio::select! {
        next = tokio::time::timeout(wait, body.frame()) => next.map_or(Wait::TimedOut, Wait::Frame),
        () = grace_over.as_mut() => Wait::ShuttingDown,
    }
}

impl Relay {
    /// The relay task. Steps taken once or rarely (the check, a block, a failure, the closing
    /// audit) are awaited boxed: inline, their futures would be part of the task's state, and
    /// so of its memory, for the whole stream.
    ///
    /// The relay comes boxed: an async fn keeps a by-value `self` twice in its state (the
    /// argument and the local it is moved into), a kilobyte more per open stream.
    async fn run(mut self: Box<Self>, state: Arc<GatewayState>, body: Coalesce<Incoming>) {
        // Only LLM routes stream; an MCP route never reaches the relay.
        let read_timeout = self
            .exchange
            .route()
            .upstream()
            .map_or(std::time::Duration::from_secs(300), |upstream| {
                upstream.read_timeout
            });
        let upstream_started = Instant::now();
        let grace_over = state.grace_over.arrived();
        tokio::pin!(grace_over);
        let mut attempts = StreamAttempts {
            relay: &mut self,
            upstream: UpstreamEvents {
                body,
                parser: SseParser::new(),
                read_timeout,
                grace_over,
            },
        };
        rounds::run(&mut attempts).await;
        // A stream that ends having shown nothing still needs its head.
        if self.head.is_some() {
            let preamble = std::mem::take(&mut self.preamble).freeze();
            self.send(preamble).await;
        }
        self.flush().await;
        self.exchange.upstream_took(upstream_started.elapsed());
        drop(self.sender);
        Box::pin(self.exchange.finish(&state, self.head_status)).await;
    }

    /// Relays one upstream stream until it ends, the client leaves, or a block is retried.
    async fn relay<G: Future<Output = ()>>(
        &mut self,
        upstream: &mut UpstreamEvents<'_, G>,
    ) -> Flow {
        let parser = &mut upstream.parser;
        loop {
            let next = match next_frame(
                &mut upstream.body,
                upstream.read_timeout,
                &mut upstream.grace_over,
            )
            .await
            {
                Wait::Frame(next) => next,
                Wait::ShuttingDown => {
                    Box::pin(self.fail(GatewayError::shutting_down())).await;
                    return Flow::Stop;
                }
                Wait::TimedOut => {
                    Box::pin(self.fail(GatewayError::upstream_timeout("the stream stalled"))).await;
                    return Flow::Stop;
                }
            };
            let frame = match next {
                Some(Err(error)) => {
                    Box::pin(self.fail(GatewayError::upstream_failed(format!(
                        "the upstream stream was cut: {error}"
                    ))))
                    .await;
                    return Flow::Stop;
                }
                None => {
                    self.upstream_ended = true;
                    if let Some(event) = parser.finish() {
                        match self.on_event(event).await {
                            Flow::Continue => {}
                            flow => return flow,
                        }
                    }
                    if self.exchange.closes_on_doubt() && !self.assembler.ended() {
                        // Cut before its terminal event: the client must not take it for a
                        // whole answer, and calls still open were never finished.
                        Box::pin(self.fail(GatewayError::upstream_failed(
                            "the upstream stream ended before its terminal event",
                        )))
                        .await;
                        return Flow::Stop;
                    }
                    // The stream ended with calls still open: check them as they are, never
                    // release them unchecked. Held text alone is released as it is.
                    if self.held_calls {
                        return Box::pin(self.validate()).await;
                    }
                    self.release_held();
                    return Flow::Stop;
                }
                Some(Ok(frame)) => frame,
            };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if parser.buffered_len() + self.held_bytes + data.len() > self.limit {
                let mut error = GatewayError::response_too_large(self.limit);
                if self.holds_text {
                    error.message.push_str(
                        " while held until its tool calls were checked (hold_text); nothing of it was sent",
                    );
                }
                Box::pin(self.fail(error)).await;
                return Flow::Stop;
            }
            let mut events = parser.push(&data).into_iter();
            while let Some(event) = events.next() {
                match self.on_event(event).await {
                    Flow::Continue => {}
                    flow => {
                        // The rest of the burst is not relayed, but may report usage (a chat
                        // stream's last chunk comes with its finish).
                        if let Some(usage) = &mut self.usage {
                            events.for_each(|event| usage.observe(&event));
                        }
                        return flow;
                    }
                }
            }
            // Nothing more is at hand: what is queued leaves now, then wait.
            if let Flow::Stop = self.flush().await {
                return Flow::Stop;
            }
        }
    }

    /// Reads what is left of a blocked attempt's stream for the usage it reports (its last
    /// events), so that the answer the client gets bills it; nothing of it is sent. Bounded
    /// as the relay is (the response limit, the shutdown) and more tightly in time: the client
    /// waits meanwhile, and the usage follows the calls at once in every format, so a stream
    /// that stalls here is billed with what it reported rather than waited for.
    async fn bill_blocked_attempt<G: Future<Output = ()>>(
        &mut self,
        upstream: &mut UpstreamEvents<'_, G>,
    ) {
        let Some(mut usage) = self.usage.take() else {
            return;
        };
        let wait = upstream.read_timeout.min(BILLING_READ_TIMEOUT);
        let parser = &mut upstream.parser;
        let mut read = 0usize;
        while !self.upstream_ended {
            let data = match next_frame(&mut upstream.body, wait, &mut upstream.grace_over).await {
                Wait::Frame(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_) => continue,
                },
                Wait::Frame(None) => {
                    self.upstream_ended = true;
                    break;
                }
                Wait::Frame(Some(Err(_))) | Wait::TimedOut | Wait::ShuttingDown => break,
            };
            read += data.len();
            if read > self.limit {
                break;
            }
            for event in parser.push(&data) {
                usage.observe(&event);
            }
        }
        if let Some(event) = parser.finish() {
            usage.observe(&event);
        }
        self.exchange.bill_blocked_attempt(usage.take());
        self.usage = Some(usage);
    }

    /// Starts over for a retry's stream, as if it were the first; the usage of the blocked
    /// attempts is added into what the client will read.
    fn restart(&mut self) {
        self.exchange.capture_restart();
        self.assembler = self.exchange.format().stream_assembler();
        self.rewriter = StreamRewriter::new(self.exchange.format());
        if let Some(earlier) = self.exchange.blocked_usage() {
            self.rewriter.add_earlier_usage(earlier.clone());
        }
        self.upstream_ended = false;
        self.preamble.clear();
        self.unparsable_seen = false;
        self.events_seen = 0;
    }

    /// Decides the client's head; called once.
    fn decide_head(&mut self, head: Head) {
        self.head_status = match &head {
            Head::Stream(_) => self.head_status,
            Head::Reject(rejection) => rejection.status,
            Head::Fail(error) => error.status,
        };
        if let Some(sender) = self.head.take() {
            // The receiver is gone only when the client's request was dropped.
            let _ = sender.send(head);
        }
    }

    async fn on_event(&mut self, event: SseEvent) -> Flow {
        if let Some(usage) = &mut self.usage {
            usage.observe(&event);
        }
        self.exchange.capture_event(&event.raw);
        let step = self.assembler.observe(&event);
        self.events_seen += 1;
        if let Some(rejection) = self.exchange.refuse_event(step, &event) {
            self.exchange.record_block(&rejection);
            return Box::pin(self.block(rejection)).await;
        }
        if !self.held.is_empty() || step == StreamStep::ToolFragment {
            self.held_calls |= step == StreamStep::ToolFragment;
            self.hold(event);
            if self.assembler.calls_ready() {
                return Box::pin(self.validate()).await;
            }
            return Flow::Continue;
        }
        match step {
            StreamStep::Preamble if self.head.is_some() => {
                // Rewritten too: Anthropic's opening event reports usage.
                let bytes = self.rewritten(event);
                self.preamble.extend_from_slice(&bytes);
                Flow::Continue
            }
            // On a route that passes what it cannot read, the plugins judge the first such event
            // (`strict` blocks it). Closed on doubt, the guard has refused it above if a client
            // could read a call from it, so what is left passes as it is, below.
            StreamStep::Unrecognized
                if !self.unparsable_seen && !self.exchange.closes_on_doubt() =>
            {
                self.unparsable_seen = true;
                let error =
                    ParseError::new("a stream event that is not an event of the exchange's format");
                match Box::pin(self.check(Parsed::Unparsable(error))).await.0 {
                    Some(rejection) => Box::pin(self.block(rejection)).await,
                    None => self.pass(event).await,
                }
            }
            _ => self.pass(event).await,
        }
    }

    /// An event that shows the client something and needs no check: sent, or held with the
    /// rest of the answer when the route holds text.
    async fn pass(&mut self, event: SseEvent) -> Flow {
        if self.holds_text {
            self.hold(event);
            return Flow::Continue;
        }
        let bytes = self.rewritten(event);
        self.send(bytes).await
    }

    fn hold(&mut self, event: SseEvent) {
        self.held_bytes += event.raw.len();
        self.held.push(event);
    }

    /// Forgets what was held: it was blocked, or its stream failed.
    fn drop_held(&mut self) {
        self.held.clear();
        self.held_bytes = 0;
        self.held_calls = false;
    }

    /// Queues every held event for the client, in one write.
    fn release_held(&mut self) {
        if self.held.is_empty() {
            return;
        }
        // Straight into the outbox: a buffer of the released events first would be one more
        // copy of them alive, per stream, while the burst goes out.
        self.open_outbox();
        self.outbox.reserve(self.held_bytes);
        self.held_bytes = 0;
        self.held_calls = false;
        for event in std::mem::take(&mut self.held) {
            let bytes = self.rewritten(event);
            self.outbox.extend_from_slice(&bytes);
        }
    }

    /// The event's bytes for the client: rewritten when it carries an edited call's arguments.
    fn rewritten(&mut self, event: SseEvent) -> Bytes {
        if self.rewriter.is_active() {
            self.rewriter.rewrite(&event).unwrap_or(event.raw)
        } else {
            event.raw
        }
    }

    /// Checks the pending calls; releases what was held, or blocks.
    async fn validate(&mut self) -> Flow {
        let calls = self.assembler.take_calls();
        let reasoning = self.assembler.reasoning().map(str::to_owned);
        let response = ToolResponse { calls, reasoning };
        if self.exchange.discloses() {
            let nothing_sent = self.head.is_some();
            match Box::pin(
                self.exchange
                    .discovery_round(&response.calls, None, nothing_sent),
            )
            .await
            {
                Some(Discovered::Again(request)) => {
                    self.drop_held();
                    return Flow::Retry(request);
                }
                Some(Discovered::Refused(rejection, on_block)) => {
                    self.exchange.record_block(&rejection);
                    return self.recover(rejection, on_block, &response.calls).await;
                }
                None => {}
            }
        }
        if let Err(rejection) = self.exchange.verifiable(&response) {
            self.exchange.record_block(&rejection);
            return self.block(*rejection).await;
        }
        let calls = response.calls.clone();
        let outcome = self
            .exchange
            .pre_response(&Parsed::Parsed(response), StatusCode::OK)
            .await;
        let edits = outcome.response_edits;
        match outcome.blocked {
            Some(rejection) => self.recover(rejection, outcome.on_block, &calls).await,
            None => {
                if !edits.is_empty() {
                    self.rewriter.add_edits(&edits);
                }
                Box::pin(self.exchange.deliver(calls, &edits)).await;
                self.release_held();
                Flow::Continue
            }
        }
    }

    /// Runs `pre_response`; returns the block, if any, and the edits of the response.
    async fn check(&mut self, response: Parsed<ToolResponse>) -> (Option<Rejection>, Vec<Edit>) {
        let outcome = self.exchange.pre_response(&response, StatusCode::OK).await;
        (outcome.blocked, outcome.response_edits)
    }

    /// Queues bytes for the client, deciding the head (with any held preamble) first. They
    /// leave once no further upstream frame is at hand.
    async fn send(&mut self, bytes: Bytes) -> Flow {
        self.open_outbox();
        self.outbox.extend_from_slice(&bytes);
        Flow::Continue
    }

    /// Decides the head, if it is not yet, before anything is queued: the stream starts with
    /// the upstream's head and the preamble held for it.
    fn open_outbox(&mut self) {
        if self.head.is_some() {
            self.exchange.settle_retry(RetryOutcome::Passed);
            self.decide_head(Head::Stream(Vec::new()));
            let preamble = std::mem::take(&mut self.preamble);
            self.outbox.extend_from_slice(&preamble);
        }
    }

    /// Sends what is queued for the client.
    async fn flush(&mut self) -> Flow {
        if self.outbox.is_empty() {
            return Flow::Continue;
        }
        let out = std::mem::take(&mut self.outbox).freeze();
        match self.sender.send(Ok(out)).await {
            Ok(()) => Flow::Continue,
            // The client went away: stop reading the upstream.
            Err(_) => {
                self.exchange.record_client_gone();
                Flow::Stop
            }
        }
    }

    /// A block of the chain, answered as the blocking entries' `on_block` says: retried or
    /// answered with a message only while nothing was sent (the head is not decided); once
    /// the client has read part of the answer, the block ends the stream with its error frame.
    async fn recover(
        &mut self,
        rejection: Rejection,
        on_block: Option<OnBlock>,
        calls: &[ToolCall],
    ) -> Flow {
        self.exchange.settle_retry(RetryOutcome::Blocked);
        let nothing_sent = self.head.is_some();
        match self
            .exchange
            .after_block(rejection, on_block, calls, None, nothing_sent)
        {
            AfterBlock::Error(rejection) => self.block(rejection).await,
            AfterBlock::Message(rejection) => Flow::Notice(rejection),
            AfterBlock::Retry(request) => {
                self.drop_held();
                Flow::Retry(request)
            }
        }
    }

    /// The `message` answer as a whole stream of the format's events, in place of the blocked
    /// one (whose held preamble is dropped: the notice has its own opening events).
    fn notice(&mut self, rejection: &Rejection) {
        self.drop_held();
        self.preamble.clear();
        let mut headers = Vec::new();
        if let Some(value) = on_block::violations_header(&rejection.violations) {
            headers.push((HeaderName::from_static(on_block::VIOLATIONS_HEADER), value));
        }
        self.decide_head(Head::Stream(headers));
        let notice = self.exchange.block_notice(rejection, true);
        self.outbox.extend_from_slice(&notice);
    }

    async fn block(&mut self, rejection: Rejection) -> Flow {
        self.drop_held();
        // What was released before the block still goes, ahead of the error frame.
        self.flush().await;
        if self.head.is_some() {
            self.decide_head(Head::Reject(rejection));
        } else {
            let frame = ErrorReport::of_rejection(&rejection, &self.exchange.meta().request_id)
                .sse_frame(self.exchange.format(), self.events_seen);
            // A client that left needs no error frame.
            let _ = self.sender.send(Ok(frame)).await;
        }
        Flow::Stop
    }

    /// Ends the stream on an upstream failure. Held calls were never checked and are dropped.
    async fn fail(&mut self, error: GatewayError) {
        self.drop_held();
        self.flush().await;
        self.exchange.record_failure();
        tracing::warn!(request_id = %self.exchange.meta().request_id, code = error.code, message = %error.message, "stream failed");
        if self.head.is_some() {
            self.decide_head(Head::Fail(error));
        } else {
            let frame = error
                .report(&self.exchange.meta().request_id)
                .sse_frame(self.exchange.format(), self.events_seen);
            let _ = self.sender.send(Ok(frame)).await;
        }
    }
}
