//! `roost-bench apply`: what the checkout workload costs one node to decode and apply, in this
//! process, on one thread. The log entries are the ones group commit makes under
//! `etcd-checkout` (each a batch of checkouts and releases by agents with their own run and two
//! issues), encoded as the leader encodes them, decoded as a follower reads AppendEntries, and
//! applied through the node's own state machine (`roost_store::StateMachineStore`: the rules,
//! memory, and the rows written into `state.db`'s open transaction). No Raft, no network, no
//! log: the part of a write every node pays.
//!
//! Why: on a 2-core VM the cluster benchmarks' runs of one binary spread by 15-50%, and perf's
//! instruction counters are not available, so a cut of a few percent of a write's CPU cannot
//! be shown there. This runs on one thread of its own (a current-thread runtime) and reports
//! that thread's CPU time per write, which does not count time spent waiting for a CPU. What
//! `state.db`'s commit thread spends is counted apart, from the process's CPU time. That time
//! still spreads by up to a quarter between runs on a VM; the instruction counts callgrind
//! takes of the same run do not (BENCHMARKS.md, "Apply on one thread"). Ids are short (`a0001`,
//! `i0001-0`) where a server's are UUIDs: the counts compare commits, not absolute costs.

use std::time::Instant;

use anyhow::{bail, Context};
use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};
use roost_core::command::IssuePatch;
use roost_core::{
    Actor, ActorKind, AdapterType, Command, Envelope, HeartbeatPolicy, IssueStatus, Timestamp,
};
use roost_store::{StateMachineStore, TypeConfig};
use serde_json::{json, Value};

use crate::stats::median;

const COMPANY: &str = "c-bench";

#[derive(clap::Args, Clone)]
pub struct ApplyArgs {
    /// Agents, each with its own run and two issues (`etcd-checkout`'s clients)
    #[arg(long, default_value_t = 64)]
    agents: u64,
    /// Writes (a checkout or a release each) per log entry: group commit made 18 at 64
    /// clients (`etcd-checkout`'s writes/entry)
    #[arg(long, default_value_t = 18)]
    batch: u64,
    /// Writes applied in each repeat
    #[arg(long, default_value_t = 100_000)]
    writes: u64,
    /// Repeats, each on a fresh `state.db`
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// One JSON object per repeat, then one with the medians, instead of the table
    #[arg(long)]
    json: bool,
}

/// One repeat's costs, in microseconds per write.
struct Costs {
    encode: f64,
    decode: f64,
    apply: f64,
    apply_wall: f64,
    /// The process's CPU time over the apply phase, the commit thread's included.
    process: f64,
}

pub async fn run(args: ApplyArgs) -> anyhow::Result<()> {
    if args.agents == 0 || args.batch == 0 || args.writes == 0 {
        bail!("--agents, --batch and --writes must be at least 1");
    }
    if args.batch > roost_core::state::SLOTS_PER_ENTRY {
        bail!(
            "--batch {}: a log entry holds at most {} commands",
            args.batch,
            roost_core::state::SLOTS_PER_ENTRY
        );
    }
    if !args.json {
        println!(
            "{} agents, {} writes per entry, {} writes per repeat; microseconds per write, \
             CPU time of the applying thread",
            args.agents, args.batch, args.writes
        );
        println!(
            "{:>6} {:>10} {:>10} {:>10} {:>12} {:>14}",
            "repeat", "encode", "decode", "apply", "apply wall", "process CPU"
        );
    }
    let mut all = Vec::new();
    // Repeat 0 warms up (page faults, the allocator's first pages) and is not shown.
    for repeat in 0..=args.repeat {
        let a = args.clone();
        // A thread and a current-thread runtime of its own: every step of the apply runs here
        // (`roost_store`'s blocking sections run inline on such a runtime), so this thread's
        // CPU time is the apply's.
        let costs = std::thread::spawn(move || -> anyhow::Result<Costs> {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(one(&a))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the measuring thread panicked"))??;
        if repeat == 0 {
            continue;
        }
        if args.json {
            println!("{}", costs_json(Some(repeat), &costs));
        } else {
            print_row(&repeat.to_string(), &costs);
        }
        all.push(costs);
    }
    let mid = |f: fn(&Costs) -> f64| median(all.iter().map(f).collect());
    let medians = Costs {
        encode: mid(|c| c.encode),
        decode: mid(|c| c.decode),
        apply: mid(|c| c.apply),
        apply_wall: mid(|c| c.apply_wall),
        process: mid(|c| c.process),
    };
    if args.json {
        println!("{}", costs_json(None, &medians));
    } else {
        print_row("median", &medians);
    }
    Ok(())
}

fn print_row(label: &str, c: &Costs) {
    println!(
        "{label:>6} {:>10.2} {:>10.2} {:>10.2} {:>12.2} {:>14.2}",
        c.encode, c.decode, c.apply, c.apply_wall, c.process
    );
}

fn costs_json(repeat: Option<usize>, c: &Costs) -> Value {
    json!({
        "repeat": repeat,
        "encodeUsPerWrite": c.encode,
        "decodeUsPerWrite": c.decode,
        "applyCpuUsPerWrite": c.apply,
        "applyWallUsPerWrite": c.apply_wall,
        "processCpuUsPerWrite": c.process,
    })
}

/// CPU time of the calling thread (`thread`) or of the whole process, in microseconds.
fn cpu_us(thread: bool) -> f64 {
    let clock = if thread {
        libc::CLOCK_THREAD_CPUTIME_ID
    } else {
        libc::CLOCK_PROCESS_CPUTIME_ID
    };
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

fn admin() -> Actor {
    Actor {
        kind: ActorKind::User,
        id: "admin".into(),
        credential_id: Some("cred-bench".into()),
        run_id: None,
        company_id: None,
    }
}

fn envelope(at: i64, actor: Actor, command: Command) -> Envelope {
    Envelope {
        request_id: None,
        at: Timestamp(at),
        actor,
        command,
        idempotency_key: None,
    }
}

fn entry(index: u64, envelope: Envelope) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(envelope.into()),
    }
}

fn agent(c: u64) -> String {
    format!("a{c:04}")
}

fn issue(c: u64, k: u64) -> String {
    format!("i{c:04}-{k}")
}

/// The company, then per agent: the agent, its run and its two issues, one entry each.
fn setup(agents: u64) -> Vec<Envelope> {
    let mut out = vec![envelope(
        1,
        admin(),
        Command::CreateCompany {
            id: COMPANY.into(),
            name: "Bench".into(),
            issue_prefix: "BEN".into(),
        },
    )];
    for c in 0..agents {
        out.push(envelope(
            1,
            admin(),
            Command::CreateAgent {
                id: agent(c),
                company_id: COMPANY.into(),
                name: agent(c),
                role: "engineer".into(),
                title: None,
                adapter_type: AdapterType::Process,
                adapter_config: json!({}),
                heartbeat: HeartbeatPolicy::default(),
                placement_labels: Default::default(),
            },
        ));
        out.push(envelope(
            1,
            admin(),
            Command::StartRun {
                id: format!("r{c:04}"),
                agent_id: agent(c),
                issue_id: None,
                invocation_source: "on_demand".into(),
            },
        ));
        for k in 0..2 {
            out.push(envelope(
                1,
                admin(),
                Command::CreateIssue {
                    id: issue(c, k),
                    company_id: COMPANY.into(),
                    fields: IssuePatch {
                        title: Some(format!("issue {c}-{k}")),
                        status: Some(IssueStatus::Todo),
                        ..IssuePatch::default()
                    },
                },
            ));
        }
    }
    out
}

/// Write `w` of the workload: the agents take turns, each checking out one of its issues in
/// one round and releasing it in the next, alternating between its two issues, as
/// `etcd-checkout`'s clients do.
fn write(agents: u64, w: u64) -> Envelope {
    let (round, c) = (w / agents, w % agents);
    let id = issue(c, (round / 2) % 2);
    let actor = Actor {
        kind: ActorKind::Agent,
        id: agent(c),
        credential_id: Some(format!("key-{c}")),
        run_id: Some(format!("r{c:04}")),
        company_id: Some(COMPANY.into()),
    };
    let command = if round % 2 == 0 {
        Command::Checkout {
            issue_id: id,
            agent_id: agent(c),
            expected_statuses: vec![IssueStatus::Todo],
        }
    } else {
        Command::Release { issue_id: id }
    };
    envelope(1_000 + w as i64, actor, command)
}

async fn one(args: &ApplyArgs) -> anyhow::Result<Costs> {
    let dir = tempfile::tempdir()?;
    let (mut sm, _reader) = StateMachineStore::open(dir.path())
        .await
        .context("open the state machine")?;
    let mut index = 0;
    for e in setup(args.agents) {
        index += 1;
        let applied = sm.apply([entry(index, e)]).await.context("apply setup")?;
        if let Some(Some(Err(e))) = applied.first().map(|r| r.result.clone()) {
            bail!("setting up failed at entry {index}: {e}");
        }
    }

    // The entries as the leader proposes them, encoded as it encodes them for followers.
    let mut encoded = Vec::new();
    let mut encode_us = 0.0;
    let mut w = 0;
    while w < args.writes {
        let end = (w + args.batch).min(args.writes);
        let envelopes: Vec<Envelope> = (w..end).map(|w| write(args.agents, w)).collect();
        let at = envelopes.iter().map(|e| e.at).max().unwrap_or_default();
        index += 1;
        let e = entry(
            index,
            envelope(at.0, Actor::system(), Command::Batch { envelopes }),
        );
        let started = cpu_us(true);
        encoded.push(serde_json::to_vec(&e)?);
        encode_us += cpu_us(true) - started;
        w = end;
    }

    let started = cpu_us(true);
    let entries = decode_all(&encoded)?;
    let decode_us = cpu_us(true) - started;
    drop(encoded);

    let (cpu, process, wall) = (cpu_us(true), cpu_us(false), Instant::now());
    let (refused, first_refusal) = apply_all(&mut sm, entries).await?;
    let apply_us = cpu_us(true) - cpu;
    let (apply_wall_us, process_us) = (wall.elapsed().as_secs_f64() * 1e6, cpu_us(false) - process);
    if let Some(e) = first_refusal {
        bail!("{refused} writes of the workload were refused, the first: {e}");
    }
    let per = |us: f64| us / args.writes as f64;
    Ok(Costs {
        encode: per(encode_us),
        decode: per(decode_us),
        apply: per(apply_us),
        apply_wall: per(apply_wall_us),
        process: per(process_us),
    })
}

// Instruction counts of each phase alone (BENCHMARKS.md, "Apply on one thread"): callgrind's
// `--toggle-collect='*decode_all*'` for the decode, which is never inlined for it, and
// `--toggle-collect='*StateMachineStore*apply*'` for the apply (the store's own function: an
// async function of this file would be inlined into its caller's future).

/// Decodes the entries as a follower decodes AppendEntries.
#[inline(never)]
fn decode_all(encoded: &[Vec<u8>]) -> anyhow::Result<Vec<Entry<TypeConfig>>> {
    Ok(encoded
        .iter()
        .map(|bytes| serde_json::from_slice::<Entry<TypeConfig>>(bytes))
        .collect::<Result<Vec<_>, _>>()?)
}

/// Applies the entries one at a time; the writes refused, and the first refusal.
async fn apply_all(
    sm: &mut StateMachineStore,
    entries: Vec<Entry<TypeConfig>>,
) -> anyhow::Result<(u64, Option<roost_core::DomainError>)> {
    let mut refused = 0u64;
    let mut first_refusal = None;
    for e in entries {
        for result in sm.apply([e]).await.context("apply")? {
            for outcome in result.batch {
                if let Err(e) = outcome {
                    refused += 1;
                    first_refusal.get_or_insert(e);
                }
            }
        }
    }
    Ok((refused, first_refusal))
}
