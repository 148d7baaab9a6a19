//! What a command leaves in the activity log: the entry for the rule's note and, for a command
//! made for the whole instance (a worker lost), one more entry in each company whose issues,
//! runs or wakes it changed. A company's activity and its event stream are read by company
//! (`roost-store/src/reader.rs`), so without those a company never saw its runs lost, their
//! checkouts released or their retries queued.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use crate::activity::ActivityEntry;
use crate::command::Envelope;
use crate::state::{ActivityNote, Change, State};

/// The entries `note` and the command's `changes` put in the log, chained onto `state`'s head.
pub(crate) fn record(
    state: &mut State,
    index: u64,
    env: &Envelope,
    note: ActivityNote,
    changes: &[Change],
) -> Vec<ActivityEntry> {
    let echoes = company_echoes(&note, changes);
    std::iter::once(note)
        .chain(echoes)
        .map(|note| chain(state, index, env, note))
        .collect()
}

fn chain(state: &mut State, index: u64, env: &Envelope, note: ActivityNote) -> ActivityEntry {
    let mut entry = ActivityEntry {
        seq: state.activity_seq + 1,
        log_index: index,
        company_id: note.company_id,
        at: env.at,
        actor_type: env.actor.kind.as_str().to_string(),
        actor_id: env.actor.id.clone(),
        credential_id: env.actor.credential_id.clone(),
        run_id: env.actor.run_id.clone(),
        action: env.command.name().to_string(),
        entity_type: note.entity_type.to_string(),
        entity_id: note.entity_id,
        details: note.details,
        prev_hash: state.activity_head.clone(),
        hash: String::new(),
    };
    entry.hash = entry.compute_hash();
    state.activity_seq = entry.seq;
    state.activity_head = entry.hash.clone();
    entry
}

/// For an instance-wide note, one note per company the changes touch, naming only that
/// company's records: one tenant's entry never lists another's ids.
fn company_echoes(note: &ActivityNote, changes: &[Change]) -> Vec<ActivityNote> {
    if note.company_id.is_some() {
        return Vec::new();
    }
    #[derive(Default)]
    struct Touched<'a> {
        issues: BTreeSet<&'a str>,
        runs: BTreeSet<&'a str>,
        wakes: BTreeSet<&'a str>,
    }
    let mut by_company: BTreeMap<&str, Touched> = BTreeMap::new();
    for change in changes {
        match change {
            Change::Issue(i) => by_company
                .entry(&i.company_id)
                .or_default()
                .issues
                .insert(&i.id),
            Change::Run(r) => by_company
                .entry(&r.company_id)
                .or_default()
                .runs
                .insert(&r.id),
            Change::Wake(w) => by_company
                .entry(&w.company_id)
                .or_default()
                .wakes
                .insert(&w.id),
            _ => continue,
        };
    }
    by_company
        .into_iter()
        .map(|(company, touched)| ActivityNote {
            company_id: Some(company.to_string()),
            entity_type: note.entity_type,
            entity_id: note.entity_id.clone(),
            details: json!({
                "issues": touched.issues,
                "runs": touched.runs,
                "wakes": touched.wakes,
            }),
        })
        .collect()
}
