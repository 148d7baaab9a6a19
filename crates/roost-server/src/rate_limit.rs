//! Per-caller rate limits: one token bucket per caller (an admin token; an agent with all its
//! keys and run keys together: `Actor::principal`), checked after authentication on REST (`rest/extract.rs`) and gRPC
//! (`grpc/service.rs`). The buckets live in this node's memory only: a client spreading its
//! requests over N nodes gets up to N times the rate, and a restart refills every bucket.
//! That is enough for what they are for, keeping one caller (a runaway agent's loop, a
//! leaked key) from taking a node's whole capacity.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::auth::Caller;
use crate::error::ApiError;

/// Buckets kept before full ones are dropped (a full bucket is the same as no bucket).
const PRUNE_ABOVE: usize = 10_000;

/// A cheap handle; clones share the buckets. `off()` lets everything through.
#[derive(Clone, Default)]
pub struct RateLimiter {
    inner: Option<Arc<Inner>>,
}

struct Inner {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    /// `requests_per_second` refill, up to `burst` at once; 0 requests per second is off.
    pub fn new(requests_per_second: u32, burst: u32) -> RateLimiter {
        if requests_per_second == 0 {
            return RateLimiter::off();
        }
        RateLimiter {
            inner: Some(Arc::new(Inner {
                per_second: f64::from(requests_per_second),
                burst: f64::from(burst.max(1)),
                buckets: Mutex::default(),
            })),
        }
    }

    pub fn off() -> RateLimiter {
        RateLimiter { inner: None }
    }

    /// Takes one request from the caller's bucket; `RateLimited` (429, `Retry-After`) when
    /// it is empty.
    pub fn check(&self, caller: &Caller) -> Result<(), ApiError> {
        self.take(caller.actor.principal(), Instant::now())
            .map_err(|wait| ApiError::RateLimited {
                retry_after_secs: wait.as_secs_f64().ceil().max(1.0) as u64,
            })
    }

    /// One request for `key` at `now`; how long until one is available if none is.
    fn take(&self, key: &str, now: Instant) -> Result<(), Duration> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        let mut buckets = inner.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|_, b| inner.refilled(*b, now) < inner.burst);
        }
        let bucket = buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: inner.burst,
            at: now,
        });
        let tokens = inner.refilled(*bucket, now);
        if tokens >= 1.0 {
            *bucket = Bucket {
                tokens: tokens - 1.0,
                at: now,
            };
            Ok(())
        } else {
            *bucket = Bucket { tokens, at: now };
            Err(Duration::from_secs_f64((1.0 - tokens) / inner.per_second))
        }
    }
}

impl Inner {
    fn refilled(&self, bucket: Bucket, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        (bucket.tokens + elapsed * self.per_second).min(self.burst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_past_the_limit_waits_for_the_refill_and_other_keys_are_not_affected() {
        let limiter = RateLimiter::new(2, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.take("a", t0), Ok(()));
        }
        let wait = limiter
            .take("a", t0)
            .expect_err("the fourth request is over the burst");
        assert_eq!(wait, Duration::from_millis(500));
        assert_eq!(
            limiter.take("b", t0),
            Ok(()),
            "another caller has its own bucket"
        );
        assert_eq!(limiter.take("a", t0 + Duration::from_millis(500)), Ok(()));
        assert!(limiter.take("a", t0 + Duration::from_millis(500)).is_err());
    }

    /// Regression: each of an agent's keys and run keys had a bucket of its own. Two requests
    /// a few microseconds apart at one a second: the second finds the bucket empty.
    #[test]
    fn an_agents_keys_take_from_one_bucket() {
        use roost_core::{Actor, ActorKind};
        let limiter = RateLimiter::new(1, 1);
        let caller = |kind, credential: &str| Caller {
            actor: Actor {
                kind,
                id: "a1".into(),
                credential_id: Some(credential.into()),
                run_id: None,
                company_id: None,
            },
            idempotency_key: None,
        };
        assert!(limiter.check(&caller(ActorKind::Agent, "key")).is_ok());
        assert!(
            limiter.check(&caller(ActorKind::Agent, "run-key")).is_err(),
            "the agent's run key had a bucket of its own"
        );
        assert!(
            limiter
                .check(&caller(ActorKind::User, "admin-token"))
                .is_ok(),
            "an administrator's token is a caller of its own"
        );
    }

    #[test]
    fn off_lets_everything_through() {
        let limiter = RateLimiter::new(0, 0);
        let t0 = Instant::now();
        assert!((0..10_000).all(|_| limiter.take("a", t0).is_ok()));
    }
}
