//! The soak's report: the table of what every client kind saw, the RSS over the run, and
//! whether every check passed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::mcp_clients::SwitchTimeline;
use crate::store::StoreTimeline;
use crate::{
    CLIENT_DEADLINE, IDLE_TIMEOUT_MS, MCP_CALL_DEADLINE, MCP_CALLS_PER_SESSION, MCP_CLIENTS,
    MCP_SWITCH_EVERY, MCP_TOOL, REDIS_OUTAGE, SERVICE_EXCHANGES_PER_CONNECTION, SLOW_READERS,
    STALL, STALLED_CLIENTS, STORE_EVERY, STORE_RECOVERY, Tally, WRITE_TIMEOUT_MS,
};

/// The gateway's RSS over the run, in KiB.
pub struct Rss {
    /// The first sample from 1 minute on, and the last under load.
    at_one_minute: Option<u64>,
    at_end: u64,
    /// Once the load was gone.
    after_load: u64,
    peak: u64,
    /// Medians of the second minute's samples and of the last minute's (runs of 5 minutes or
    /// more), to tell steady growth from a moment's load.
    second_minute_median: Option<u64>,
    last_minute_median: Option<u64>,
}

impl Rss {
    pub fn of(samples: &[(f64, u64)], load_ended: f64, peak: u64, after_load: u64) -> Rss {
        let median = |from: f64, to: f64| {
            let mut within: Vec<u64> = samples
                .iter()
                .filter(|(at, _)| *at >= from && *at < to)
                .map(|(_, kib)| *kib)
                .collect();
            within.sort_unstable();
            within.get(within.len() / 2).copied()
        };
        let long = load_ended >= 300.0;
        Rss {
            at_one_minute: samples
                .iter()
                .find(|(at, _)| *at >= 60.0)
                .map(|(_, kib)| *kib),
            at_end: samples.last().map(|(_, kib)| *kib).unwrap_or(0),
            after_load,
            peak,
            second_minute_median: long.then(|| median(60.0, 120.0)).flatten(),
            last_minute_median: long
                .then(|| median(load_ended - 60.0, load_ended))
                .flatten(),
        }
    }

    /// Whether the last minute's median is over 1.25 × the second minute's + 16 MiB.
    fn grew(&self) -> bool {
        match (self.second_minute_median, self.last_minute_median) {
            (Some(early), Some(late)) => late as f64 > early as f64 * 1.25 + 16.0 * 1024.0,
            _ => false,
        }
    }
}

/// MiB of a KiB count, for the report.
fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// What the main loop saw, for the report.
pub struct Outcome {
    pub duration: Duration,
    pub concurrency: usize,
    pub cap: usize,
    pub reloads: usize,
    pub refused_reloads: usize,
    /// Connections the gateway closed as stalled: after `write_timeout_ms`, and reclaimed for a
    /// new client at `max_connections` (from its log).
    pub stalled_closes: (usize, usize),
    pub panics: usize,
    pub alive: bool,
    pub store: StoreTimeline,
    pub switches: SwitchTimeline,
    pub rss: Rss,
}

impl Outcome {
    /// The markdown report and whether every check passed.
    pub async fn report(&self, tally: &Tally) -> (String, bool) {
        let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let sent = count(&tally.sent);
        let answered = count(&tally.answered);
        let lost = count(&tally.lost);
        let bypassed = count(&tally.bypassed);
        let misanswered = count(&tally.misanswered);
        let idle_opened = count(&tally.idle_sockets_opened);
        let idle_closed = count(&tally.idle_sockets_closed);
        let store_down = count(&tally.store_down_answers);
        let store_restart = count(&tally.store_restart_answers);
        let store_flip = count(&tally.store_flip_answers);
        let store_failover = count(&tally.store_failover_answers);
        let store_up = count(&tally.store_up_answers);
        let service_exchanges = count(&tally.service_exchanges);
        let closed_idle = count(&tally.keep_alive_closed_idle);
        let service_misanswered = count(&tally.service_misanswered);
        let desynced = count(&tally.desynced);
        let slow_reads = count(&tally.slow_reads);
        let slow_whole = count(&tally.slow_whole);
        let slow_cut = count(&tally.slow_cut);
        let slow_not_ok = count(&tally.slow_not_ok);
        let slow_mib = count(&tally.slow_bytes) as f64 / (1024.0 * 1024.0);
        let stalled = count(&tally.stalled);
        let stalled_let_go = count(&tally.stalled_let_go);
        let stalled_kept = count(&tally.stalled_kept);
        let mcp_sessions = count(&tally.mcp_sessions);
        let mcp_calls = count(&tally.mcp_calls);
        let mcp_ok = count(&tally.mcp_ok);
        let mcp_unavailable = count(&tally.mcp_unavailable_in_switch);
        let mcp_other = count(&tally.mcp_other_in_switch);
        let mcp_failed = count(&tally.mcp_failed);
        let mcp_hung = count(&tally.mcp_hung);
        let store = &self.store;
        let [restarts, flips, outages, failovers] = store.events;
        let store_events = restarts + flips + outages + failovers;
        let switches = &self.switches;
        let rss = &self.rss;
        let optional = |kib: Option<u64>| kib.map(mib).unwrap_or_else(|| "—".to_owned());
        let mut report = format!(
            "## Soak: {}s, {} clients, faults at random, config rewritten every 3 s, a store \
             event every {} s, a misbehaving validator service, slow and stalled readers, an \
             MCP backend switched every {} s\n\n\
             | measure | value |\n|---|---|\n| requests sent | {sent} |\n| answered | {answered} |\n\
             | lost (no HTTP answer, or none within {}s) | {lost} |\n\
             | desynced (not one whole HTTP answer with a consistent body, or bytes after it) | {desynced} |\n\
             | bypassed (a hostile call released to the client) | {bypassed} |\n\
             | client faults misanswered (not 408 / 413 / 400) | {misanswered} |\n\
             | idle sockets held at the cap ({}): opened / closed by the gateway | {idle_opened} / {idle_closed} |\n\
             | slow readers ({SLOW_READERS}, 64 KiB every 20–30 ms, 4–8 MiB JSON and SSE, idle_timeout_ms {IDLE_TIMEOUT_MS}): answers read whole | {slow_whole} of {slow_reads} ({slow_mib:.0} MiB of text) |\n\
             | … cut (not all of the upstream's text) | {slow_cut} |\n\
             | … answered otherwise than 200 | {slow_not_ok} |\n\
             | stalled clients ({STALLED_CLIENTS}, 8 MiB asked, nothing read for {} s, write_timeout_ms {WRITE_TIMEOUT_MS}): let go by the gateway | {stalled_let_go} of {stalled} |\n\
             | … not let go (the whole answer still there, or the connection never ended) | {stalled_kept} |\n\
             | connections the gateway closed as stalled (its log): after write_timeout_ms / reclaimed at the cap | {} / {} |\n\
             | store events (one every {} s): Redis killed (SIGKILL) and started again at once / ACL password flipped for {} s / killed for {} s / failover (a replica for {} s) | {restarts} / {flips} / {outages} / {failovers} |\n\
             | store recoveries (a budgeted request answered 200 within {} s of an event's end) | {} of {store_events}, slowest {} ms |\n\
             | store events that failed or were not recovered from | {} |\n\
             | budgeted answers 503 `state_store_unavailable`: during an outage or before the reconnect after it | {store_down} |\n\
             | … across a restart at once (Redis down for its start-up) | {store_restart} |\n\
             | … during a password flip or before the reconnect after it | {store_flip} |\n\
             | … during a failover or before the reconnect after it | {store_failover} |\n\
             | … with Redis up throughout (an event costing a request it should not) | {store_up} |\n\
             | exchanges through the misbehaving service (keep-alive, {SERVICE_EXCHANGES_PER_CONNECTION} a connection) | {service_exchanges} |\n\
             | … their connection found closed idle by the gateway on coming back, and opened again | {closed_idle} |\n\
             | service faults misanswered (passed when it had to block, or the reverse) | {service_misanswered} |\n\
             | MCP calls ({MCP_CLIENTS} clients, `{MCP_TOOL}`, {MCP_CALLS_PER_SESSION} a session): answered | {mcp_ok} of {mcp_calls} ({mcp_sessions} sessions) |\n\
             | … failed during a backend switch: -32002 / otherwise | {mcp_unavailable} / {mcp_other} |\n\
             | … failed with no switch under way | {mcp_failed} |\n\
             | … hung (no answer within {} s) | {mcp_hung} |\n\
             | MCP backend switches (silent restarts): seen on `/health` and a call answered after | {} of {}, slowest seen {} ms, answered {} ms |\n\
             | panics in the gateway log | {} |\n\
             | config rewrites (every 3rd invalid, every 4th with SIGHUP) | {} |\n\
             | invalid versions refused | {} |\n| gateway alive at the end | {} |\n\
             | RSS after 1 min / at the end of the load / 2 s after it | {} / {} / {} |\n\
             | RSS median of the 2nd minute / of the last minute (growth fails over 1.25 × + 16 MiB) | {} / {} |\n\
             | peak RSS (VmHWM) | {} |\n\n| status | answers |\n|---|---|\n",
            self.duration.as_secs(),
            self.concurrency,
            STORE_EVERY.as_secs(),
            MCP_SWITCH_EVERY.as_secs(),
            CLIENT_DEADLINE.as_secs(),
            self.cap,
            STALL.as_secs(),
            self.stalled_closes.0,
            self.stalled_closes.1,
            STORE_EVERY.as_secs(),
            REDIS_OUTAGE.as_secs(),
            REDIS_OUTAGE.as_secs(),
            REDIS_OUTAGE.as_secs(),
            STORE_RECOVERY.as_secs(),
            store.recoveries,
            store.slowest_recovery.as_millis(),
            store.failures.len(),
            MCP_CALL_DEADLINE.as_secs(),
            switches.recovered,
            switches.made,
            switches.slowest_seen.as_millis(),
            switches.slowest_recovered.as_millis(),
            self.panics,
            self.reloads,
            self.refused_reloads,
            self.alive,
            optional(rss.at_one_minute),
            mib(rss.at_end),
            mib(rss.after_load),
            optional(rss.second_minute_median),
            optional(rss.last_minute_median),
            mib(rss.peak),
        );
        for (status, count) in tally.by_status.lock().await.iter() {
            report.push_str(&format!("| {status} | {count} |\n"));
        }
        report.push_str("\n| service fault | passed | blocked |\n|---|---|---|\n");
        for (fault, (passed, blocked)) in tally.service_outcomes.lock().await.iter() {
            report.push_str(&format!("| {fault} | {passed} | {blocked} |\n"));
        }
        let examples = [
            ("lost", &tally.lost_examples),
            ("desynced", &tally.desync_examples),
            ("bypassed", &tally.bypass_examples),
            ("misanswered", &tally.misanswer_examples),
            ("service misanswered", &tally.service_misanswer_examples),
            ("store 503 with Redis up", &tally.store_up_examples),
            ("slow reader", &tally.slow_examples),
            ("stalled client", &tally.stalled_examples),
            ("MCP", &tally.mcp_examples),
        ];
        for (kind, list) in examples {
            for example in list.lock().await.iter() {
                report.push_str(&format!("\n{kind}: {example}"));
            }
        }
        for failure in &store.failures {
            report.push_str(&format!("\nstore event: {failure}"));
        }
        for failure in &switches.failures {
            report.push_str(&format!("\nMCP switch: {failure}"));
        }
        if rss.grew() {
            report.push_str("\nRSS: the last minute's median is over 1.25 × the second's + 16 MiB");
        }
        let passed = lost == 0
            && desynced == 0
            && bypassed == 0
            && misanswered == 0
            && service_misanswered == 0
            && store_up == 0
            && store.failures.is_empty()
            && slow_cut == 0
            && slow_not_ok == 0
            && stalled_kept == 0
            && mcp_hung == 0
            && mcp_failed == 0
            && mcp_other == 0
            && switches.failures.is_empty()
            && switches.recovered == switches.made
            && self.panics == 0
            && self.alive
            && answered == sent
            && !rss.grew();
        (report, passed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_rss_growth_fails_and_a_flat_run_does_not() {
        let flat: Vec<(f64, u64)> = (0..2400).map(|i| (i as f64 / 4.0, 60_000)).collect();
        assert!(!Rss::of(&flat, 600.0, 70_000, 50_000).grew());
        let growing: Vec<(f64, u64)> = (0..2400)
            .map(|i| (i as f64 / 4.0, 60_000 + i as u64 * 40))
            .collect();
        assert!(Rss::of(&growing, 600.0, 200_000, 150_000).grew());
        // A short run is not judged.
        assert!(!Rss::of(&growing[..240], 60.0, 200_000, 150_000).grew());
    }
}
