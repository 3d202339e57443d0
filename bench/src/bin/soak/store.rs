//! The soak's state store events: Redis killed and restarted at once, the gateway's ACL user's
//! password flipped, an outage, a failover; what Redis was doing when a request began and
//! ended (so a 503 of the store is put down to an event or to none), and the probe that a
//! budgeted request is answered 200 again after each event.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use toolgate_bench::redis::RedisServer;

use crate::{
    FLIPPED_PASSWORD, REDIS_OUTAGE, STORE_EVERY, STORE_PASSWORD, STORE_RECOVERY, STORE_USER,
    exchange,
};

/// The store events, in the order they take turns, one every [`STORE_EVERY`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreEvent {
    /// Killed (SIGKILL) and started again on its port at once.
    Restart,
    /// The gateway's ACL user's password changed and its connections killed, then set back.
    Flip,
    /// Killed, and started again after [`REDIS_OUTAGE`].
    Outage,
    /// Made a replica of another redis-server, then promoted back (`REPLICAOF NO ONE`).
    Failover,
}

const STORE_EVENTS: [StoreEvent; 4] = [
    StoreEvent::Restart,
    StoreEvent::Flip,
    StoreEvent::Outage,
    StoreEvent::Failover,
];

impl StoreEvent {
    fn code(self) -> u8 {
        match self {
            StoreEvent::Restart => 1,
            StoreEvent::Flip => 2,
            StoreEvent::Outage => 3,
            StoreEvent::Failover => 4,
        }
    }

    fn from_code(code: u8) -> Option<StoreEvent> {
        STORE_EVENTS.into_iter().find(|event| event.code() == code)
    }
}

/// Redis as the clients see it: what it was doing when a request began and ended, so a 503 of
/// the store is put down to the event under way (or the gateway's reconnecting after it), or
/// to none.
#[derive(Default)]
pub struct RedisWatch {
    /// `UP`, `DOWN` (an event under way) or `RECOVERING` (it ended; the gateway has not been
    /// seen to answer a budgeted request since).
    state: AtomicU8,
    /// The latest event's code ([`StoreEvent::code`]).
    event: AtomicU8,
    /// Bumped when an event begins and when it is over (Redis back, the gateway recovered).
    epoch: AtomicU64,
}

const UP: u8 = 0;
const DOWN: u8 = 1;
const RECOVERING: u8 = 2;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RedisSnapshot {
    state: u8,
    event: u8,
    epoch: u64,
}

impl RedisWatch {
    pub fn snapshot(&self) -> RedisSnapshot {
        RedisSnapshot {
            state: self.state.load(Ordering::SeqCst),
            event: self.event.load(Ordering::SeqCst),
            epoch: self.epoch.load(Ordering::SeqCst),
        }
    }

    /// Called before the event is done to Redis.
    fn begins(&self, event: StoreEvent) {
        self.event.store(event.code(), Ordering::SeqCst);
        self.state.store(DOWN, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Called once Redis is itself again: a restart at once must cost no request, so it is
    /// over then; after the other events the gateway may take a backoff to reconnect.
    fn ends(&self, event: StoreEvent) {
        match event {
            StoreEvent::Restart => self.over(),
            _ => self.state.store(RECOVERING, Ordering::SeqCst),
        }
    }

    /// Called once a budgeted request was answered 200 after the event (or it never was).
    fn over(&self) {
        if self.state.swap(UP, Ordering::SeqCst) != UP {
            self.epoch.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The event a request that began at `before` and ended at `after` overlapped, if any.
pub fn overlap(before: RedisSnapshot, after: RedisSnapshot) -> Option<StoreEvent> {
    if before.state != UP {
        StoreEvent::from_code(before.event)
    } else if after.state != UP || before.epoch != after.epoch {
        StoreEvent::from_code(after.event)
    } else {
        None
    }
}

/// The store's events as they happen: the one under way, the recovery awaited after it, and
/// what came of each.
pub struct StoreTimeline {
    next: Instant,
    turn: usize,
    /// The event under way and when it is to end.
    under_way: Option<(StoreEvent, Instant)>,
    /// The probe for the gateway's recovery after an event.
    recovery: Option<(StoreEvent, JoinHandle<Result<Duration, String>>)>,
    /// Events begun, by kind, in [`STORE_EVENTS`]'s order.
    pub events: [u64; 4],
    pub recoveries: u64,
    pub slowest_recovery: Duration,
    pub failures: Vec<String>,
}

impl StoreTimeline {
    pub fn new(first: Instant) -> StoreTimeline {
        StoreTimeline {
            next: first,
            turn: 0,
            under_way: None,
            recovery: None,
            events: [0; 4],
            recoveries: 0,
            slowest_recovery: Duration::ZERO,
            failures: Vec::new(),
        }
    }

    /// Ends the event under way when it is time, collects a finished recovery, and begins the
    /// next event when it is due and the last one is over. `Err` when Redis cannot be started
    /// again (the soak cannot go on).
    pub async fn step(
        &mut self,
        redis: &mut RedisServer,
        primary_port: u16,
        watch: &Arc<RedisWatch>,
        listen: SocketAddr,
    ) -> Result<(), String> {
        if let Some((event, ends_at)) = self.under_way
            && Instant::now() >= ends_at
        {
            self.under_way = None;
            let ended = match event {
                StoreEvent::Outage => redis.restart(),
                StoreEvent::Flip => expect_reply(
                    redis.command(&[
                        "ACL",
                        "SETUSER",
                        STORE_USER,
                        "resetpass",
                        &format!(">{STORE_PASSWORD}"),
                    ]),
                    "+OK",
                ),
                StoreEvent::Failover => {
                    expect_reply(redis.command(&["REPLICAOF", "NO", "ONE"]), "+OK")
                }
                StoreEvent::Restart => Ok(()),
            };
            if let Err(error) = ended {
                if event == StoreEvent::Outage {
                    return Err(format!("redis-server did not come back: {error}"));
                }
                self.failures.push(format!("ending a {event:?}: {error}"));
            }
            watch.ends(event);
            self.recovery = Some((event, tokio::spawn(store_recovery(listen))));
        }
        if let Some((event, recovery)) = self
            .recovery
            .take_if(|(_, recovery)| recovery.is_finished())
        {
            match recovery.await {
                Ok(Ok(took)) => {
                    self.recoveries += 1;
                    self.slowest_recovery = self.slowest_recovery.max(took);
                }
                Ok(Err(why)) => self.failures.push(format!("after a {event:?}: {why}")),
                Err(error) => self.failures.push(format!("the recovery probe: {error}")),
            }
            watch.over();
        }
        if self.under_way.is_some() || self.recovery.is_some() || Instant::now() < self.next {
            return Ok(());
        }
        let event = STORE_EVENTS[self.turn % STORE_EVENTS.len()];
        self.events[self.turn % STORE_EVENTS.len()] += 1;
        self.turn += 1;
        self.next = Instant::now() + STORE_EVERY;
        watch.begins(event);
        let lasts = match event {
            StoreEvent::Restart => {
                redis.kill();
                redis
                    .restart()
                    .map_err(|error| format!("redis-server did not come back: {error}"))?;
                watch.ends(event);
                self.recovery = Some((event, tokio::spawn(store_recovery(listen))));
                return Ok(());
            }
            StoreEvent::Outage => {
                redis.kill();
                Ok(())
            }
            StoreEvent::Flip => expect_reply(
                redis.command(&[
                    "ACL",
                    "SETUSER",
                    STORE_USER,
                    "resetpass",
                    &format!(">{FLIPPED_PASSWORD}"),
                ]),
                "+OK",
            )
            .and_then(|()| {
                expect_reply(redis.command(&["CLIENT", "KILL", "USER", STORE_USER]), ":")
            }),
            StoreEvent::Failover => expect_reply(
                redis.command(&["REPLICAOF", "127.0.0.1", &primary_port.to_string()]),
                "+OK",
            ),
        };
        if let Err(error) = lasts {
            self.failures
                .push(format!("beginning a {event:?}: {error}"));
        }
        self.under_way = Some((event, Instant::now() + REDIS_OUTAGE));
        Ok(())
    }

    /// At the end of the run: an event or a recovery still under way is not counted.
    pub fn abandon(&mut self, watch: &RedisWatch) {
        if let Some((_, recovery)) = self.recovery.take() {
            recovery.abort();
        }
        self.under_way = None;
        watch.over();
    }
}

/// `Ok` when `reply` starts with `expected`.
fn expect_reply(reply: Result<String, String>, expected: &str) -> Result<(), String> {
    match reply {
        Ok(reply) if reply.starts_with(expected) => Ok(()),
        Ok(reply) => Err(format!("Redis replied {reply:?}")),
        Err(error) => Err(error),
    }
}

/// After a store event: budgeted requests until one is answered 200 (the store counted its
/// call), within [`STORE_RECOVERY`]; how long that took.
async fn store_recovery(listen: SocketAddr) -> Result<Duration, String> {
    let began = Instant::now();
    let mut last = String::from("none sent");
    while began.elapsed() < STORE_RECOVERY {
        let remaining = STORE_RECOVERY.saturating_sub(began.elapsed());
        match tokio::time::timeout(remaining, exchange(listen, "ok_json", false)).await {
            Ok(Ok(answer)) if answer.status == "200" && !answer.store_unavailable => {
                return Ok(began.elapsed());
            }
            Ok(Ok(answer)) => {
                last = format!(
                    "{}{}",
                    answer.status,
                    match answer.store_unavailable {
                        true => " state_store_unavailable",
                        false => "",
                    }
                );
            }
            Ok(Err(why)) => last = why,
            Err(_) => break,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!(
        "no budgeted request answered 200 within {}s of its end (the last: {last})",
        STORE_RECOVERY.as_secs()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_503_is_put_down_to_what_redis_did_meanwhile() {
        let watch = RedisWatch::default();
        let up = watch.snapshot();
        assert_eq!(overlap(up, watch.snapshot()), None);
        watch.begins(StoreEvent::Restart);
        watch.ends(StoreEvent::Restart);
        assert_eq!(overlap(up, watch.snapshot()), Some(StoreEvent::Restart));
        // A restart at once is over when Redis is back: a request after it must not fail.
        let after_restart = watch.snapshot();
        assert_eq!(overlap(after_restart, watch.snapshot()), None);
        watch.begins(StoreEvent::Flip);
        assert_eq!(
            overlap(after_restart, watch.snapshot()),
            Some(StoreEvent::Flip)
        );
        // The others last until the gateway was seen to recover.
        watch.ends(StoreEvent::Flip);
        let recovering = watch.snapshot();
        assert_eq!(overlap(recovering, recovering), Some(StoreEvent::Flip));
        watch.over();
        assert_eq!(
            overlap(recovering, watch.snapshot()),
            Some(StoreEvent::Flip)
        );
        let after = watch.snapshot();
        assert_eq!(overlap(after, watch.snapshot()), None);
    }
}
