//! Issue 20's attacks, replayed through the REST API against three real `roost server`
//! processes of this build: each one gets a clear 4xx, nothing of another tenant or of a secret
//! leaks, and afterwards every node still serves and all agree on one state hash.
//!
//! One cluster serves every attack (starting three processes is the slow part). Each attack is
//! its own section; a failing section is recorded and the others still run, so one run of the
//! test names every attack that still gets through.

mod attacks;
mod world;

use anyhow::ensure;

use attacks::*;
use world::*;

/// Issue 20's acceptance: every attack, through REST against three real server processes, gets
/// a clear 4xx; no tenant sees another's outcome; no secret, token hash or Debug output leaves
/// the API; and afterwards all three nodes serve and agree on the state hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_4xx_and_a_three_process_cluster_keeps_serving_and_agreeing(
) -> anyhow::Result<()> {
    let _one_cluster = crate::support::one_cluster_at_a_time().await;
    let dir = tempfile::tempdir()?;
    let w = setup(dir.path()).await?;

    let mut failed: Vec<String> = Vec::new();
    macro_rules! section {
        ($name:ident) => {{
            let mut f = Findings::default();
            let result = $name(&w, &mut f).await;
            f.check(result);
            failed.extend(
                f.0.into_iter()
                    .map(|e| format!("{}: {e}", stringify!($name))),
            );
        }};
    }
    // The attacks that broke apply or the timer come last: where they still do, the cluster
    // is gone, and the others should have had their own verdict first.
    section!(idempotency_keys_are_scoped_to_their_tenant);
    section!(oversized_fields_are_refused_and_nothing_is_written);
    section!(secrets_and_token_hashes_never_leave_the_api);
    section!(data_files_are_private);
    section!(a_cost_of_u64_max_is_refused_and_spend_stays_exact);
    section!(admin_overflows_are_refused_and_the_leader_still_dispatches);
    let last = every_node_serves_and_converges(&w, "after all attacks").await;
    failed.extend(last.err().map(|e| format!("{e:#}")));
    section!(no_reply_leaked);

    ensure!(
        failed.is_empty(),
        "{} findings:\n\n{}\n\n{}",
        failed.len(),
        failed.join("\n\n"),
        log_tails(&w.procs.nodes)
    );
    Ok(())
}
