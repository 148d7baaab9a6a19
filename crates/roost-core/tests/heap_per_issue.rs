//! What the replicated state holds in memory per issue and per remembered `Idempotency-Key`,
//! counted by the allocator: every node holds the first for every issue, in full while it is
//! open and its slot alone once it is closed and its row is in `state.db` (`issue_map.rs`;
//! BENCHMARKS.md, "Closed issues out of memory"), the second for every keyed write of the last
//! 24 hours. Its own test binary, so that the counting allocator below counts nothing else, and
//! its tests take turns.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::sync::Mutex;

use roost_core::idempotency::Remembered;
use std::collections::BTreeMap;
use std::sync::Arc;

use roost_core::{Company, Issue, IssueRows, Outcome, State, StateRows, Timestamp};

/// The system allocator, counting the bytes and blocks live.
struct Counting;

static BYTES: AtomicIsize = AtomicIsize::new(0);
static BLOCKS: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        BYTES.fetch_add(l.size() as isize, Relaxed);
        BLOCKS.fetch_add(1, Relaxed);
        // SAFETY: forwarded as received; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        BYTES.fetch_sub(l.size() as isize, Relaxed);
        BLOCKS.fetch_sub(1, Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        BYTES.fetch_add(new as isize - l.size() as isize, Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// One measurement at a time: the counts are process-wide.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const COMPANY: &str = "6a1b2c3d-0000-4000-8000-00000000c0c0";

/// A done issue as `roost-bench scale` makes them: a UUID id, a title, a 256-byte description.
fn closed_issue(n: u64) -> Issue {
    let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let id = format!(
        "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
        h >> 32,
        (h >> 16) & 0xffff,
        h & 0xfff,
        (h >> 20) & 0xfff,
        h.rotate_left(17) & 0xffff_ffff_ffff
    );
    serde_json::from_value(serde_json::json!({
        "id": id, "companyId": COMPANY, "identifier": format!("SCL-{n}"), "issueNumber": n,
        "title": "Scale issue from client 17", "description": "x".repeat(256), "status": "done",
        "priority": "medium", "blockedByIssueIds": [], "createdByUserId": "board",
        "completedAt": 1_700_000_000_000i64, "createdAt": 1_700_000_000_000i64,
        "updatedAt": 1_700_000_000_000i64,
    }))
    .unwrap_or_else(|e| panic!("a closed issue: {e}"))
}

/// The bound: the last measured size (1,246 bytes with its row digest, 2026-11-28) and a little
/// room. A new per-issue index or field shows here first; raise the bound only knowingly.
const MAX_BYTES_PER_ISSUE_IN_MEMORY: f64 = 1_350.0;

/// The bound for a closed issue whose row is in `state.db`: the last measured size (293 bytes
/// with its row digest, 2026-11-28) and a little room; issue 27 asks for at most 512.
const MAX_BYTES_PER_CLOSED_ISSUE: f64 = 350.0;

fn company(n: u64) -> Company {
    serde_json::from_value(serde_json::json!({
        "id": COMPANY, "name": "Scale", "issuePrefix": "SCL", "issueCounter": n,
        "createdAt": 0, "updatedAt": 0,
    }))
    .unwrap_or_else(|e| panic!("a company: {e}"))
}

/// Issue rows as a store holds them (here in memory, allocated before the count starts).
struct Rows(BTreeMap<String, String>);

impl IssueRows for Rows {
    fn issue(&self, id: &str) -> Result<Issue, String> {
        let row = self.0.get(id).ok_or("no such row")?;
        serde_json::from_str(row).map_err(|e| e.to_string())
    }
}

/// Loads `n` done issues into a state (letting them go to `rows`, if given), takes its hash, and
/// prints and returns the bytes held per issue with its row digest.
fn bytes_per_issue(n: u64, rows: Option<Arc<dyn IssueRows>>, what: &str) -> (f64, State) {
    let (bytes, blocks) = (BYTES.load(Relaxed), BLOCKS.load(Relaxed));
    let mut state = State::from_rows(StateRows {
        companies: vec![company(n)],
        issues: (1..=n).map(closed_issue).collect(),
        ..Default::default()
    });
    if let Some(rows) = rows {
        state.read_closed_issues_from(rows);
    }
    let loaded = BYTES.load(Relaxed) - bytes;
    let loaded_blocks = BLOCKS.load(Relaxed) - blocks;
    // A node that has answered a hash holds each row's digest too (a cold row is read once).
    let _ = state.hash();
    let hashed = BYTES.load(Relaxed) - bytes;
    let per = |b: isize| b as f64 / n as f64;
    println!(
        "per {what}: {:.0} bytes in {:.1} blocks; {:.0} bytes with its row digest",
        per(loaded),
        loaded_blocks as f64 / n as f64,
        per(hashed)
    );
    assert_eq!(state.issues.len() as u64, n);
    (per(hashed), state)
}

#[test]
fn a_closed_issue_in_state_db_costs_the_state_at_most_its_bound_in_memory() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let n: u64 = 50_000;
    let rows = (1..=n).map(closed_issue).map(|i| {
        let row = serde_json::to_string(&i).unwrap_or_else(|e| panic!("a row: {e}"));
        (i.id, row)
    });
    let rows: Arc<dyn IssueRows> = Arc::new(Rows(rows.collect()));
    let (per, state) = bytes_per_issue(n, Some(rows), "closed issue in state.db");
    assert_eq!(state.issues.cold_len() as u64, n);
    assert!(
        per <= MAX_BYTES_PER_CLOSED_ISSUE,
        "a closed issue now costs {per:.0} bytes of state, over the bound of \
         {MAX_BYTES_PER_CLOSED_ISSUE}"
    );
}

#[test]
fn an_issue_in_memory_costs_the_state_at_most_its_bound() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (per, _) = bytes_per_issue(50_000, None, "issue in memory");
    assert!(
        per <= MAX_BYTES_PER_ISSUE_IN_MEMORY,
        "an issue in memory now costs {per:.0} bytes of state, over the bound of \
         {MAX_BYTES_PER_ISSUE_IN_MEMORY}"
    );
}

/// The bound: the last measured size (404 bytes with its row digest, 2026-11-28; 2,257 when the
/// outcome was kept too) and a little room. Memory keeps the key, its
/// time and its request's fingerprint; the outcome stays in `state.db`.
const MAX_BYTES_PER_REMEMBERED_KEY: f64 = 450.0;

#[test]
fn a_remembered_idempotency_key_costs_the_state_at_most_its_bound_in_memory() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let n: u64 = 50_000;
    // Keys as `roost_core::idempotency::scoped_key` makes them for an agent's created issue, with
    // a UUID for the client's key, as the CLI sends; the outcome is the created issue.
    let remembered = |n: u64| {
        let issue = closed_issue(n);
        Remembered {
            key: format!(
                "agent:{}\u{1f}{COMPANY}\u{1f}issue.created\u{1f}{}",
                issue.id, issue.id
            ),
            at: Timestamp(1_700_000_000_000 + n as i64),
            index: n,
            outcome: Ok(Outcome::Issue {
                issue: issue.into(),
                comment: None,
            }),
            fingerprint: Some(format!("{:064x}", n)),
        }
    };
    let (bytes, blocks) = (BYTES.load(Relaxed), BLOCKS.load(Relaxed));
    let rows = StateRows {
        remembered: (1..=n).map(remembered).collect(),
        ..Default::default()
    };
    let state = State::from_rows(rows);
    let _ = state.hash();
    let held = BYTES.load(Relaxed) - bytes;
    let held_blocks = BLOCKS.load(Relaxed) - blocks;
    let per = held as f64 / n as f64;
    println!(
        "per remembered key: {per:.0} bytes in {:.1} blocks, with its row digest",
        held_blocks as f64 / n as f64
    );
    assert_eq!(state.idempotency.len() as u64, n);
    assert!(
        per <= MAX_BYTES_PER_REMEMBERED_KEY,
        "a remembered key now costs {per:.0} bytes of state, over the bound of \
         {MAX_BYTES_PER_REMEMBERED_KEY}"
    );
}
