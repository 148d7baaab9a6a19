//! `roost-bench memory`: agent memory at 10^4 to 10^6 log entries, on a `state.db` written and
//! read in this process through the store's own code (`roost_store::BulkDb`, which writes with
//! `RowBatch` and searches with the node's FTS5 query). No Raft, no server: what is measured is
//! the store and the worker's rendering, not the network.
//!
//! For each N: N entries of text drawn from a fixed vocabulary (seeded, skewed towards common
//! words) spread over 100 agents of one company, and one comment per 100 entries; then
//! searches for one agent (2-3 word queries, half requiring all words, half any); then the
//! file's bytes per entry (and the search index's share, from SQLite's `dbstat`), the
//! in-memory state's bytes per entry (process RSS before and after `load_state`, the node's
//! load), and the time to render the prompt's `memory/recent.md` from an agent's newest 100
//! entries (`roost_worker::recent_entries_text`).

use std::time::Instant;

use anyhow::Context;
use roost_core::memory::{MemoryChange, MemoryEntry};
use roost_core::{Change, Comment, Timestamp};
use roost_store::{BulkDb, SearchQuery};
use serde_json::{json, Value};

use crate::stats::{ms, percentile, us};

const COMPANY: &str = "c-bench";
const AGENTS: u64 = 100;
const COMMENT_EVERY: u64 = 100;

#[derive(clap::Args)]
pub struct MemoryArgs {
    /// Entry counts, one fresh state.db each
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
    entries: Vec<u64>,
    /// Searches per entry count (half `all`, half `any`)
    #[arg(long, default_value_t = 1000)]
    searches: usize,
    /// Entries written per transaction
    #[arg(long, default_value_t = 10_000)]
    batch: u64,
    /// Hits asked for per search (the worker's auto-recall asks for 3, the API defaults to 20)
    #[arg(long, default_value_t = 20)]
    limit: u32,
    /// RNG seed
    #[arg(long, default_value_t = 23)]
    seed: u64,
    /// One JSON object per entry count on stdout instead of the table
    #[arg(long)]
    json: bool,
}

/// splitmix64: a seeded, dependency-free generator; the text only needs to be repeatable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const WORDS: &str = "the a to of and in for on with is was it that this from by at as be not \
    build test deploy fix error failed passed run runs ran retry timeout server client worker \
    leader follower raft log entry snapshot checkout release issue comment agent memory state \
    budget cost token prompt model tool call request response latency throughput queue lease \
    session heartbeat wake assignment credential tls certificate key rotate config migration \
    schema table index query search sqlite database file disk cache page write read commit \
    rollback transaction lock conflict merge branch rebase review approve reject flaky ci \
    pipeline docker image container kubernetes pod node cluster network port dns proxy \
    gateway auth login user permission role policy limit quota rate alert metric dashboard \
    trace span logger panic backtrace stack overflow memory leak allocation thread async \
    await future tokio runtime channel mutex deadlock race condition benchmark profile flame \
    graph hot path regression speedup slowdown refactor rename module crate function method \
    struct enum trait generic lifetime borrow checker compile warning clippy fmt lint doc \
    readme changelog version bump dependency upgrade downgrade pin vendor patch security \
    vulnerability advisory audit backup restore recover corrupt checksum hash verify sign \
    encrypt decrypt upload download bucket object storage s3 blob stream chunk batch bulk \
    import export csv json yaml toml parse serialize deserialize encode decode utf8 unicode \
    ascii byte buffer offset length size capacity overflow underflow retry backoff jitter \
    exponential linear constant threshold window sliding fixed rolling average median p99 \
    percentile histogram counter gauge sample interval deadline cancel abort shutdown \
    graceful restart crash loop oom killed signal sigterm sigkill exit code status healthy \
    unhealthy ready liveness probe endpoint route handler middleware cors header cookie \
    json body payload field column row key value pair map list set vector array slice string";

fn vocabulary() -> Vec<String> {
    let mut words: Vec<String> = WORDS.split_whitespace().map(str::to_string).collect();
    // Rarer identifiers: the file names, crates and tickets an agent's log is full of.
    for i in 0..600 {
        let stem = ["alpha", "beta", "gamma", "delta", "omega", "sigma"][i % 6];
        words.push(format!("{stem}{i}"));
    }
    words
}

/// A word, skewed towards the start of the list (common words first): rank = V * u^3.
fn word<'a>(rng: &mut Rng, vocab: &'a [String]) -> &'a str {
    let i = (vocab.len() as f64 * rng.unit().powi(3)) as usize;
    &vocab[i.min(vocab.len() - 1)]
}

fn sentence(rng: &mut Rng, vocab: &[String], min: u64, max: u64) -> String {
    let n = min + rng.below(max - min + 1);
    (0..n)
        .map(|_| word(rng, vocab))
        .collect::<Vec<_>>()
        .join(" ")
}

fn entry(n: u64, rng: &mut Rng, vocab: &[String]) -> MemoryEntry {
    let agent = n % AGENTS;
    MemoryEntry {
        id: format!("e{n:09}"),
        company_id: COMPANY.into(),
        agent_id: format!("a{agent:03}"),
        seq: n / AGENTS + 1,
        run_id: format!("r{:09}", n / 3),
        wake_reason: None,
        issue_id: (rng.below(2) == 0).then(|| format!("i{:06}", rng.below(1000))),
        what: sentence(rng, vocab, 5, 12),
        did: sentence(rng, vocab, 10, 30),
        next: sentence(rng, vocab, 3, 10),
        errors: if rng.below(10) == 0 {
            vec![format!("error: {}", sentence(rng, vocab, 4, 12))]
        } else {
            Vec::new()
        },
        created_at: Timestamp(1_700_000_000_000 + n as i64 * 1000),
        summary_of: 0,
        shared: false,
    }
}

fn comment(n: u64, rng: &mut Rng, vocab: &[String]) -> Comment {
    Comment {
        id: format!("m{n:09}"),
        company_id: COMPANY.into(),
        issue_id: format!("i{:06}", rng.below(1000)),
        body: sentence(rng, vocab, 10, 40),
        author_agent_id: Some(format!("a{:03}", rng.below(AGENTS))),
        author_user_id: None,
        created_by_run_id: None,
        created_at: Timestamp(1_700_000_000_000 + n as i64 * 1000),
        ..Default::default()
    }
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

fn latencies(mut samples: Vec<u64>) -> Value {
    samples.sort_unstable();
    json!({
        "p50Ms": ms(percentile(&samples, 50.0)),
        "p99Ms": ms(percentile(&samples, 99.0)),
        "maxMs": ms(samples.last().copied().unwrap_or(0)),
    })
}

async fn one(args: &MemoryArgs, n: u64, vocab: &[String]) -> anyhow::Result<Value> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("state.db");
    let db = BulkDb::open(&path, 1).await.context("open state.db")?;
    let mut rng = Rng(args.seed);
    let (mut json_bytes, mut text_bytes, mut comments) = (0u64, 0u64, 0u64);
    let started = Instant::now();
    let mut written = 0u64;
    while written < n {
        let end = (written + args.batch.max(1)).min(n);
        let mut changes = Vec::with_capacity((end - written) as usize + 128);
        for i in written..end {
            let e = entry(i, &mut rng, vocab);
            json_bytes += serde_json::to_string(&e)?.len() as u64;
            text_bytes += e.bytes();
            changes.push(Change::Memory(MemoryChange::Entry(e)));
            if i % COMMENT_EVERY == COMMENT_EVERY - 1 {
                changes.push(Change::Comment(comment(i, &mut rng, vocab)));
                comments += 1;
            }
        }
        db.write(&changes).context("write rows")?;
        written = end;
        if written.is_multiple_of(args.batch.max(1) * 10) || written == n {
            let secs = started.elapsed().as_secs_f64();
            eprintln!(
                "  {n}: {written} entries written, {:.0} s, {:.0} entries/s",
                secs,
                written as f64 / secs.max(1e-9)
            );
        }
    }
    let load_secs = started.elapsed().as_secs_f64();
    db.checkpoint().context("checkpoint")?;
    let file = db.file_bytes()?;
    let index = db.bytes_of_tables("memory_search");
    let entries_table = db.bytes_of_tables("memory_entries");

    // Searches for one agent, assigned to a few issues (their comments are searched too).
    let agent = "a007";
    let assigned: Vec<String> = (0..5).map(|i| format!("i{:06}", i * 37)).collect();
    let (mut all, mut any, mut hits) = (Vec::new(), Vec::new(), 0usize);
    for s in 0..args.searches {
        let words = 2 + rng.below(2);
        let text: Vec<&str> = (0..words).map(|_| word(&mut rng, vocab)).collect();
        let text = text.join(" ");
        let (query, into) = if s % 2 == 0 {
            (SearchQuery::parse(&text), &mut all)
        } else {
            (SearchQuery::parse_any(&text), &mut any)
        };
        let query = query.map_err(anyhow::Error::msg)?;
        let t = Instant::now();
        hits += db
            .search(COMPANY, agent, &assigned, &query, args.limit)
            .await
            .context("search")?
            .len();
        into.push(us(t.elapsed()));
        if (s + 1) % 200 == 0 {
            eprintln!("  {n}: {} searches", s + 1);
        }
    }

    // The node's load of state.db into memory, and what it holds on to.
    let before = rss_bytes();
    let state = db.load_state().await.context("load state")?;
    let after = rss_bytes();
    let loaded = state.memory.entries.len() as u64;

    // The prompt's recent.md from the agent's newest 100 entries, as the worker renders it.
    let newest: Vec<MemoryEntry> = state
        .memory
        .entries_of(agent)
        .rev()
        .take(100)
        .cloned()
        .collect();
    let mut render = Vec::new();
    let mut rendered = 0;
    for _ in 0..1000 {
        let t = Instant::now();
        rendered = roost_worker::recent_entries_text(&newest).len();
        render.push(t.elapsed().as_nanos() as u64);
    }
    render.sort_unstable();
    drop(state);

    let per = |b: u64| b as f64 / n.max(1) as f64;
    Ok(json!({
        "entries": n,
        "comments": comments,
        "agents": AGENTS,
        "loadSeconds": load_secs,
        "entriesPerSecond": n as f64 / load_secs.max(1e-9),
        "textBytesPerEntry": per(text_bytes),
        "jsonBytesPerEntry": per(json_bytes),
        "fileBytes": file,
        "fileBytesPerEntry": per(file),
        "indexBytesPerEntry": index.map(per),
        "entriesTableBytesPerEntry": entries_table.map(per),
        "searchesAll": all.len(),
        "searchesAny": any.len(),
        "meanHits": hits as f64 / args.searches.max(1) as f64,
        "searchAll": latencies(all),
        "searchAny": latencies(any),
        "loadedEntries": loaded,
        "rssBytesPerEntry": per(after.saturating_sub(before)),
        "renderEntries": newest.len(),
        "renderBytes": rendered,
        "renderP50Us": percentile(&render, 50.0) as f64 / 1000.0,
        "renderP99Us": percentile(&render, 99.0) as f64 / 1000.0,
    }))
}

pub async fn run(args: MemoryArgs) -> anyhow::Result<()> {
    let vocab = vocabulary();
    let mut rows = Vec::new();
    for &n in &args.entries {
        eprintln!("memory: {n} entries over {AGENTS} agents");
        let t = Instant::now();
        let row = one(&args, n, &vocab).await?;
        eprintln!("  {n}: done in {:.0} s", t.elapsed().as_secs_f64());
        if args.json {
            println!("{row}");
        } else {
            eprintln!("  {row}");
        }
        rows.push(row);
    }
    if !args.json {
        print_table(&rows);
    }
    Ok(())
}

fn print_table(rows: &[Value]) {
    let f = |v: &Value, path: &[&str]| -> String {
        let mut v = v;
        for p in path {
            v = &v[*p];
        }
        match v.as_f64() {
            Some(x) if x >= 100.0 => format!("{x:.0}"),
            Some(x) => format!("{x:.2}"),
            None => "-".into(),
        }
    };
    println!(
        "| entries | load entries/s | all p50/p99/max ms | any p50/p99/max ms | mean hits | \
         disk B/entry | index B/entry | JSON B/entry | RSS B/entry | recent.md render p50/p99 µs |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} / {} / {} | {} / {} / {} | {} | {} | {} | {} | {} | {} / {} |",
            f(r, &["entries"]),
            f(r, &["entriesPerSecond"]),
            f(r, &["searchAll", "p50Ms"]),
            f(r, &["searchAll", "p99Ms"]),
            f(r, &["searchAll", "maxMs"]),
            f(r, &["searchAny", "p50Ms"]),
            f(r, &["searchAny", "p99Ms"]),
            f(r, &["searchAny", "maxMs"]),
            f(r, &["meanHits"]),
            f(r, &["fileBytesPerEntry"]),
            f(r, &["indexBytesPerEntry"]),
            f(r, &["jsonBytesPerEntry"]),
            f(r, &["rssBytesPerEntry"]),
            f(r, &["renderP50Us"]),
            f(r, &["renderP99Us"]),
        );
    }
}
