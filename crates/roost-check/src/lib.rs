//! History checkers for Roost's fault-injection suite: a recorded client history and the
//! replicas' final states in, a [`Verdict`] naming the offending operations out.
//!
//! Pure functions, no IO beyond parsing JSON lines. The harness records every client
//! operation as an [`Op`] (call and return time on one monotonic clock, outcome `ok`, `failed`
//! or `unknown`), fills a [`ReplicaSnapshot`] per replica after the heal, and runs:
//!
//! | checker | property |
//! |---|---|
//! | [`check_no_double_checkout`] | per issue, tokens increase in real time; no two holds overlap |
//! | [`check_acknowledged_writes`] | every ok comment and cost event is on every replica |
//! | [`check_acknowledged_wakes`] | every ok wake ran, or says why not (coalesced, skipped, ...) |
//! | [`check_reservations`] | no reservation was committed past a hard budget limit |
//! | [`check_state_hashes`] | replicas at the same applied index have the same state hash |
//! | [`check_checkout_linearizable`] | per issue, checkout/release is a linearizable fenced lock |
//! | [`check_liveness`] | after the heal a new write succeeded within 5 s |
//! | [`check_routine_firings`] | every due instant of a schedule fired exactly once |
//!
//! Time comparisons are strict: operation A precedes B only if `A.return_ns < B.call_ns`; equal
//! timestamps count as concurrent.

pub mod checkers;
mod error;
pub mod history;
pub mod snapshot;
mod verdict;

pub use checkers::{
    check_acknowledged_wakes, check_acknowledged_writes, check_checkout_linearizable,
    check_liveness, check_no_double_checkout, check_reservations, check_routine_firings,
    check_state_hashes, BudgetObservation, HashObservation, RoutineSchedule, SearchLimits,
    LIVENESS_WINDOW_NS,
};
pub use error::Error;
pub use history::{Action, History, OkResult, Op, OpId, Outcome};
pub use snapshot::{
    CheckoutSnapshot, IssueSnapshot, MemorySnapshot, PolicySnapshot, ReplicaSnapshot,
    RoutineRunSnapshot, RoutineSnapshot, RunSnapshot, RunStatus, WakeSnapshot, WakeStatus,
};
pub use verdict::{Verdict, Violation};
