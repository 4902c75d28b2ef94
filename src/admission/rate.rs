//! A token bucket per peer, for the receiver to hold across requests. Pure:
//! the caller passes `now`, so tests need no clock. Bounded: it keeps at
//! most `max_peers` buckets, dropping full ones first (a full bucket is the
//! same as none) and then the longest idle.

use std::collections::HashMap;
use std::time::Instant;

use super::violation::{Violation, reasons};
use crate::crd::RateLimitSpec;

/// Token buckets by peer name.
#[derive(Debug)]
pub struct RateLimiter {
    buckets: HashMap<String, Bucket>,
    max_peers: usize,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    updated: Instant,
    /// The peer's limit as of its last request, for judging it idle later.
    capacity: f64,
    per_second: f64,
}

impl Bucket {
    fn new(limit: &RateLimitSpec, now: Instant) -> Self {
        let (capacity, per_second) = rates(limit);
        Bucket {
            tokens: capacity,
            updated: now,
            capacity,
            per_second,
        }
    }

    /// Refills for the time since the last update, up to the capacity.
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        self.updated = self.updated.max(now);
    }
}

/// Capacity and refill per second; both at least one request.
fn rates(limit: &RateLimitSpec) -> (f64, f64) {
    (
        f64::from(limit.burst.max(1)),
        f64::from(limit.requests_per_minute.max(1)) / 60.0,
    )
}

impl RateLimiter {
    /// A limiter remembering at most `max_peers` peers (at least one).
    pub fn new(max_peers: usize) -> Self {
        RateLimiter {
            buckets: HashMap::new(),
            max_peers: max_peers.max(1),
        }
    }

    /// Takes one request of `peer` at `now` under `limit`, or refuses it.
    /// Call it once per new request, not per reconcile of the same one.
    pub fn admit(
        &mut self,
        peer: &str,
        limit: &RateLimitSpec,
        now: Instant,
    ) -> Result<(), Violation> {
        if !self.buckets.contains_key(peer) {
            self.make_room(now);
        }
        let bucket = self
            .buckets
            .entry(peer.to_owned())
            .or_insert_with(|| Bucket::new(limit, now));
        (bucket.capacity, bucket.per_second) = rates(limit);
        bucket.refill(now);
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            return Ok(());
        }
        let wait = (1.0 - bucket.tokens) * 60.0 / f64::from(limit.requests_per_minute.max(1));
        Err(Violation::new(
            reasons::RATE_LIMITED,
            "spec.admission.rateLimit",
            format!(
                "peer {peer:?} sent more than {} requests at once or {} a minute; the next is accepted in about {:.0}s",
                limit.burst,
                limit.requests_per_minute,
                wait.ceil()
            ),
        ))
    }

    /// How many peers it remembers.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether it remembers no peer.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Frees a slot for a new peer: full buckets go first, then the one
    /// idle longest.
    fn make_room(&mut self, now: Instant) {
        if self.buckets.len() < self.max_peers {
            return;
        }
        self.buckets.retain(|_, bucket| {
            let mut refilled = *bucket;
            refilled.refill(now);
            refilled.tokens < refilled.capacity
        });
        while self.buckets.len() >= self.max_peers {
            let Some(idle) = self
                .buckets
                .iter()
                .min_by_key(|(_, b)| b.updated)
                .map(|(peer, _)| peer.clone())
            else {
                break;
            };
            self.buckets.remove(&idle);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limit(per_minute: u32, burst: u32) -> RateLimitSpec {
        RateLimitSpec {
            requests_per_minute: per_minute,
            burst,
        }
    }

    #[test]
    fn a_burst_passes_then_the_next_waits_for_a_refill() {
        let mut limiter = RateLimiter::new(8);
        let limit = limit(6, 3);
        let start = Instant::now();
        for _ in 0..3 {
            limiter.admit("a", &limit, start).unwrap();
        }
        let refused = limiter.admit("a", &limit, start).unwrap_err();
        assert_eq!(refused.reason, reasons::RATE_LIMITED);
        assert!(refused.message.contains("about 10s"), "{}", refused.message);
        assert!(
            limiter
                .admit("a", &limit, start + Duration::from_secs(9))
                .is_err()
        );
        limiter
            .admit("a", &limit, start + Duration::from_secs(10))
            .unwrap();
    }

    #[test]
    fn peers_have_buckets_of_their_own() {
        let mut limiter = RateLimiter::new(8);
        let limit = limit(1, 1);
        let now = Instant::now();
        limiter.admit("a", &limit, now).unwrap();
        assert!(limiter.admit("a", &limit, now).is_err());
        limiter.admit("b", &limit, now).unwrap();
    }

    #[test]
    fn memory_stays_bounded_however_many_peers_call() {
        let mut limiter = RateLimiter::new(4);
        let limit = limit(1, 1);
        let now = Instant::now();
        for i in 0..1000 {
            let _ = limiter.admit(&format!("peer-{i}"), &limit, now + Duration::from_millis(i));
            assert!(limiter.len() <= 4);
        }
        assert_eq!(limiter.len(), 4);
    }

    #[test]
    fn a_full_bucket_is_dropped_before_a_draining_one() {
        let mut limiter = RateLimiter::new(2);
        let limit = limit(1, 1);
        let start = Instant::now();
        limiter.admit("a", &limit, start).unwrap();
        limiter
            .admit("b", &limit, start + Duration::from_secs(30))
            .unwrap();
        // At 65s "a" has refilled (one a minute) and goes; "b" has not.
        let later = start + Duration::from_secs(65);
        limiter.admit("c", &limit, later).unwrap();
        assert_eq!(limiter.len(), 2);
        let refused = limiter.admit("b", &limit, later).unwrap_err();
        assert_eq!(refused.reason, reasons::RATE_LIMITED);
    }

    #[test]
    fn a_clock_going_backwards_gives_no_tokens() {
        let mut limiter = RateLimiter::new(2);
        let limit = limit(60, 1);
        let now = Instant::now() + Duration::from_secs(100);
        limiter.admit("a", &limit, now).unwrap();
        assert!(
            limiter
                .admit("a", &limit, now - Duration::from_secs(50))
                .is_err()
        );
    }
}
