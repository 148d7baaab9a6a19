//! The memory files' text, both ways: entries and live state rendered for the agent, and what
//! the agent wrote (`current-task.md`, `entry.md`) read back. Pure: no IO, no clock (times come
//! in as arguments), so each format is tested on its own.

use roost_core::memory::{CompanyLive, CurrentTask, MemoryEntry, NewMemoryEntry};
use roost_core::Timestamp;

/// Bytes of log entries written to `memory/recent.md` and put in a prompt (about 2,000 tokens).
pub(crate) const RECENT_BUDGET_BYTES: usize = 8 * 1024;

/// Entries newest first, as markdown, while they fit in `budget` bytes (the newest always
/// does, cut if it must be). Says how many were left out.
pub(crate) fn recent(entries: &[MemoryEntry], budget: usize) -> String {
    log(entries, budget, "GET /api/agents/me/memory/entries")
}

/// The company's shared log, as [`recent`] renders the agent's.
pub(crate) fn shared_log(entries: &[MemoryEntry], budget: usize, company_id: &str) -> String {
    log(
        entries,
        budget,
        &format!("GET /api/companies/{company_id}/memory/entries"),
    )
}

/// `lister`: the request that lists what was left out.
fn log(entries: &[MemoryEntry], budget: usize, lister: &str) -> String {
    let mut out = String::new();
    let mut shown = 0;
    for e in entries {
        let block = entry_block(e);
        if !out.is_empty() && out.len() + block.len() > budget {
            break;
        }
        out.push_str(&cut(&block, budget));
        shown += 1;
    }
    if shown < entries.len() {
        out.push_str(&format!(
            "({} older entries not shown; {lister} lists them.)\n",
            entries.len() - shown
        ));
    }
    out
}

fn entry_block(e: &MemoryEntry) -> String {
    let mut block = format!("## {} run {}", e.created_at, e.run_id);
    // A day's summary of the company's log holds several agents' work; its lines say whose.
    if e.shared && e.summary_of == 0 {
        block.push_str(&format!(" by agent {}", e.agent_id));
    }
    if let Some(reason) = e.wake_reason {
        block.push_str(&format!(" ({reason})"));
    }
    if let Some(issue) = &e.issue_id {
        block.push_str(&format!(" issue {issue}"));
    }
    block.push('\n');
    block.push_str(&format!("What: {}\n", e.what));
    if !e.did.is_empty() {
        block.push_str(&format!("Did: {}\n", e.did));
    }
    if !e.next.is_empty() {
        block.push_str(&format!("Next: {}\n", e.next));
    }
    for error in &e.errors {
        block.push_str(&format!("Error (verbatim): {error}\n"));
    }
    block.push('\n');
    block
}

/// `text` cut to at most `max` bytes at a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…\n", &text[..end])
}

/// Recall hits as prompt lines, best first, within `budget` bytes.
pub(crate) fn recalled(hits: &[roost_core::views::MemorySearchHit], budget: usize) -> String {
    let mut out = String::new();
    for h in hits {
        let about = h
            .issue_id
            .as_deref()
            .map(|i| format!(", issue {i}"))
            .unwrap_or_default();
        let line = format!(
            "- {} {} ({}{about}): {}\n",
            h.kind.as_str(),
            h.id,
            h.created_at,
            h.snippet.replace('\n', " ")
        );
        if !out.is_empty() && out.len() + line.len() > budget {
            break;
        }
        out.push_str(&cut(&line, budget));
    }
    out
}

/// `memory/current-task.md`: the sections the agent edits and [`parse_current_task`] reads.
pub(crate) fn current_task(task: Option<&CurrentTask>) -> String {
    let empty = CurrentTask {
        doing: String::new(),
        last: Vec::new(),
        next: Vec::new(),
    };
    let task = task.unwrap_or(&empty);
    let mut text = format!("# Doing\n{}\n\n# Last\n", task.doing);
    for item in &task.last {
        text.push_str(&format!("- {item}\n"));
    }
    text.push_str("\n# Next\n");
    for item in &task.next {
        text.push_str(&format!("- {item}\n"));
    }
    text
}

/// The company's live state as markdown: its current task as `current-task.md` has it, its
/// coordinates, and who saved them when.
pub(crate) fn company_live(live: &CompanyLive) -> String {
    let mut text = current_task(live.parts.current_task.as_ref());
    if let Some(c) = &live.parts.coordinates {
        text.push_str(&format!("\n# Coordinates\n{c:#}\n"));
    }
    let at = live
        .parts
        .saved_at()
        .map_or_else(|| "-".to_string(), |t| t.to_string());
    text.push_str(&format!(
        "\n(saved {at} by {} {})\n",
        live.updated_by_type, live.updated_by_id
    ));
    text
}

/// `# Heading` sections of `text`, lower-cased headings with their trimmed bodies.
fn sections(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("# ") {
            out.push((heading.trim().to_ascii_lowercase(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    for (_, body) in &mut out {
        *body = body.trim().to_string();
    }
    out
}

fn section<'a>(parts: &'a [(String, String)], name: &str) -> &'a str {
    parts
        .iter()
        .find(|(h, _)| h == name)
        .map_or("", |(_, b)| b.as_str())
}

fn bullets(body: &str) -> Vec<String> {
    body.lines()
        .map(|l| l.trim().trim_start_matches(['-', '*']).trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The current task the agent left in `memory/current-task.md`; `None` when it has no
/// `# Doing` text. Only the first three of each list are kept, as the server allows.
pub(crate) fn parse_current_task(text: &str) -> Option<CurrentTask> {
    let parts = sections(text);
    let doing = section(&parts, "doing").to_string();
    if doing.is_empty() {
        return None;
    }
    let three = |name| bullets(section(&parts, name)).into_iter().take(3).collect();
    Some(CurrentTask {
        doing,
        last: three("last"),
        next: three("next"),
    })
}

/// The log entry an agent wrote to `memory/entry.md` (`# What`, `# Did`, `# Next`,
/// `# Errors` one per bullet); `None` without a `# What`.
pub(crate) fn parse_entry(text: &str, issue_id: Option<&str>) -> Option<NewMemoryEntry> {
    let parts = sections(text);
    let what = section(&parts, "what").to_string();
    if what.is_empty() {
        return None;
    }
    Some(NewMemoryEntry {
        issue_id: issue_id.map(str::to_string),
        what,
        did: section(&parts, "did").to_string(),
        next: section(&parts, "next").to_string(),
        errors: bullets(section(&parts, "errors")),
    })
}

/// `STATE.md` as the prompt shows it: a fact whose line says `verified YYYY-MM-DD` more than
/// `stale_after_days` before `now` is marked stale, so the agent checks it before relying on it.
pub(crate) fn mark_stale_facts(state_md: &str, now: Timestamp, stale_after_days: i64) -> String {
    let today = now.0.div_euclid(86_400_000);
    let mut out = String::new();
    for line in state_md.lines() {
        out.push_str(line);
        if let Some(day) = verified_day(line) {
            let age = today - day;
            if age > stale_after_days {
                out.push_str(&format!(
                    "  [STALE: verified {age} days ago; run its check before relying on it]"
                ));
            }
        }
        out.push('\n');
    }
    out
}

/// The day number (days since 1970-01-01) of a `verified YYYY-MM-DD` in `line`.
fn verified_day(line: &str) -> Option<i64> {
    let lower = line.to_ascii_lowercase();
    let at = lower.find("verified")?;
    let rest = lower[at + "verified".len()..].trim_start_matches([' ', ':', '=']);
    let date = rest.get(..10)?;
    let mut parts = date.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    days_from_civil(y.parse().ok()?, m.parse().ok()?, d.parse().ok()?)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> Option<i64> {
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roost_core::memory::LiveParts;

    fn entry(n: u64, what: &str) -> MemoryEntry {
        MemoryEntry {
            id: format!("e{n}"),
            company_id: "c".into(),
            agent_id: "a".into(),
            seq: n,
            run_id: format!("r{n}"),
            wake_reason: None,
            issue_id: Some("ACM-1".into()),
            what: what.into(),
            did: "did it".into(),
            next: String::new(),
            errors: vec!["exit 2: no such file".into()],
            created_at: Timestamp(n as i64 * 1000),
            summary_of: 0,
            shared: false,
        }
    }

    #[test]
    fn recent_entries_keep_the_newest_within_the_budget_and_say_what_was_left_out() {
        let entries: Vec<MemoryEntry> = (0..50)
            .rev()
            .map(|n| entry(n, "x".repeat(300).as_str()))
            .collect();
        let text = recent(&entries, 2_000);
        assert!(text.len() <= 2_000 + 200, "{}", text.len());
        assert!(text.starts_with("## "), "{text}");
        assert!(text.contains("run r49"), "the newest is first: {text}");
        assert!(!text.contains("run r0 "), "{text}");
        assert!(text.contains("older entries not shown"), "{text}");
        assert!(text.contains("Error (verbatim): exit 2: no such file"));
        let all = recent(&entries[..2], 100_000);
        assert!(!all.contains("not shown"), "{all}");
        // A single huge entry is cut, not dropped.
        let huge = recent(&[entry(1, &"y".repeat(50_000))], 1_000);
        assert!(huge.len() < 1_200 && huge.contains("yyy"), "{}", huge.len());
    }

    #[test]
    fn the_company_log_names_each_entrys_agent_and_where_the_rest_is_listed() {
        let mut shared = entry(2, "the staging database moved");
        shared.shared = true;
        let entries = vec![shared, entry(1, &"y".repeat(400))];
        let text = shared_log(&entries, 200, "c9");
        assert!(
            text.contains("run r2 by agent a issue ACM-1\nWhat: the staging database moved"),
            "{text}"
        );
        assert!(
            text.contains("(1 older entries not shown; GET /api/companies/c9/memory/entries"),
            "{text}"
        );
        assert!(!recent(&entries[1..], 10_000).contains("by agent"));
    }

    #[test]
    fn the_company_live_file_shows_its_task_coordinates_and_who_saved_them() {
        let live = CompanyLive {
            company_id: "c9".into(),
            parts: LiveParts {
                current_task: Some(CurrentTask {
                    doing: "release 1.3".into(),
                    last: Vec::new(),
                    next: vec!["tag it".into()],
                }),
                current_task_updated_at: Some(Timestamp(1_000)),
                coordinates: Some(serde_json::json!({ "branch": "release-1.3" })),
                coordinates_updated_at: Some(Timestamp(5_000)),
            },
            updated_by_type: "agent".into(),
            updated_by_id: "a7".into(),
            run_id: Some("r3".into()),
        };
        let text = company_live(&live);
        assert!(text.starts_with("# Doing\nrelease 1.3\n"), "{text}");
        assert!(text.contains("- tag it\n"), "{text}");
        assert!(
            text.contains("# Coordinates\n{\n  \"branch\": \"release-1.3\"\n}"),
            "{text}"
        );
        let latest = Timestamp(5_000).to_string();
        assert!(
            text.contains(&format!("(saved {latest} by agent a7)")),
            "{text}"
        );
    }

    #[test]
    fn the_current_task_file_reads_back_what_it_wrote_and_what_an_agent_edits() {
        let task = CurrentTask {
            doing: "fixing the parser".into(),
            last: vec!["read the bug".into(), "wrote a test".into()],
            next: vec!["fix it".into()],
        };
        let text = current_task(Some(&task));
        assert_eq!(parse_current_task(&text), Some(task));
        let edited = "# Doing\nreviewing\n\n# Last\n* a\n- b\n- c\n- d\n# Next\n";
        let parsed = parse_current_task(edited).expect("parsed");
        assert_eq!(parsed.doing, "reviewing");
        assert_eq!(parsed.last, ["a", "b", "c"], "at most three kept");
        assert!(parsed.next.is_empty());
        assert_eq!(parse_current_task(&current_task(None)), None);
    }

    #[test]
    fn an_entry_file_needs_a_what_and_keeps_errors_verbatim() {
        let text = "# What\nfixed ACM-1\n\n# Did\nchanged parse()\n# Errors\n- cargo: error[E0308]: mismatched types\n";
        let e = parse_entry(text, Some("i1")).expect("entry");
        assert_eq!(e.what, "fixed ACM-1");
        assert_eq!(e.did, "changed parse()");
        assert_eq!(e.errors, ["cargo: error[E0308]: mismatched types"]);
        assert_eq!(e.issue_id.as_deref(), Some("i1"));
        assert_eq!(parse_entry("# Did\nsomething", None), None);
    }

    #[test]
    fn facts_verified_too_long_ago_are_marked_stale_at_the_boundary() {
        // 2026-11-25T00:00:00Z.
        let now = Timestamp(days_from_civil(2026, 11, 25).expect("date") * 86_400_000);
        let state = "- db on port 5432 (verified 2026-11-18)\n- api up, verified: 2026-11-17\n- no date here\n";
        let marked = mark_stale_facts(state, now, 7);
        let lines: Vec<&str> = marked.lines().collect();
        assert!(
            !lines[0].contains("STALE"),
            "7 days is not stale yet: {marked}"
        );
        assert!(lines[1].contains("[STALE: verified 8 days ago"), "{marked}");
        assert_eq!(lines[2], "- no date here");
        assert_eq!(days_from_civil(1970, 1, 1), Some(0));
        assert_eq!(days_from_civil(2000, 3, 1), Some(11_017));
        assert_eq!(verified_day("verified 2026-13-01"), None);
    }
}
