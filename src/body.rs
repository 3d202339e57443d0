//! The body type the gateway sends both ways, and its constructors: whole buffers, nothing,
//! the upstream's body passed through (a burst of frames gathered into one), or frames fed from
//! a task through a channel.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use tokio::sync::mpsc;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Every body toolgate writes, to a client or to an upstream.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// What polling one of toolgate's bodies for its next frame gives.
pub type FramePoll = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

/// A body of bytes whose errors become a [`BoxError`]: what every reader and wrapper here
/// takes, whether it came from hyper, a client or a test.
pub trait ByteBody: Body<Data = Bytes, Error: Into<BoxError>> + Unpin {}

impl<B: Body<Data = Bytes, Error: Into<BoxError>> + Unpin> ByteBody for B {}

/// An error and its causes in one line. hyper's errors say little at the top ("error reading a
/// body from connection", "client error"); the cause (a bad chunk size line, a refused
/// connection) is what tells the reader what went wrong.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// An empty body, for the tests that need a response without one.
#[cfg(test)]
pub fn empty() -> ProxyBody {
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed()
}

/// Passes a body through with its bytes untouched (streamed, never buffered beyond a burst),
/// failing it if its source goes silent for longer than `idle`.
pub fn passthrough<B>(body: B, idle: Duration) -> ProxyBody
where
    B: ByteBody + Send + Sync + 'static,
{
    IdleTimeout::new(Coalesce::new(body), idle).boxed()
}

/// The most a burst of frames gathers into one write to the other side.
const COALESCE_BYTES: usize = 16 * 1024;

/// Hands on, as one frame, the data frames of a body that are already at hand.
///
/// hyper passes a body on one frame at a time from its connection's task, and the other side
/// writes each frame it gets as soon as it gets it. An event stream whose events arrive
/// together would leave in one write per event: a syscall, a segment and a wake-up of the
/// reader each. Gathering what is at hand sends the burst in one write: after each frame, a
/// few yields ([`BURST_YIELDS`]) let the connection's task pass on a frame it has already
/// read. A frame that arrives alone leaves after those yields, never held back waiting on the
/// network.
pub struct Coalesce<B> {
    inner: B,
    /// The first frame of the burst, kept as it is so a frame that arrives alone is not copied.
    first: Option<Bytes>,
    /// The burst's later frames, after a copy of the first.
    gathered: BytesMut,
    /// The yield in progress, or how many were made since the last frame arrived.
    yielding: Yield,
    /// What ended the burst when it is not data: handed on next.
    after: After,
}

/// What followed a burst. Boxed when it is a frame: rare, and a `HeaderMap` would otherwise
/// sit in every stream's state.
enum After {
    Nothing,
    End,
    Frame(Box<Result<Frame<Bytes>, BoxError>>),
}

impl<B> Coalesce<B> {
    pub fn new(inner: B) -> Self {
        Coalesce {
            inner,
            first: None,
            gathered: BytesMut::new(),
            yielding: Yield::Done(0),
            after: After::Nothing,
        }
    }

    fn held_bytes(&self) -> usize {
        self.first.as_ref().map_or(0, Bytes::len) + self.gathered.len()
    }

    fn hold(&mut self, data: Bytes) {
        match self.first.take() {
            None if self.gathered.is_empty() => self.first = Some(data),
            Some(first) => {
                self.gathered.reserve(first.len() + data.len());
                self.gathered.extend_from_slice(&first);
                self.gathered.extend_from_slice(&data);
            }
            None => self.gathered.extend_from_slice(&data),
        }
    }

    /// The burst as one frame; `None` when nothing is held.
    fn burst(&mut self) -> Option<Frame<Bytes>> {
        self.yielding = Yield::Done(0);
        let data = match self.first.take() {
            Some(first) => first,
            None if self.gathered.is_empty() => return None,
            // Taken whole, not split off: a split would leave the spare capacity, and with it the
            // burst's allocation, held by this body until its next burst.
            None => std::mem::take(&mut self.gathered).freeze(),
        };
        Some(Frame::data(data))
    }

    /// Hands on the held burst first, then `end` (the body's end, an error, or a non-data frame).
    fn end_burst(
        &mut self,
        end: Option<Result<Frame<Bytes>, BoxError>>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.burst() {
            Some(burst) => {
                self.after = match end {
                    None => After::End,
                    Some(frame) => After::Frame(Box::new(frame)),
                };
                Poll::Ready(Some(Ok(burst)))
            }
            None => Poll::Ready(end),
        }
    }
}

/// How many times a burst waits for the connection's task to pass on another frame. One
/// yield is not enough: measured, hyper's client passes the next frame on after the second.
pub const BURST_YIELDS: u8 = 2;

enum Yield {
    /// Yielding now; the count of yields made before this one.
    Yielding(Pin<Box<dyn Future<Output = ()> + Send + Sync>>, u8),
    /// The count of yields made since the last frame arrived.
    Done(u8),
}

impl<B: ByteBody> Body for Coalesce<B> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll {
        let this = self.get_mut();
        match std::mem::replace(&mut this.after, After::Nothing) {
            After::Nothing => {}
            After::End => return Poll::Ready(None),
            After::Frame(frame) => return Poll::Ready(Some(*frame)),
        }
        loop {
            if let Yield::Yielding(yielding, made) = &mut this.yielding {
                ready!(yielding.as_mut().poll(cx));
                this.yielding = Yield::Done(*made + 1);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    // A big frame is not copied into a burst: it follows the burst as it is.
                    Ok(data) if data.len() >= COALESCE_BYTES && this.held_bytes() > 0 => {
                        return this.end_burst(Some(Ok(Frame::data(data))));
                    }
                    Ok(data) => {
                        this.hold(data);
                        this.yielding = Yield::Done(0);
                        // A body of known length that is complete, or a burst big enough for
                        // one write, leaves at once.
                        if this.inner.is_end_stream() || this.held_bytes() >= COALESCE_BYTES {
                            return Poll::Ready(this.burst().map(Ok));
                        }
                    }
                    Err(frame) => return this.end_burst(Some(Ok(frame))),
                },
                Poll::Ready(end) => {
                    return this.end_burst(end.map(|result| result.map_err(Into::into)));
                }
                Poll::Pending => {
                    if this.held_bytes() == 0 {
                        return Poll::Pending;
                    }
                    let made = match this.yielding {
                        Yield::Done(made) if made < BURST_YIELDS => made,
                        _ => return Poll::Ready(this.burst().map(Ok)),
                    };
                    // tokio's yield runs the other ready tasks first, the connection's task
                    // among them; a bare self-wake could run this task again before it.
                    this.yielding = Yield::Yielding(Box::pin(tokio::task::yield_now()), made);
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self.after {
            After::End => true,
            After::Frame(_) => false,
            After::Nothing => self.held_bytes() == 0 && self.inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        // The bytes are the inner body's, only regrouped: what is held is still to come.
        let held = self.held_bytes() as u64;
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + held);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + held);
        }
        hint
    }
}

/// A body whose frames a task sends as they become ready. The stream ends when the sender is
/// dropped; an `Err` ends it with an error, so the client sees an aborted body rather than a
/// clean end.
pub struct ChannelBody {
    receiver: mpsc::Receiver<Result<Bytes, BoxError>>,
}

impl ChannelBody {
    pub fn channel(capacity: usize) -> (mpsc::Sender<Result<Bytes, BoxError>>, ProxyBody) {
        let (sender, receiver) = mpsc::channel(capacity);
        (sender, ChannelBody { receiver }.boxed())
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.receiver
            .poll_recv(cx)
            .map(|frame| frame.map(|result| result.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// A body that fails when its source stays silent longer than `timeout` between frames, so a
/// stalled peer cannot pin a connection (and a task) forever.
pub struct IdleTimeout<B> {
    inner: B,
    timeout: Duration,
    /// Since when the body waits: its first wait after a frame (or ever). `None` while it has
    /// not waited since, so a frame that comes without a wait reads no clock.
    waiting_since: Option<tokio::time::Instant>,
    deadline: WaitDeadline,
}

impl<B> IdleTimeout<B> {
    pub fn new(inner: B, timeout: Duration) -> Self {
        IdleTimeout {
            inner,
            timeout,
            waiting_since: None,
            deadline: WaitDeadline::default(),
        }
    }
}

/// The deadline of a body's wait on its source, as a timer armed only while the body waits.
/// Moved on every frame, a timer would be registered with the runtime's timer wheel (a lock)
/// once per frame; most frames come without a wait, and for them this costs nothing.
#[derive(Default)]
pub struct WaitDeadline(Option<Pin<Box<tokio::time::Sleep>>>);

impl WaitDeadline {
    /// Ready once `at` has passed; until then the task is woken at `at`.
    pub fn poll_at(&mut self, at: tokio::time::Instant, cx: &mut Context<'_>) -> Poll<()> {
        let timer = match &mut self.0 {
            Some(timer) => {
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
                timer
            }
            None => self.0.insert(Box::pin(tokio::time::sleep_until(at))),
        };
        timer.as_mut().poll(cx)
    }
}

/// The error an idle body ends with.
#[derive(Debug, thiserror::Error)]
#[error("no data for {0:?}")]
pub struct IdleTimeoutError(pub Duration);

impl<B: ByteBody> Body for IdleTimeout<B> {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                this.waiting_since = None;
                Poll::Ready(frame.map(|result| result.map_err(Into::into)))
            }
            Poll::Pending => {
                let since = *this
                    .waiting_since
                    .get_or_insert_with(tokio::time::Instant::now);
                match this.deadline.poll_at(since + this.timeout, cx) {
                    Poll::Ready(()) => {
                        Poll::Ready(Some(Err(Box::new(IdleTimeoutError(this.timeout)))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// How far past the bytes already arrived a body's buffer is reserved for what its head
/// announced.
const RESERVE_AHEAD: usize = 1 << 20;

/// Reads a whole body, refusing more than `limit` bytes. `Ok(None)` means the limit was hit.
pub async fn collect_limited<B: ByteBody>(
    mut body: B,
    limit: usize,
) -> Result<Option<Bytes>, BoxError> {
    let announced = body.size_hint().lower();
    if announced > limit as u64 {
        return Ok(None);
    }
    // A body of several frames is gathered in one allocation of the size its head announced
    // (within the limit, checked above), not in a buffer that doubles as frames come, each
    // doubling a new allocation and a copy of what it held. Never more than `RESERVE_AHEAD`
    // past what has arrived: a client announcing the limit and sending two small frames must
    // not make each of its connections hold the limit.
    let announced = announced as usize;
    let mut buffer = bytes::BytesMut::new();
    let mut single: Option<Bytes> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(Into::into)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let held = single.as_ref().map_or(0, Bytes::len) + buffer.len();
        if held + data.len() > limit {
            return Ok(None);
        }
        // Most bodies arrive in one frame: keep it as is rather than copy it.
        match single.take() {
            None if buffer.is_empty() => single = Some(data),
            Some(first) => {
                let arrived = first.len() + data.len();
                buffer.reserve(announced.min(arrived + RESERVE_AHEAD).max(arrived));
                buffer.extend_from_slice(&first);
                buffer.extend_from_slice(&data);
            }
            None => buffer.extend_from_slice(&data),
        }
    }
    Ok(Some(single.unwrap_or_else(|| buffer.freeze())))
}

/// A JSON answer of the admin listener and the console.
pub fn json(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut response = Response::new(full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use http::HeaderMap;

    use super::*;

    /// A body that plays a script: each step is what one poll returns. A `Pending` step wakes
    /// its poller at once, as a connection's task does when it passes the next frame on.
    struct Scripted(VecDeque<Step>);

    /// What one poll of a body returns.
    type Step = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

    impl Scripted {
        fn new(steps: Vec<Step>) -> Self {
            Scripted(steps.into())
        }
    }

    impl Body for Scripted {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Step {
            match self.0.pop_front() {
                Some(Poll::Pending) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                Some(ready) => ready,
                None => Poll::Ready(None),
            }
        }
    }

    fn data(text: &'static str) -> Step {
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(text.as_bytes())))))
    }

    /// A scripted body whose head announced `announced` bytes (an exact size hint), true or not.
    struct Announced(Scripted, u64);

    impl Body for Announced {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Step {
            Pin::new(&mut self.0).poll_frame(cx)
        }

        fn size_hint(&self) -> SizeHint {
            SizeHint::with_exact(self.1)
        }
    }

    #[tokio::test]
    async fn a_body_of_several_frames_is_read_whole_whatever_its_head_announced() {
        let steps = || vec![data("ab"), Poll::Pending, data("cd"), data("ef")];
        for announced in [0, 2, 6, 100] {
            let whole = collect_limited(Announced(Scripted::new(steps()), announced), 100).await;
            let whole = whole.ok().flatten();
            assert_eq!(whole.as_deref(), Some(&b"abcdef"[..]), "{announced}");
        }
        // Past the limit, announced or not.
        let announced = collect_limited(Announced(Scripted::new(steps()), 7), 6).await;
        assert!(matches!(announced, Ok(None)));
        let sent = collect_limited(Announced(Scripted::new(steps()), 2), 5).await;
        assert!(matches!(sent, Ok(None)));
        let one_frame = collect_limited(Announced(Scripted::new(vec![data("ab")]), 2), 5).await;
        assert_eq!(one_frame.ok().flatten().as_deref(), Some(&b"ab"[..]));
    }

    /// What the body hands on, frame by frame: data as text, trailers and errors by name.
    async fn frames(body: impl Body<Data = Bytes, Error = BoxError> + Unpin) -> Vec<String> {
        let mut body = body;
        let mut seen = Vec::new();
        while let Some(frame) = body.frame().await {
            seen.push(match frame {
                Ok(frame) if frame.is_data() => match frame.into_data() {
                    Ok(data) => String::from_utf8_lossy(&data).into_owned(),
                    Err(_) => unreachable!("checked to be data"),
                },
                Ok(_) => "<trailers>".to_owned(),
                Err(error) => format!("<error: {error}>"),
            });
        }
        seen
    }

    #[tokio::test]
    async fn frames_at_hand_leave_together_and_a_pause_ends_the_burst() {
        let body = Coalesce::new(Scripted::new(vec![
            data("a"),
            data("b"),
            // Pauses shorter than the yields: the frame after them joins the burst.
            Poll::Pending,
            data("c"),
            Poll::Pending,
            Poll::Pending,
            data("d"),
            // Nothing came during the yields: the burst leaves.
            Poll::Pending,
            Poll::Pending,
            Poll::Pending,
            data("e"),
            Poll::Pending,
            Poll::Pending,
            Poll::Pending,
        ]));
        assert_eq!(frames(body).await, ["abcd", "e"]);
    }

    #[tokio::test]
    async fn the_end_an_error_or_trailers_follow_the_burst_they_end() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", http::HeaderValue::from_static("1"));
        let body = Coalesce::new(Scripted::new(vec![
            data("a"),
            data("b"),
            Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
        ]));
        assert_eq!(frames(body).await, ["ab", "<trailers>"]);

        let body = Coalesce::new(Scripted::new(vec![
            data("a"),
            Poll::Ready(Some(Err("cut".into()))),
        ]));
        assert_eq!(frames(body).await, ["a", "<error: cut>"]);
    }

    #[tokio::test]
    async fn a_burst_is_bounded_and_its_bytes_are_kept_in_order() {
        let chunk = "x".repeat(COALESCE_BYTES / 2);
        let chunk: &'static str = chunk.leak();
        let big = "y".repeat(COALESCE_BYTES);
        let big: &'static str = big.leak();
        let body = Coalesce::new(Scripted::new(vec![
            data("<"),
            data(chunk),
            data(chunk),
            // The burst is now past the bound: it leaves, and the rest forms the next one.
            data(chunk),
            // A big frame ends the burst before it and passes as it is.
            data(big),
            data(">"),
        ]));
        let seen = frames(body).await;
        let lengths: Vec<usize> = seen.iter().map(String::len).collect();
        assert_eq!(
            lengths,
            [1 + COALESCE_BYTES, COALESCE_BYTES / 2, COALESCE_BYTES, 1]
        );
        assert_eq!(seen.concat(), format!("<{chunk}{chunk}{chunk}{big}>"));
    }

    #[tokio::test]
    async fn a_whole_body_passes_as_it_is_with_its_length() {
        let body = Coalesce::new(Full::new(Bytes::from_static(b"{\"id\":1}")));
        assert_eq!(body.size_hint().exact(), Some(8));
        let body = body.map_err(|never: BoxError| never);
        assert_eq!(frames(body).await, ["{\"id\":1}"]);
    }
}
