//! Group commit through `RaftNode::write`: concurrent writes share log entries, and each
//! still gets its own outcome, as if it had been proposed alone.

use std::time::Duration;

use roost_core::{Actor, Command, DomainError, Envelope, Outcome, Timestamp};
use roost_raft::{NodeInfo, RaftNode, RaftTiming};

fn create_company(id: &str) -> Envelope {
    Envelope {
        request_id: None,
        at: Timestamp(1_700_000_000_000),
        actor: Actor::system(),
        command: Command::CreateCompany {
            id: id.into(),
            name: format!("company {id}"),
            // Prefixes are unique too: letters only, derived from the id.
            issue_prefix: id
                .bytes()
                .filter(u8::is_ascii_alphanumeric)
                .map(|b| (b'A' + b % 26) as char)
                .collect(),
        },
        idempotency_key: None,
    }
}

async fn single_node(dir: &std::path::Path) -> anyhow::Result<RaftNode> {
    single_node_with(dir, &RaftTiming::default()).await
}

fn node_info() -> NodeInfo {
    NodeInfo {
        grpc_addr: "127.0.0.1:1".into(),
        http_addr: "127.0.0.1:2".into(),
        peer_addr: "127.0.0.1:3".into(),
    }
}

async fn single_node_with(dir: &std::path::Path, timing: &RaftTiming) -> anyhow::Result<RaftNode> {
    let node = RaftNode::start(1, node_info(), dir, timing).await?;
    node.initialize_single().await?;
    node.wait_for_leader(Duration::from_secs(10)).await?;
    // The leader's first (blank) entry is applied once it can take writes.
    node.write(create_company("warm-up")).await?;
    Ok(node)
}

/// The single node of `dir` started again, once it leads.
async fn restarted(dir: &std::path::Path) -> anyhow::Result<RaftNode> {
    let node = RaftNode::start(1, node_info(), dir, &RaftTiming::default()).await?;
    node.wait_for_leader(Duration::from_secs(10)).await?;
    Ok(node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_share_entries_and_each_gets_its_own_outcome() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let node = single_node(dir.path()).await?;
    let before = node.reader().applied_index();

    // 300 writers at once, each company id twice: exactly one of each pair is created.
    let writes: Vec<_> = (0..300)
        .map(|i| {
            let node = node.clone();
            tokio::spawn(async move {
                let id = format!("co-{}", i % 150);
                (id.clone(), node.write(create_company(&id)).await)
            })
        })
        .collect();
    let mut created = std::collections::BTreeMap::new();
    let mut refused = 0;
    for w in writes {
        let (id, written) = w.await?;
        match written?.result {
            Ok(Outcome::Company(c)) => {
                assert_eq!(c.id, id, "a writer got another writer's outcome");
                *created.entry(id).or_insert(0) += 1;
            }
            Err(DomainError::AlreadyExists { .. }) => refused += 1,
            other => anyhow::bail!("unexpected outcome {other:?}"),
        }
    }
    assert_eq!(created.len(), 150);
    assert!(created.values().all(|n| *n == 1), "{created:?}");
    assert_eq!(refused, 150);
    let companies = node.reader().read(|s| s.companies.len());
    assert_eq!(companies, 151);

    let entries = node.reader().applied_index() - before;
    println!("300 concurrent writes took {entries} log entries");
    assert!(
        entries < 300 / 2,
        "300 concurrent writes took {entries} log entries: no group commit"
    );
    node.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_write_is_proposed_as_its_own_entry_and_survives_a_restart() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let node = single_node(dir.path()).await?;
    let written = node.write(create_company("alone")).await?;
    assert!(written.result.is_ok(), "{:?}", written.result);
    let hash = node.reader().state_hash();
    node.shutdown().await;
    drop(node);

    let again = restarted(dir.path()).await?;
    assert!(again.reader().read(|s| s.companies.contains_key("alone")));
    assert!(again.reader().applied_index() >= written.index);
    assert_eq!(again.reader().state_hash().1, hash.1);
    again.shutdown().await;
    Ok(())
}

/// Issue 21: a follower refuses a Raft message over `MAX_RAFT_MESSAGE_BYTES`, so an
/// AppendEntries of a few batch entries of big writes must stay under it, or the leader would
/// send it, be refused, and send it again for ever. Big writes go out in more, smaller entries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_writes_are_split_over_entries_so_no_append_exceeds_the_message_cap(
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // Megabytes of JSON per entry on a debug build: more time than the default 5 s to commit.
    let timing = RaftTiming {
        write_timeout_ms: 60_000,
        ..RaftTiming::default()
    };
    let node = single_node_with(dir.path(), &timing).await?;
    // 24 writes of 200 KiB each (refused by the rules, but entries all the same): 4.8 MiB.
    let writes: Vec<_> = (0..24)
        .map(|i| {
            let node = node.clone();
            tokio::spawn(async move {
                let mut big = create_company(&format!("big-{i}"));
                if let Command::CreateCompany { name, .. } = &mut big.command {
                    *name = "x".repeat(200 * 1024);
                }
                node.write(big).await
            })
        })
        .collect();
    let mut per_index = std::collections::BTreeMap::<u64, usize>::new();
    for w in writes {
        let written = w.await??;
        assert!(
            written.result.is_err(),
            "a 200 KiB name is refused by the rules"
        );
        *per_index.entry(written.index).or_default() += 1;
    }
    // At most 256 KiB of JSON per entry (proposer.rs, MAX_BATCH_BYTES): one of these each.
    let most = per_index.values().max().copied().unwrap_or(0);
    assert_eq!(
        most, 1,
        "an entry held {most} writes of 200 KiB: {per_index:?}"
    );
    node.shutdown().await;
    Ok(())
}

/// A write past `MAX_WRITE_BYTES` of JSON is refused before it is proposed: nothing enters
/// the log, whatever field made it big (the API's bounds name most fields, not all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_past_the_write_bound_never_enters_the_log() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let node = single_node(dir.path()).await?;
    let before = node.reader().applied_index();
    let mut big = create_company("too-big");
    if let Command::CreateCompany { id, .. } = &mut big.command {
        *id = "x".repeat(roost_raft::MAX_WRITE_BYTES);
    }
    match node.write(big).await {
        Err(roost_raft::Error::TooLarge { bytes }) => {
            assert!(bytes > roost_raft::MAX_WRITE_BYTES, "{bytes}");
        }
        other => anyhow::bail!("a write past the bound answered {other:?}"),
    }
    // The next write is the next entry: the refused one took no index.
    let next = node.write(create_company("after")).await?;
    assert_eq!(next.index, before + 1);
    node.shutdown().await;
    Ok(())
}

/// The same request under one `Idempotency-Key` from many writers at once (one log entry for
/// several, as group commit makes), then again after a restart: every answer is the first
/// outcome, whole. Memory keeps only the key (`roost_core::idempotency::Seen`); the answer to a
/// repeat is read from the key's row in `state.db` by the node that proposed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_write_repeated_at_once_and_after_a_restart_answers_its_first_outcome(
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let node = single_node(dir.path()).await?;
    // Each copy has its own minted id, as a retry through another node has.
    let keyed = |n: usize| {
        let mut env = create_company(&format!("keyed-{n}"));
        if let Command::CreateCompany {
            name, issue_prefix, ..
        } = &mut env.command
        {
            *name = "the same company".into();
            *issue_prefix = "KEY".into();
        }
        env.idempotency_key = Some("one-key".into());
        env
    };
    let writes: Vec<_> = (0..40)
        .map(|n| {
            let node = node.clone();
            tokio::spawn(async move { node.write(keyed(n)).await })
        })
        .collect();
    let mut answered = Vec::new();
    for w in writes {
        match w.await??.result {
            Ok(Outcome::Company(c)) => answered.push(c),
            other => anyhow::bail!("a repeat answered {other:?}"),
        }
    }
    let first = answered[0].clone();
    assert!(first.id.starts_with("keyed-"), "{first:?}");
    assert!(answered.iter().all(|c| *c == first), "{answered:?}");
    let keyed_companies = node.reader().read(|s| {
        s.companies
            .keys()
            .filter(|id| id.starts_with("keyed-"))
            .count()
    });
    assert_eq!(keyed_companies, 1, "the key applied once");
    node.shutdown().await;
    drop(node);

    let again = restarted(dir.path()).await?;
    match again.write(keyed(99)).await?.result {
        Ok(Outcome::Company(c)) => assert_eq!(c, first),
        other => anyhow::bail!("a repeat after a restart answered {other:?}"),
    }
    again.shutdown().await;
    Ok(())
}
