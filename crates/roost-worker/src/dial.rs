//! Reaching a server: the TLS client, how long a dial and a silent server may take, and the
//! pause between dials. A real partition drops packets without a word: a dial to a node cut
//! off, or a connection whose server went silent, would otherwise wait for TCP to give up
//! (about two minutes for a dial, a quarter of an hour for an open connection) while the
//! worker's lease ran out with a reachable leader elsewhere.

use std::time::Duration;

use roost_proto::v1::worker_client::WorkerClient;
use tracing::warn;

use crate::config::WorkerConfig;

/// The first pause between failed dials, doubled at each failure up to [`REDIAL_MAX`].
pub(crate) const REDIAL_FIRST: Duration = Duration::from_millis(50);
pub(crate) const REDIAL_MAX: Duration = Duration::from_secs(2);

/// How long a dial may take (TCP, TLS, HTTP/2) before the next server is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The shortest wait for a server's next message: a few lost acks on a fast renewal interval
/// are not a silent server.
const MIN_SILENCE: Duration = Duration::from_millis(500);

/// How long a connection may hear nothing from its server before the worker gives it up and
/// dials again: two renewal intervals (each renewal is acknowledged), and at most half the
/// lease and three quarters of the time after which it fences itself (`fence_fraction` of the
/// lease, `WorkerConfig::self_fence_fraction`), so that it is registered elsewhere before its
/// agents are stopped and before the cluster would declare it lost.
pub(crate) fn silence_limit(
    renew_every: Duration,
    lease_ttl: Duration,
    fence_fraction: f64,
) -> Duration {
    (renew_every * 2)
        .max(MIN_SILENCE)
        .min(lease_ttl / 2)
        .min(lease_ttl.mul_f64(fence_fraction * 0.75))
}

/// The pause before the next dial when a connection ended without naming the leader. Under
/// 50 ms after a connection that had registered: its server went away (a killed leader's does)
/// and the next one may already lead, or will name the new leader once it is elected (250-300
/// ms at the default Raft timing). Then about 50 ms, doubling up to 2 s while dials keep
/// failing, so a worker reaches a new leader within a few hundred milliseconds and a down
/// cluster is asked every 2 s or so. `spread` (in [0, 1), random) scatters the pauses over
/// half to one and a half times that, so a fleet whose leader died does not dial in lockstep.
pub(crate) fn redial_pause(failed_dials: u32, spread: f64) -> Duration {
    let Some(doublings) = failed_dials.checked_sub(1) else {
        return REDIAL_FIRST.mul_f64(spread);
    };
    let pause = REDIAL_FIRST
        .checked_mul(2u32.saturating_pow(doublings))
        .map_or(REDIAL_MAX, |pause| pause.min(REDIAL_MAX));
    pause.mul_f64(0.5 + spread)
}

/// A number in [0, 1) that differs from call to call (std's randomly keyed hasher; no
/// generator is needed for a pause).
pub(crate) fn spread() -> f64 {
    use std::hash::BuildHasher;
    let bits = std::collections::hash_map::RandomState::new().hash_one(());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A client for the server at `addr`: TLS with the cluster CA when `[tls]` names one.
pub(crate) async fn connect(
    addr: &str,
    config: &WorkerConfig,
) -> Option<WorkerClient<tonic::transport::Channel>> {
    let tls = match config.tls.client_config() {
        Ok(tls) => tls,
        Err(error) => {
            warn!(%error, "cannot read the TLS files");
            return None;
        }
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint =
        tonic::transport::Endpoint::from_shared(format!("{scheme}://{addr}")).ok()?;
    if let Some(tls) = tls {
        endpoint = match endpoint.tls_config(tls) {
            Ok(e) => e,
            Err(error) => {
                warn!(%error, addr, "TLS settings refused");
                return None;
            }
        };
    }
    // The whole dial: TCP, TLS and HTTP/2's handshake (a server that accepts and then says
    // nothing would hold `connect` for good).
    match tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect()).await {
        Ok(Ok(channel)) => Some(WorkerClient::new(channel)),
        Ok(Err(error)) => {
            tracing::debug!(%error, addr, "cannot connect");
            None
        }
        Err(_) => {
            tracing::debug!(
                addr,
                timeout_ms = CONNECT_TIMEOUT.as_millis() as u64,
                "dial timed out"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_silent_server_is_given_up_after_two_renewals_and_within_half_the_lease() {
        assert_eq!(
            silence_limit(ms(1000), ms(5000), 0.6),
            ms(2000),
            "the defaults"
        );
        assert_eq!(
            silence_limit(ms(10_000), ms(50_000), 0.6),
            ms(20_000),
            "a stretched fleet"
        );
        assert_eq!(
            silence_limit(ms(200), ms(2000), 0.6),
            ms(500),
            "at least MIN_SILENCE"
        );
        assert_eq!(
            silence_limit(ms(2000), ms(3000), 0.9),
            ms(1500),
            "at most half the lease"
        );
        assert_eq!(
            silence_limit(ms(1000), ms(5000), 0.3),
            ms(1125),
            "before the worker would fence itself (1.5 s in)"
        );
    }
}
