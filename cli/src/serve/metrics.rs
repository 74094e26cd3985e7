//! `GET /metrics`: counters and gauges in the Prometheus text format (0.0.4).
//!
//! Written by the HTTP handlers (requests by outcome) and the worker thread
//! (tokens, queue, sequences, KV pages, prefix-cache hits, preemptions, step
//! times); all are relaxed atomics, read once per scrape.

#![forbid(unsafe_code)]

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Upper bounds (seconds) of the step-time histogram's buckets.
pub const STEP_BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

/// How a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Finished (length or stop).
    Ok,
    /// Rejected as malformed or invalid (4xx other than 429).
    Invalid,
    /// Rejected for load (429).
    Busy,
    /// Cancelled by the client (disconnect).
    Cancelled,
    /// Failed inside the engine (500).
    Error,
}

impl Outcome {
    const ALL: [Outcome; 5] = [
        Outcome::Ok,
        Outcome::Invalid,
        Outcome::Busy,
        Outcome::Cancelled,
        Outcome::Error,
    ];

    fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Invalid => "invalid",
            Outcome::Busy => "busy",
            Outcome::Cancelled => "cancelled",
            Outcome::Error => "error",
        }
    }
}

/// Every metric the server exports.
#[derive(Default)]
pub struct Metrics {
    requests: [AtomicU64; 5],
    /// Prompt tokens admitted.
    pub prompt_tokens: AtomicU64,
    /// Tokens generated.
    pub generated_tokens: AtomicU64,
    /// Requests waiting for admission.
    pub queue_depth: AtomicU64,
    /// Sequences decoding or prefilling.
    pub running: AtomicU64,
    /// KV pages held by sequences.
    pub kv_pages_used: AtomicU64,
    /// KV pages free.
    pub kv_pages_free: AtomicU64,
    /// KV pages held only by the prefix cache.
    pub kv_pages_cached: AtomicU64,
    /// Prompt tokens served from the prefix cache.
    pub prefix_cache_hit_tokens: AtomicU64,
    /// Sequences preempted (pages freed, prefix recomputed later).
    pub preemptions: AtomicU64,
    /// Draft tokens verified (`--speculate`).
    pub draft_tokens: AtomicU64,
    /// Of those, drafts equal to the token drawn at their position.
    pub draft_accepted_tokens: AtomicU64,
    step_buckets: [AtomicU64; STEP_BUCKETS.len()],
    step_count: AtomicU64,
    step_micros: AtomicU64,
}

impl Metrics {
    /// Counts one request's outcome.
    pub fn request(&self, o: Outcome) {
        self.requests[o as usize].fetch_add(1, Relaxed);
    }

    /// Records one engine step's duration.
    pub fn step(&self, seconds: f64) {
        for (b, &le) in self.step_buckets.iter().zip(&STEP_BUCKETS) {
            if seconds <= le {
                b.fetch_add(1, Relaxed);
            }
        }
        self.step_count.fetch_add(1, Relaxed);
        self.step_micros.fetch_add((seconds * 1e6) as u64, Relaxed);
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# HELP detllm_requests_total Requests by outcome.");
        let _ = writeln!(s, "# TYPE detllm_requests_total counter");
        for o in Outcome::ALL {
            let n = self.requests[o as usize].load(Relaxed);
            let _ = writeln!(s, "detllm_requests_total{{outcome=\"{}\"}} {n}", o.label());
        }
        let counters = [
            (
                "detllm_prompt_tokens_total",
                "Prompt tokens admitted.",
                &self.prompt_tokens,
            ),
            (
                "detllm_generated_tokens_total",
                "Tokens generated.",
                &self.generated_tokens,
            ),
            (
                "detllm_prefix_cache_hit_tokens_total",
                "Prompt tokens served from the prefix cache.",
                &self.prefix_cache_hit_tokens,
            ),
            (
                "detllm_preemptions_total",
                "Sequences preempted.",
                &self.preemptions,
            ),
            (
                "detllm_draft_tokens_total",
                "Draft tokens verified (--speculate).",
                &self.draft_tokens,
            ),
            (
                "detllm_draft_accepted_tokens_total",
                "Draft tokens accepted (equal to the token drawn).",
                &self.draft_accepted_tokens,
            ),
        ];
        for (name, help, v) in counters {
            metric(&mut s, name, help, "counter", v.load(Relaxed));
        }
        let gauges = [
            (
                "detllm_queue_depth",
                "Requests waiting for admission.",
                &self.queue_depth,
            ),
            (
                "detllm_running_sequences",
                "Sequences running.",
                &self.running,
            ),
            (
                "detllm_kv_pages_used",
                "KV pages held by sequences.",
                &self.kv_pages_used,
            ),
            (
                "detllm_kv_pages_free",
                "KV pages free.",
                &self.kv_pages_free,
            ),
            (
                "detllm_kv_pages_cached",
                "KV pages held only by the prefix cache.",
                &self.kv_pages_cached,
            ),
        ];
        for (name, help, v) in gauges {
            metric(&mut s, name, help, "gauge", v.load(Relaxed));
        }
        let _ = writeln!(s, "# HELP detllm_step_seconds Engine step duration.");
        let _ = writeln!(s, "# TYPE detllm_step_seconds histogram");
        for (b, le) in self.step_buckets.iter().zip(STEP_BUCKETS) {
            let _ = writeln!(
                s,
                "detllm_step_seconds_bucket{{le=\"{le}\"}} {}",
                b.load(Relaxed)
            );
        }
        let count = self.step_count.load(Relaxed);
        let _ = writeln!(s, "detllm_step_seconds_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.step_micros.load(Relaxed) as f64 / 1e6;
        let _ = writeln!(s, "detllm_step_seconds_sum {sum}");
        let _ = writeln!(s, "detllm_step_seconds_count {count}");
        s
    }
}

fn metric(s: &mut String, name: &str, help: &str, kind: &str, v: u64) {
    let _ = writeln!(s, "# HELP {name} {help}");
    let _ = writeln!(s, "# TYPE {name} {kind}");
    let _ = writeln!(s, "{name} {v}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let m = Metrics::default();
        m.step(0.003);
        m.step(0.2);
        let text = m.render();
        assert!(text.contains("detllm_step_seconds_bucket{le=\"0.001\"} 0"));
        assert!(text.contains("detllm_step_seconds_bucket{le=\"0.005\"} 1"));
        assert!(text.contains("detllm_step_seconds_bucket{le=\"0.25\"} 2"));
        assert!(text.contains("detllm_step_seconds_bucket{le=\"+Inf\"} 2"));
        assert!(text.contains("detllm_step_seconds_count 2"));
    }

    #[test]
    fn outcomes_are_labelled() {
        let m = Metrics::default();
        m.request(Outcome::Busy);
        m.request(Outcome::Busy);
        assert!(
            m.render()
                .contains("detllm_requests_total{outcome=\"busy\"} 2")
        );
        assert!(
            m.render()
                .contains("detllm_requests_total{outcome=\"ok\"} 0")
        );
    }
}
