//! Latency of repeated runs: an hdrhistogram for the percentiles of every run
//! so far, plus the most recent runs for a sparkline.
//!
//! Values are kept in microseconds (1 µs to 1 hour, 3 significant digits), so a
//! percentile is within 0.1% of the true order statistic.

use std::collections::VecDeque;
use std::time::Duration;

use hdrhistogram::Histogram;

/// The longest run the histogram tells apart (longer ones count as this).
const MAX_MICROS: u64 = 3_600_000_000;

/// How many recent runs [`LatencyStats::new`] keeps for the sparkline.
pub const DEFAULT_RECENT: usize = 120;

/// Latencies of one backend's runs.
#[derive(Clone, Debug)]
pub struct LatencyStats {
    histogram: Histogram<u64>,
    last: Option<Duration>,
    recent: VecDeque<Duration>,
    recent_capacity: usize,
}

impl Default for LatencyStats {
    fn default() -> Self {
        LatencyStats::new(DEFAULT_RECENT)
    }
}

impl LatencyStats {
    /// Empty statistics keeping the last `recent_capacity` runs (at least 1) for [`Self::recent`].
    pub fn new(recent_capacity: usize) -> LatencyStats {
        let histogram = Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("constant histogram bounds are valid");
        let recent_capacity = recent_capacity.max(1);
        LatencyStats { histogram, last: None, recent: VecDeque::with_capacity(recent_capacity), recent_capacity }
    }

    /// Add one run.
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX).clamp(1, MAX_MICROS);
        self.histogram.saturating_record(micros);
        self.last = Some(latency);
        if self.recent.len() == self.recent_capacity {
            self.recent.pop_front();
        }
        self.recent.push_back(latency);
    }

    /// Runs recorded so far.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// The latest run, exactly as recorded.
    pub fn last(&self) -> Option<Duration> {
        self.last
    }

    /// The `percentile` (0 to 100) over every run so far; `None` before the first.
    pub fn percentile(&self, percentile: f64) -> Option<Duration> {
        if self.is_empty() {
            return None;
        }
        let quantile = (percentile / 100.0).clamp(0.0, 1.0);
        // The middle of the bucket the quantile falls in (hdrhistogram reports its top).
        Some(Duration::from_micros(self.histogram.median_equivalent(self.histogram.value_at_quantile(quantile))))
    }

    pub fn p50(&self) -> Option<Duration> {
        self.percentile(50.0)
    }
    pub fn p90(&self) -> Option<Duration> {
        self.percentile(90.0)
    }
    pub fn p99(&self) -> Option<Duration> {
        self.percentile(99.0)
    }

    pub fn min(&self) -> Option<Duration> {
        (!self.is_empty()).then(|| Duration::from_micros(self.histogram.min()))
    }

    pub fn max(&self) -> Option<Duration> {
        (!self.is_empty()).then(|| Duration::from_micros(self.histogram.max()))
    }

    pub fn mean(&self) -> Option<Duration> {
        (!self.is_empty()).then(|| Duration::from_secs_f64(self.histogram.mean() / 1e6))
    }

    /// The most recent runs, oldest first (at most the capacity given to [`Self::new`]).
    pub fn recent(&self) -> impl ExactSizeIterator<Item = Duration> + '_ {
        self.recent.iter().copied()
    }

    /// Forget every run.
    pub fn clear(&mut self) {
        self.histogram.reset();
        self.last = None;
        self.recent.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn percentiles_last_and_recent_window() {
        let mut stats = LatencyStats::new(3);
        assert!(stats.p50().is_none() && stats.last().is_none() && stats.is_empty());
        for v in 1..=100 {
            stats.record(ms(v));
        }
        assert_eq!(stats.count(), 100);
        assert_eq!(stats.last(), Some(ms(100)));
        let close = |d: Option<Duration>, want: u64| {
            let got = d.unwrap().as_secs_f64() * 1e3;
            assert!((got - want as f64).abs() <= want as f64 * 0.002, "{got} vs {want}");
        };
        close(stats.p50(), 50);
        close(stats.p90(), 90);
        close(stats.p99(), 99);
        close(stats.min(), 1);
        close(stats.max(), 100);
        assert_eq!(stats.recent().collect::<Vec<_>>(), vec![ms(98), ms(99), ms(100)]);
        stats.clear();
        assert!(stats.is_empty() && stats.recent().len() == 0 && stats.p99().is_none());
    }

    #[test]
    fn extreme_values_saturate_instead_of_failing() {
        let mut stats = LatencyStats::default();
        stats.record(Duration::ZERO);
        stats.record(Duration::from_secs(10_000));
        assert_eq!(stats.count(), 2);
        assert_eq!(stats.min(), Some(Duration::from_micros(1)));
        assert!(stats.max().unwrap() >= Duration::from_secs(3_599));
    }
}
