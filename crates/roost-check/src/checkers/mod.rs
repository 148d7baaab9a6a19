//! The checkers, one property per module. Each takes the history and/or observations of the
//! replicas and returns a [`Verdict`](crate::Verdict).

pub mod ack_writes;
pub mod budget;
pub mod double_checkout;
pub mod hashes;
pub mod linearizable;
pub mod liveness;
pub mod routines;
pub mod wakes;

#[cfg(test)]
pub(crate) mod testutil;

pub use ack_writes::check_acknowledged_writes;
pub use budget::{check_reservations, BudgetObservation};
pub use double_checkout::check_no_double_checkout;
pub use hashes::{check_state_hashes, HashObservation};
pub use linearizable::{check_checkout_linearizable, SearchLimits};
pub use liveness::{check_liveness, LIVENESS_WINDOW_NS};
pub use routines::{check_routine_firings, RoutineSchedule};
pub use wakes::check_acknowledged_wakes;
