//! Per-request metrics with nothing shared between the runtime's workers: a counter and a
//! histogram kept in one shard per thread (assigned on a thread's first record), summed when
//! `/metrics` is scraped. prometheus-client's `Histogram` takes one mutex for every observation
//! (0.25 has no atomic or sharded kind) and its `Counter` is one atomic; both bounce a cache line
//! between the workers on every exchange. Encoded as those two, the series read the same.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::{MetricType, TypedMetric};

/// Slots in one cache line (two 64-byte lines: adjacent-line prefetch pairs them).
const SLOTS_PER_LINE: usize = 16;

/// One thread's slots, on lines of their own: a shard never shares a line with another.
#[repr(align(128))]
#[derive(Debug, Default)]
struct Line([AtomicU64; SLOTS_PER_LINE]);

/// How many shards a metric has: the machine's threads (the runtime's workers are as many),
/// at most 64. Threads past that share shards, which the atomics keep correct.
fn shard_count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        std::thread::available_parallelism().map_or(4, |threads| threads.get().clamp(1, 64))
    })
}

/// The calling thread's shard, the same for every metric.
fn this_threads_shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % shard_count();
    }
    SHARD.with(|shard| *shard)
}

/// `slots` counters per shard, each shard on lines of its own.
#[derive(Debug)]
struct Slots {
    lines: Box<[Line]>,
    lines_per_shard: usize,
}

impl Slots {
    fn new(slots: usize) -> Slots {
        let lines_per_shard = slots.div_ceil(SLOTS_PER_LINE).max(1);
        Slots {
            lines: (0..lines_per_shard * shard_count())
                .map(|_| Line::default())
                .collect(),
            lines_per_shard,
        }
    }

    /// Slot `slot` of the calling thread's shard.
    fn mine(&self, slot: usize) -> &AtomicU64 {
        self.of(this_threads_shard(), slot)
    }

    fn of(&self, shard: usize, slot: usize) -> &AtomicU64 {
        let line = shard * self.lines_per_shard + slot / SLOTS_PER_LINE;
        &self.lines[line].0[slot % SLOTS_PER_LINE]
    }

    fn shards(&self) -> usize {
        self.lines.len() / self.lines_per_shard
    }

    /// The slot summed over every shard.
    fn total(&self, slot: usize) -> u64 {
        (0..self.shards())
            .map(|shard| self.of(shard, slot).load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

/// A monotonic counter, encoded as prometheus-client's `Counter`. Clones share the count.
#[derive(Debug, Clone)]
pub struct ShardedCounter(Arc<Slots>);

impl Default for ShardedCounter {
    fn default() -> Self {
        ShardedCounter(Arc::new(Slots::new(1)))
    }
}

impl ShardedCounter {
    pub fn inc(&self) {
        self.inc_by(1);
    }

    pub fn inc_by(&self, by: u64) {
        self.0.mine(0).fetch_add(by, Ordering::Relaxed);
    }

    /// The count over every shard.
    pub fn get(&self) -> u64 {
        self.0.total(0)
    }
}

impl TypedMetric for ShardedCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for ShardedCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.get(), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// A histogram of fixed buckets, encoded as prometheus-client's classic `Histogram` with the
/// same bounds. Its slots: one count per bound (the first bound at or above the value; the last
/// bound is +Inf, as prometheus-client adds it), and the sum's bits. The count is the buckets'
/// total, so a scrape during an observation never shows a count its buckets do not hold.
#[derive(Debug, Clone)]
pub struct ShardedHistogram(Arc<HistogramSlots>);

#[derive(Debug)]
struct HistogramSlots {
    bounds: Box<[f64]>,
    slots: Slots,
}

impl ShardedHistogram {
    pub fn new(bounds: impl IntoIterator<Item = f64>) -> Self {
        let bounds: Box<[f64]> = bounds
            .into_iter()
            .chain(std::iter::once(f64::INFINITY))
            .collect();
        let slots = Slots::new(bounds.len() + 1);
        ShardedHistogram(Arc::new(HistogramSlots { bounds, slots }))
    }

    pub fn observe(&self, value: f64) {
        let histogram = &*self.0;
        let bounds = &histogram.bounds;
        // As prometheus-client files them: NaN in the last bucket (+Inf), where every value
        // lands that no other bound holds.
        let bucket = if value.is_nan() {
            bounds.len() - 1
        } else {
            bounds.partition_point(|bound| *bound < value)
        };
        histogram.slots.mine(bucket).fetch_add(1, Ordering::Relaxed);
        // A shard is one thread's, so this finds its own last write; the loop only turns when
        // threads outnumber shards.
        let sum = histogram.slots.mine(bounds.len());
        let mut bits = sum.load(Ordering::Relaxed);
        loop {
            let added = (f64::from_bits(bits) + value).to_bits();
            match sum.compare_exchange_weak(bits, added, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(current) => bits = current,
            }
        }
    }

    /// The sum, count and per-bound counts over every shard.
    fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let histogram = &*self.0;
        let slots = &histogram.slots;
        let buckets: Vec<(f64, u64)> = histogram
            .bounds
            .iter()
            .enumerate()
            .map(|(slot, bound)| (*bound, slots.total(slot)))
            .collect();
        let count = buckets.iter().map(|(_, count)| count).sum::<u64>();
        let sum_slot = histogram.bounds.len();
        let sum = (0..slots.shards())
            .map(|shard| f64::from_bits(slots.of(shard, sum_slot).load(Ordering::Relaxed)))
            .sum();
        (sum, count, buckets)
    }
}

impl TypedMetric for ShardedHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for ShardedHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let (sum, count, buckets) = self.snapshot();
        encoder.encode_histogram::<NoLabelSet>(
            sum,
            count,
            &buckets,
            None::<&HashMap<usize, Exemplar<NoLabelSet, f64>>>,
        )
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
    use prometheus_client::registry::Registry;

    use super::*;
    use crate::telemetry::exposition;

    /// The sharded metrics and prometheus-client's own, fed the same values from several
    /// threads, read the same at scrape: same series, same text.
    #[test]
    fn scrapes_read_as_prometheus_clients_own_metrics() {
        let values: Vec<f64> = (0..400)
            .map(|n| match n % 7 {
                0 => 0.0,
                1 => 1e9,
                2 => 0.0005,
                _ => f64::from(n) * 0.000_37,
            })
            .collect();
        let (mut sharded, mut reference) = (Registry::default(), Registry::default());
        let histogram = ShardedHistogram::new(exponential_buckets(0.0005, 2.0, 20));
        let counter = ShardedCounter::default();
        sharded.register("latency_seconds", "latency", histogram.clone());
        sharded.register("requests", "requests", counter.clone());
        let expected = Histogram::new(exponential_buckets(0.0005, 2.0, 20));
        let expected_counter = Counter::<u64>::default();
        reference.register("latency_seconds", "latency", expected.clone());
        reference.register("requests", "requests", expected_counter.clone());
        std::thread::scope(|scope| {
            for part in values.chunks(100) {
                let (histogram, counter) = (histogram.clone(), counter.clone());
                scope.spawn(move || {
                    for value in part {
                        histogram.observe(*value);
                        counter.inc_by(2);
                    }
                });
            }
        });
        for value in &values {
            expected.observe(*value);
            expected_counter.inc_by(2);
        }
        let (text, expected_text) = (exposition(&sharded), exposition(&reference));
        // The sums are added in another order: compared as numbers, the rest as text.
        let without_sum = |text: &str| -> (String, f64) {
            let mut sum = f64::NAN;
            let rest = text
                .lines()
                .filter(|line| match line.strip_prefix("latency_seconds_sum ") {
                    Some(value) => {
                        sum = value.parse().expect("a number");
                        false
                    }
                    None => true,
                })
                .collect::<Vec<_>>()
                .join("\n");
            (rest, sum)
        };
        let ((rest, sum), (expected_rest, expected_sum)) =
            (without_sum(&text), without_sum(&expected_text));
        assert_eq!(rest, expected_rest);
        assert!(
            (sum - expected_sum).abs() <= expected_sum * 1e-12,
            "{sum} vs {expected_sum}"
        );
        assert!(text.contains("requests_total 800"), "{text}");
    }

    #[test]
    fn one_thread_sums_exactly_as_prometheus_client_does() {
        let histogram = ShardedHistogram::new([0.001, 0.01]);
        let expected = Histogram::new([0.001, 0.01]);
        for value in [0.003, 0.0001, 7.0, f64::NAN, 0.01] {
            histogram.observe(value);
            expected.observe(value);
        }
        let (mut sharded, mut reference) = (Registry::default(), Registry::default());
        sharded.register("h", "h", histogram);
        reference.register("h", "h", expected);
        assert_eq!(exposition(&sharded), exposition(&reference));
    }
}
