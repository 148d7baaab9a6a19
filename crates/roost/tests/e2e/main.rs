//! End-to-end tests: one binary. In-process nodes for API behaviour, real `roost` processes for
//! crashes and the CLI. Regression tests are named after the bug they pin.

mod authz;
mod bad_input;
mod budgets;
mod checkout;
mod cluster;
mod crash;
mod credentials;
mod fleet;
mod grpc;
mod hostile;
mod issue_lists;
mod limits;
mod logs;
mod memory;
mod memory_follows;
mod metrics;
mod paperclip_cli;
mod paperclip_compat;
mod paperclip_edits;
mod paperclip_skill;
mod peers;
mod processes;
mod readiness;
mod readme;
mod secrets;
mod shutdown;
mod support;
mod tls;
mod wake_payload;
mod wakes_api;
mod worker_fencing;
mod worker_identity;
mod worker_process;
mod worker_sessions;
mod workers;
