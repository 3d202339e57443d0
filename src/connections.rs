//! The proxy listener's connections: every phase of one bounded (the first byte, the handshake
//! up to its first request head, each HTTP/1 request head, idleness between exchanges, and
//! each wait for the client to accept an answer's bytes), and at `max_connections` the
//! connection idle or stalled the longest closed for a new client, so sockets that do no work —
//! a slowloris, forgotten keep-alives, a client that stopped reading — never lock out a client
//! that would. A connection hyper ends is closed lingering, as nginx does: its write half shut
//! and what the client still sends read and dropped for a bounded time, so an early answer
//! (a 413 before the body was read) reaches a client still sending rather than a reset.
//!
//! Reclaiming rather than a per-peer limit: behind a load balancer or a NAT every client is one
//! peer, so a per-peer cap would either starve them all or cap nothing, and a spread-out attacker
//! has many peers. What tells a useful connection from a useless one is whether it does work.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use http::{HeaderValue, Response, header};
use http_body::{Body, SizeHint};
use hyper_util::server::graceful::GracefulConnection;
use tokio::sync::{AcquireError, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::body::{BoxError, FramePoll, ProxyBody};
use crate::config::ServerConfig;

mod socket;

use socket::SocketQueues;
pub use socket::WatchedStream;

/// How long a connection must have been idle to be closed for a new client. A connection just
/// accepted has had no time to send its request, and one that just answered may be about to
/// take the next: closing either would lose a request rather than reclaim a useless socket.
const RECLAIMABLE_AFTER: Duration = Duration::from_millis(500);

/// How often a new client waiting at the cap looks again for a connection idle long enough.
const RECLAIM_RETRY: Duration = Duration::from_millis(100);

/// The deadlines of a connection's phases.
#[derive(Debug, Clone, Copy)]
pub struct PhaseDeadlines {
    pub first_byte: Duration,
    pub handshake: Duration,
    pub idle: Duration,
    /// `write_timeout`: the longest wait for the client to accept any byte of an answer.
    pub write: Duration,
    /// `header_read_timeout`: an HTTP/1 head, counted from the first byte of the connection or
    /// from the end of the exchange before it. Kept here rather than by hyper, which arms a
    /// timer of its own for every head; this task's one timer bounds every phase.
    pub head: Duration,
}

impl PhaseDeadlines {
    pub fn of(server: &ServerConfig) -> Self {
        PhaseDeadlines {
            first_byte: server.first_byte_timeout,
            handshake: server.handshake_timeout,
            idle: server.idle_timeout,
            write: server.write_timeout,
            head: server.header_read_timeout,
        }
    }

    /// How long a connection may wait for its next exchange, the one bound `drive` looks again
    /// by: an HTTP/1 connection's wait for a head is the shorter of the two.
    fn between_exchanges(&self, http1: bool) -> (Duration, &'static str) {
        if http1 && self.head < self.idle {
            (
                self.head,
                "sent no complete request head within header_read_timeout_ms",
            )
        } else {
            (self.idle, "idle longer than idle_timeout_ms")
        }
    }
}

/// Every open connection of the listener.
pub struct Connections {
    open: Mutex<HashMap<u64, Arc<ConnectionState>>>,
    next_id: AtomicU64,
    /// Idle times are kept as milliseconds since this instant, in an atomic.
    epoch: Instant,
    /// Set when the listener stops: each connection finishes what is in flight and closes.
    draining: AtomicBool,
    /// Notified when the last connection closes while draining.
    all_closed: Notify,
}

/// What the listener knows of one connection.
pub struct ConnectionState {
    id: u64,
    accepted: Instant,
    epoch: Instant,
    /// Exchanges whose answer is not yet wholly handed to hyper.
    in_flight: AtomicUsize,
    first_byte_seen: AtomicBool,
    /// Milliseconds from `epoch` to the first byte, once `first_byte_seen`.
    first_byte_at: AtomicU64,
    /// The client's first bytes were not HTTP/2's preface: its heads are bounded.
    http1: AtomicBool,
    first_request_seen: AtomicBool,
    /// Milliseconds from `epoch` to when the last exchange ended, or to the last byte written
    /// after it: a connection is idle only once nothing is left to write.
    idle_since: AtomicU64,
    /// One more than the milliseconds from `epoch` to when a write first found the client's
    /// window full, since the last byte it accepted; 0 while writes go through.
    write_blocked_since: AtomicU64,
    /// One more than the milliseconds from `epoch` to the first byte an HTTP/1 client sent
    /// after its connection went idle: the next request's head has begun, and the connection
    /// is no longer idle but bounded by `header_read_timeout`. 0 while no head is under way.
    head_began: AtomicU64,
    /// Closed by one of its deadlines (not ended by hyper): no lingering for it.
    cut: AtomicBool,
    /// The client socket, to read how much of what was written it still holds, and whether
    /// bytes it sent wait unread.
    queues: SocketQueues,
    /// What the send queue held when the current wait began (or was last seen to shrink).
    queued_at_block: AtomicU64,
    /// Chosen to make room for a new client: closed as soon as it is idle.
    reclaimed: AtomicBool,
    /// Set, and the connection's task woken, when it is reclaimed (the one change that moves
    /// its deadline nearer than the time its task looks again) and when the listener drains.
    look_again: AtomicBool,
    /// The connection's task. Not a `Notify`: the task checks for a wake each time it runs,
    /// after every read and write of its connection, and a `Notify` takes a lock for that.
    task: AtomicWaker,
    registry: Arc<Connections>,
}

impl Connections {
    pub fn new() -> Arc<Self> {
        Arc::new(Connections {
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            epoch: Instant::now(),
            draining: AtomicBool::new(false),
            all_closed: Notify::new(),
        })
    }

    fn open(&self) -> MutexGuard<'_, HashMap<u64, Arc<ConnectionState>>> {
        // The map stays consistent whatever a panicking holder did: inserts and removes only.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a new connection; it is forgotten when its [`Registered`] guard drops.
    pub fn register(self: &Arc<Self>) -> Registered {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let state = Arc::new(ConnectionState {
            id,
            accepted: Instant::now(),
            epoch: self.epoch,
            in_flight: AtomicUsize::new(0),
            first_byte_seen: AtomicBool::new(false),
            first_byte_at: AtomicU64::new(0),
            http1: AtomicBool::new(false),
            first_request_seen: AtomicBool::new(false),
            idle_since: AtomicU64::new(0),
            write_blocked_since: AtomicU64::new(0),
            head_began: AtomicU64::new(0),
            cut: AtomicBool::new(false),
            queues: SocketQueues::default(),
            queued_at_block: AtomicU64::new(0),
            reclaimed: AtomicBool::new(false),
            look_again: AtomicBool::new(false),
            task: AtomicWaker::new(),
            registry: self.clone(),
        });
        self.open().insert(id, state.clone());
        Registered(state)
    }

    /// Connections open now.
    pub fn count(&self) -> usize {
        self.open().len()
    }

    /// Has every open connection finish its exchanges in flight and close, as hyper's graceful
    /// shutdown does (an idle one closes at once); completes when all are closed. Each
    /// connection's own task starts its shutdown, woken here once, so serving pays nothing for
    /// it (a shutdown signal a connection polled would be looked at every time its task runs).
    pub async fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        for connection in self.open().values() {
            connection.wake();
        }
        loop {
            let all_closed = self.all_closed.notified();
            tokio::pin!(all_closed);
            all_closed.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            all_closed.await;
        }
    }

    /// Closes the connection idle, or stalled on a client that accepts no bytes, the longest
    /// (never one with an exchange in flight that writes, nor one idle or stalled for less than
    /// [`RECLAIMABLE_AFTER`]); false when there is none.
    fn reclaim_idlest(&self) -> bool {
        let now = millis_between(self.epoch, Instant::now());
        let recent = u64::try_from(RECLAIMABLE_AFTER.as_millis()).unwrap_or(u64::MAX);
        let open = self.open();
        let idlest = open
            .values()
            .filter(|connection| !connection.is_reclaimed())
            // A request that reached the socket is served, not dropped with it.
            .filter(|connection| connection.queues.unread().is_none_or(|unread| unread == 0))
            .filter(|connection| {
                connection.write_blocked_since().is_none() || !connection.reading_while_blocked()
            })
            .filter_map(|connection| Some((connection.useless_since_millis()?, connection)))
            .filter(|(since, _)| now.saturating_sub(*since) >= recent)
            .min_by_key(|(since, _)| *since)
            .map(|(_, connection)| connection);
        match idlest {
            Some(connection) => {
                connection.reclaimed.store(true, Ordering::Release);
                connection.wake();
                tracing::debug!(
                    connection = connection.id,
                    "reclaiming an idle or stalled connection for a new client"
                );
                true
            }
            None => false,
        }
    }

    /// A slot for a client already accepted while every slot is taken: the idlest connection
    /// is closed for it, or, when all are busy, the first to end or stay idle makes room.
    pub async fn make_room(
        &self,
        slots: &Arc<Semaphore>,
    ) -> Result<OwnedSemaphorePermit, AcquireError> {
        let mut reclaimed = false;
        loop {
            if !reclaimed {
                reclaimed = self.reclaim_idlest();
            }
            tokio::select! {
                permit = slots.clone().acquire_owned() => return permit,
                () = tokio::time::sleep(RECLAIM_RETRY), if !reclaimed => {}
            }
        }
    }
}

/// A connection's entry in the registry, removed when the connection's task ends.
pub struct Registered(Arc<ConnectionState>);

impl Registered {
    pub fn state(&self) -> &Arc<ConnectionState> {
        &self.0
    }
}

/// What an exchange knows of the listener's drain, through its connection.
#[derive(Clone)]
pub struct DrainSignal(Arc<ConnectionState>);

impl DrainSignal {
    pub fn of(registered: &Registered) -> Self {
        DrainSignal(registered.0.clone())
    }

    /// Whether the connection was closed because its client accepted no bytes in time.
    pub fn closed_stalled(&self) -> bool {
        self.0.cut.load(Ordering::Acquire) && self.0.write_blocked_since().is_some()
    }

    /// Whether the drain has begun.
    pub fn began(&self) -> bool {
        self.0.registry.draining.load(Ordering::Acquire)
    }

    /// Whether the drain's beginning runs the exchange again: an HTTP/1 exchange is polled by
    /// its connection's task, which the drain wakes. HTTP/2 runs each exchange as a task of
    /// its own, which nothing here can wake.
    pub fn runs_exchanges_again(&self) -> bool {
        self.0.http1.load(Ordering::Acquire)
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let registry = &self.0.registry;
        let mut open = registry.open();
        open.remove(&self.0.id);
        if open.is_empty() && registry.draining.load(Ordering::Acquire) {
            registry.all_closed.notify_waiters();
        }
    }
}

impl ConnectionState {
    /// Has the connection's task look at its deadline again.
    fn wake(&self) {
        self.look_again.store(true, Ordering::Release);
        self.task.wake();
    }

    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// When the head of the next request began arriving on an idle HTTP/1 connection.
    fn head_began(&self) -> Option<Instant> {
        match self.head_began.load(Ordering::Acquire) {
            0 => None,
            began => Some(self.epoch + Duration::from_millis(began - 1)),
        }
    }

    /// An idle HTTP/1 connection received bytes: a request's head has begun. Noted once per
    /// head; HTTP/2 needs none of this, its GOAWAY tells a client which requests were served.
    fn note_read(&self) {
        if self.head_began.load(Ordering::Relaxed) == 0
            && self.is_idle()
            && self.first_request_seen.load(Ordering::Relaxed)
            && self.http1.load(Ordering::Relaxed)
        {
            let now = millis_between(self.epoch, Instant::now());
            self.head_began.store(now + 1, Ordering::Release);
        }
    }

    /// Since when a write has waited on the client, if one does.
    fn write_blocked_since(&self) -> Option<Instant> {
        match self.write_blocked_since.load(Ordering::Acquire) {
            0 => None,
            since => Some(self.epoch + Duration::from_millis(since - 1)),
        }
    }

    /// Since when (in milliseconds from `epoch`) the connection does no work: idle with
    /// nothing to write, or stalled on a client that accepts no bytes.
    fn useless_since_millis(&self) -> Option<u64> {
        match self.write_blocked_since.load(Ordering::Acquire) {
            0 => (self.is_idle() && self.head_began().is_none()).then(|| self.idle_since_millis()),
            since => Some(since - 1),
        }
    }

    /// Whether an idle connection's next request already waits in the socket, not yet read
    /// (the task woke for its deadline first): then its head has begun, and is served.
    fn request_waits_unread(&self) -> bool {
        let waits = self.is_idle()
            && self.write_blocked_since().is_none()
            && self.head_began().is_none()
            && self.queues.unread().is_some_and(|unread| unread > 0);
        if waits {
            let now = millis_between(self.epoch, Instant::now());
            self.head_began.store(now + 1, Ordering::Release);
        }
        waits
    }

    /// A write found the client's window full.
    fn note_write_blocked(&self) {
        if self.write_blocked_since.load(Ordering::Relaxed) == 0 {
            let now = millis_between(self.epoch, Instant::now());
            self.write_blocked_since.store(now + 1, Ordering::Release);
            self.queued_at_block
                .store(self.queues.queued().unwrap_or(0), Ordering::Release);
            // Its deadline may be nearer than the one the task sleeps until.
            self.look_again.store(true, Ordering::Release);
        }
    }

    /// Whether a client whose writes wait has taken bytes since the wait began, though no write
    /// went through: the kernel wakes a waiting write only once a third of the socket's send
    /// buffer (megabytes, autotuned) is free, so a client reading slowly but steadily leaves
    /// writes waiting for seconds. Its send queue shrinking is the client reading; then the
    /// wait counts from now.
    fn reading_while_blocked(&self) -> bool {
        let Some(queued) = self.queues.queued() else {
            return false;
        };
        if queued < self.queued_at_block.load(Ordering::Acquire) {
            let now = millis_between(self.epoch, Instant::now());
            self.write_blocked_since.store(now + 1, Ordering::Release);
            self.queued_at_block.store(queued, Ordering::Release);
            return true;
        }
        false
    }

    /// The client accepted bytes. After the last exchange, each write moves the start of
    /// idleness, so an answer still being written is never cut as idle.
    fn note_write_progress(&self) {
        if self.write_blocked_since.load(Ordering::Relaxed) != 0 {
            self.write_blocked_since.store(0, Ordering::Release);
        }
        if self.is_idle() {
            let now = millis_between(self.epoch, Instant::now());
            self.idle_since.store(now, Ordering::Release);
        }
    }

    fn is_reclaimed(&self) -> bool {
        self.reclaimed.load(Ordering::Acquire)
    }

    /// An idle connection that never served a request counts as idle since it was accepted.
    fn idle_since_millis(&self) -> u64 {
        if self.first_request_seen.load(Ordering::Acquire) {
            self.idle_since.load(Ordering::Acquire)
        } else {
            millis_between(self.epoch, self.accepted)
        }
    }

    /// Marks an exchange begun; it ends when the returned guard drops (with the answer's body).
    pub fn begin_exchange(self: &Arc<Self>) -> Busy {
        self.first_request_seen.store(true, Ordering::Release);
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_began.store(0, Ordering::Release);
        Busy(self.clone())
    }

    /// When this connection must close if nothing changes, and why; `None` while it works.
    fn deadline(&self, phases: &PhaseDeadlines) -> Option<(Instant, &'static str)> {
        // A client that accepts no bytes is let go, whether or not an exchange is in flight.
        if let Some(blocked_since) = self.write_blocked_since() {
            if self.is_reclaimed() {
                return Some((
                    self.accepted,
                    "stalled, closed for a new client at max_connections",
                ));
            }
            return Some((
                blocked_since + phases.write,
                "the client accepted no bytes within write_timeout_ms",
            ));
        }
        // A reclaimed connection that a request reached first finishes it before it closes.
        if !self.is_idle() {
            return None;
        }
        // So does one whose next request has begun arriving: only its head's deadline holds.
        if let Some(began) = self.head_began() {
            return Some((
                began + phases.head,
                "sent no complete request head within header_read_timeout_ms",
            ));
        }
        if self.is_reclaimed() {
            return Some((self.accepted, "closed for a new client at max_connections"));
        }
        if !self.first_byte_seen.load(Ordering::Acquire) {
            return Some((
                self.accepted + phases.first_byte,
                "sent nothing within first_byte_timeout_ms",
            ));
        }
        let http1 = self.http1.load(Ordering::Acquire);
        if !self.first_request_seen.load(Ordering::Acquire) {
            let handshake = (
                self.accepted + phases.handshake,
                "sent no complete request head within handshake_timeout_ms",
            );
            let first_byte_at = self.first_byte_at.load(Ordering::Acquire);
            let head = (
                self.epoch + Duration::from_millis(first_byte_at) + phases.head,
                "sent no complete request head within header_read_timeout_ms",
            );
            return Some(if http1 && head.0 < handshake.0 {
                head
            } else {
                handshake
            });
        }
        let idle_since = self.epoch + Duration::from_millis(self.idle_since_millis());
        let (wait, reason) = phases.between_exchanges(http1);
        Some((idle_since + wait, reason))
    }
}

fn millis_between(earlier: Instant, later: Instant) -> u64 {
    u64::try_from(later.saturating_duration_since(earlier).as_millis()).unwrap_or(u64::MAX)
}

/// An exchange in flight on a connection.
pub struct Busy(Arc<ConnectionState>);

impl Busy {
    /// Whether the connection closes once this exchange ends: it was reclaimed at
    /// `max_connections` (a request can reach a connection in the instant it is chosen, and is
    /// served), or the listener drains. hyper then ends an HTTP/1 connection after the answer
    /// without a word, and a client that reuses it loses its next request: the answer must say
    /// `connection: close`.
    fn connection_closes_after(&self) -> bool {
        self.0.is_reclaimed() || self.0.registry.draining.load(Ordering::Acquire)
    }

    /// The exchange's answer as hyper gets it: its body holds the exchange in flight until
    /// hyper has taken all of it, and its head, read as it goes out, says `connection: close`
    /// when the connection was chosen to close meanwhile (hyper says so itself for a drain,
    /// but cannot know of a reclaim).
    pub fn answer(self, mut response: Response<ProxyBody>, http1: bool) -> Response<BusyBody> {
        if http1 && self.connection_closes_after() {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response.map(|body| BusyBody::new(body, self))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        let connection = &self.0;
        if connection.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            let now = millis_between(connection.epoch, Instant::now());
            connection.idle_since.store(now, Ordering::Release);
            // Only a reclaimed connection's deadline moves nearer when it goes idle (to now);
            // an idle deadline is never earlier than the time `drive` looks again, so the
            // task is not woken after every exchange for it.
            if connection.is_reclaimed() {
                connection.wake();
            }
        }
    }
}

/// Why a connection's task woke.
enum Woken<R> {
    Ended(R),
    /// The connection was reclaimed, or went idle reclaimed, or the listener is draining.
    LookAgain,
    Deadline,
}

/// Serves `connection` until it ends or one of its phases overruns its deadline; then the
/// connection is dropped, which closes its socket.
///
/// The connection comes boxed: an async fn keeps its argument and the pinned local it is moved
/// into as two slots of its state, so a connection (kilobytes) passed by value would be held
/// twice in every connection's task for its whole life.
pub async fn drive<C, E>(
    mut connection: Pin<Box<C>>,
    registered: Registered,
    phases: PhaseDeadlines,
    peer: SocketAddr,
) where
    C: GracefulConnection<Error = E> + ?Sized,
    E: std::fmt::Display,
{
    let state = registered.state().clone();
    let mut shutting_down = false;
    loop {
        if !shutting_down && state.registry.draining.load(Ordering::Acquire) {
            shutting_down = true;
            connection.as_mut().graceful_shutdown();
        }
        // Whenever the connection goes idle from now on, its deadline is at least the shorter
        // of `idle` and `head` after that: looking again by then is never late, though the
        // deadline in force (if any, as none while an exchange is in flight) may be later.
        let idle_bound = Instant::now() + phases.between_exchanges(true).0;
        let look_again = state
            .deadline(&phases)
            .map_or(idle_bound, |(at, _)| at.min(idle_bound));
        let sleep = tokio::time::sleep_until(look_again);
        tokio::pin!(sleep);
        // The waker the timer holds. The task runs several times per exchange; polling the
        // timer each time would cost a budget check and an entry update for a waker that has
        // not changed, so after it holds this task's waker only whether it fired is read.
        let mut timer_waker: Option<std::task::Waker> = None;
        let woken = std::future::poll_fn(|cx| {
            if let Poll::Ready(result) = connection.as_mut().poll(cx) {
                return Poll::Ready(Woken::Ended(result));
            }
            state.task.register(cx.waker());
            if state.look_again.load(Ordering::Acquire) {
                state.look_again.store(false, Ordering::Release);
                return Poll::Ready(Woken::LookAgain);
            }
            if timer_waker
                .as_ref()
                .is_some_and(|waker| waker.will_wake(cx.waker()))
            {
                return if sleep.is_elapsed() {
                    Poll::Ready(Woken::Deadline)
                } else {
                    Poll::Pending
                };
            }
            timer_waker = Some(cx.waker().clone());
            sleep.as_mut().poll(cx).map(|()| Woken::Deadline)
        })
        .await;
        match woken {
            Woken::Ended(result) => {
                if let Err(error) = result {
                    tracing::debug!(%peer, %error, "connection ended with an error");
                }
                break;
            }
            Woken::LookAgain => {}
            Woken::Deadline => {
                // The deadline is read again: the connection may have moved on meanwhile.
                if let Some((at, reason)) = state.deadline(&phases)
                    && at <= Instant::now()
                    // A client that took bytes meanwhile is reading, however slowly.
                    && !(state.write_blocked_since().is_some() && !state.is_reclaimed()
                        && state.reading_while_blocked())
                    && !state.request_waits_unread()
                {
                    if state.write_blocked_since().is_some() {
                        // The exchanges in flight are dropped with the connection, and their
                        // upstream calls with them; streams record it as `client_stalled`.
                        tracing::warn!(%peer, reason, "closing a connection whose client stopped reading");
                    } else {
                        tracing::debug!(%peer, reason, "closing a connection");
                    }
                    state.cut.store(true, Ordering::Release);
                    break;
                }
            }
        }
    }
    drop(registered);
}

/// An answer's body, holding its exchange in flight until hyper has taken all of it.
pub struct BusyBody {
    inner: ProxyBody,
    _busy: Busy,
}

impl BusyBody {
    pub fn new(inner: ProxyBody, busy: Busy) -> Self {
        BusyBody { inner, _busy: busy }
    }
}

impl Body for BusyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The soak's lost keep-alive request: a connection idle long enough is chosen to make room
    /// in the instant its client's request arrives; the request is served, and the connection
    /// closes after it. Its answer must say so, or the client sends its next request into a
    /// closing socket.
    #[tokio::test(start_paused = true)]
    async fn an_exchange_on_a_connection_reclaimed_for_a_new_client_says_it_closes_after() {
        let connections = Connections::new();
        let chosen = connections.register();
        tokio::time::advance(RECLAIMABLE_AFTER).await;
        let kept = connections.register();
        assert!(
            connections.reclaim_idlest(),
            "the idle connection is chosen"
        );

        let says_close = |response: &Response<BusyBody>| {
            response.headers().get(header::CONNECTION) == Some(&HeaderValue::from_static("close"))
        };
        let answer = || Response::new(crate::body::empty());
        let on_chosen = chosen.state().begin_exchange().answer(answer(), true);
        assert!(says_close(&on_chosen));
        let on_kept = kept.state().begin_exchange().answer(answer(), true);
        assert!(!says_close(&on_kept), "a connection not chosen keeps alive");
        drop((on_chosen, on_kept));
        let over_http2 = chosen.state().begin_exchange().answer(answer(), false);
        assert!(
            over_http2.headers().get(header::CONNECTION).is_none(),
            "HTTP/2 has no connection header; its GOAWAY says which streams were served"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_exchange_during_the_drain_says_its_connection_closes_after() {
        let connections = Connections::new();
        let registered = connections.register();
        let busy = registered.state().begin_exchange();
        assert!(!busy.connection_closes_after());
        connections.draining.store(true, Ordering::Release);
        assert!(busy.connection_closes_after());
    }
}
