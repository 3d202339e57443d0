//! A circuit breaker per service: after `failure_threshold` consecutive failed calls it opens
//! and calls fail at once (no request is sent) for `cool_down`; then one probe call goes through,
//! and its result closes the breaker or opens it for another cool-down.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use toolgate_plugin::BreakerSettings;

/// The breaker's state, as exported in `toolgate_service_breaker_state` (0, 1, 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed = 0,
    Open = 1,
    HalfOpen = 2,
}

impl BreakerState {
    /// The state's name in `/health`.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// Whether a call may be sent now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Send,
    /// The breaker is open (or its one probe is in flight): fail without calling.
    Refuse,
}

#[derive(Debug)]
enum State {
    Closed {
        consecutive_failures: u32,
    },
    Open {
        until: Instant,
    },
    /// One probe is in flight since `since`. A probe whose caller went away never reports back,
    /// so after `probe_timeout` another call may probe instead.
    HalfOpen {
        since: Instant,
    },
}

#[derive(Debug)]
pub struct Breaker {
    settings: BreakerSettings,
    probe_timeout: Duration,
    state: Mutex<State>,
}

impl Breaker {
    /// `probe_timeout` is the service's call timeout: a probe cannot legitimately take longer.
    pub fn new(settings: BreakerSettings, probe_timeout: Duration) -> Self {
        Breaker {
            settings,
            probe_timeout,
            state: Mutex::new(State::Closed {
                consecutive_failures: 0,
            }),
        }
    }

    /// Decides whether a call may be sent, and returns the state to export when it changed.
    pub fn admit(&self) -> (Admission, Option<BreakerState>) {
        let now = Instant::now();
        // A poisoned lock only means another call panicked mid-update; the state is still one
        // of the three, so keep using it.
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match *state {
            State::Closed { .. } => (Admission::Send, None),
            State::Open { until } if now < until => (Admission::Refuse, None),
            State::HalfOpen { since } if now < since + self.probe_timeout => {
                (Admission::Refuse, None)
            }
            State::Open { .. } => {
                *state = State::HalfOpen { since: now };
                (Admission::Send, Some(BreakerState::HalfOpen))
            }
            State::HalfOpen { .. } => {
                *state = State::HalfOpen { since: now };
                (Admission::Send, None)
            }
        }
    }

    /// The state now, for `/health`. An open breaker whose cool-down is over is still open
    /// until a call probes it.
    pub fn state(&self) -> BreakerState {
        match *self.state.lock().unwrap_or_else(PoisonError::into_inner) {
            State::Closed { .. } => BreakerState::Closed,
            State::Open { .. } => BreakerState::Open,
            State::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }

    /// Records the result of a sent call; returns the state to export when it changed.
    pub fn record(&self, success: bool) -> Option<BreakerState> {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        match (&*state, success) {
            (State::Closed { .. }, true) => {
                *state = State::Closed {
                    consecutive_failures: 0,
                };
                None
            }
            (
                State::Closed {
                    consecutive_failures,
                },
                false,
            ) => {
                let failures = consecutive_failures.saturating_add(1);
                if failures >= self.settings.failure_threshold {
                    *state = State::Open {
                        until: now + self.settings.cool_down,
                    };
                    Some(BreakerState::Open)
                } else {
                    *state = State::Closed {
                        consecutive_failures: failures,
                    };
                    None
                }
            }
            (State::HalfOpen { .. } | State::Open { .. }, true) => {
                *state = State::Closed {
                    consecutive_failures: 0,
                };
                Some(BreakerState::Closed)
            }
            (State::HalfOpen { .. }, false) => {
                *state = State::Open {
                    until: now + self.settings.cool_down,
                };
                Some(BreakerState::Open)
            }
            // A call admitted before the breaker opened failed too: the cool-down stands.
            (State::Open { .. }, false) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> Breaker {
        Breaker::new(
            BreakerSettings {
                failure_threshold: 3,
                cool_down: Duration::from_secs(10),
            },
            Duration::from_secs(1),
        )
    }

    /// A breaker its third failure in a row has just opened.
    fn opened_breaker() -> Breaker {
        let breaker = breaker();
        for _ in 0..3 {
            breaker.record(false);
        }
        breaker
    }

    /// What the breaker answers the next request once `wait` has passed (on the paused clock).
    async fn admission_after(breaker: &Breaker, wait: Duration) -> Admission {
        tokio::time::advance(wait).await;
        breaker.admit().0
    }

    #[tokio::test(start_paused = true)]
    async fn opens_after_consecutive_failures_only() {
        let breaker = breaker();
        assert_eq!(breaker.record(false), None);
        assert_eq!(breaker.record(false), None);
        assert_eq!(breaker.record(true), None, "a success resets the count");
        assert_eq!(breaker.record(false), None);
        assert_eq!(breaker.record(false), None);
        assert_eq!(breaker.admit(), (Admission::Send, None));
        assert_eq!(breaker.record(false), Some(BreakerState::Open));
        assert_eq!(breaker.admit(), (Admission::Refuse, None));
        assert_eq!(breaker.state().as_str(), "open");
    }

    #[tokio::test(start_paused = true)]
    async fn after_the_cool_down_one_probe_decides() {
        let breaker = opened_breaker();
        let nine_seconds = Duration::from_secs(9);
        assert_eq!(
            admission_after(&breaker, nine_seconds).await,
            Admission::Refuse
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            breaker.admit(),
            (Admission::Send, Some(BreakerState::HalfOpen))
        );
        assert_eq!(breaker.admit().0, Admission::Refuse, "one probe at a time");
        assert_eq!(breaker.record(false), Some(BreakerState::Open));
        assert_eq!(
            breaker.admit().0,
            Admission::Refuse,
            "a failed probe reopens"
        );

        let cool_down = Duration::from_secs(10);
        assert_eq!(admission_after(&breaker, cool_down).await, Admission::Send);
        assert_eq!(breaker.record(true), Some(BreakerState::Closed));
        assert_eq!(breaker.admit(), (Admission::Send, None));
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_that_never_reports_is_replaced() {
        let breaker = opened_breaker();
        let (cool_down, half_a_second) = (Duration::from_secs(10), Duration::from_millis(500));
        assert_eq!(admission_after(&breaker, cool_down).await, Admission::Send);
        assert_eq!(
            admission_after(&breaker, half_a_second).await,
            Admission::Refuse
        );
        assert_eq!(
            admission_after(&breaker, half_a_second).await,
            Admission::Send,
            "the lost probe timed out"
        );
    }
}
