//! A company's shared memory: its log (entries its agents' runs write for all of them) and its
//! live state; fenced like every write of a run, kept per company, capped and rolling.

use super::memory_tests::reloaded;
use super::test_world::*;
use crate::command::*;
use crate::error::DomainError;
use crate::limits::*;
use crate::memory::*;

fn shared(w: &mut World, actor: Actor, id: &str, agent: &str) -> Result<Outcome, DomainError> {
    w.run(
        actor,
        Command::AppendMemoryEntry {
            id: id.into(),
            agent_id: agent.into(),
            entry: NewMemoryEntry {
                what: format!("shared {id}"),
                did: "found the staging database moved".into(),
                ..Default::default()
            },
            shared: true,
        },
    )
}

fn set_live(
    w: &mut World,
    actor: Actor,
    company: &str,
    doing: &str,
) -> Result<Outcome, DomainError> {
    w.run(
        actor,
        Command::SetCompanyMemoryLive {
            company_id: company.into(),
            current_task: Some(CurrentTask {
                doing: doing.into(),
                last: vec!["shipped 1.2".into()],
                next: vec!["cut 1.3".into()],
            }),
            coordinates: Some(serde_json::json!({ "release": "1.3" })),
        },
    )
}

fn shared_log(w: &World, company: &str) -> Vec<String> {
    w.state
        .memory
        .log_entries(&LogOwner::Company(company.into()))
        .map(|e| e.id.clone())
        .collect()
}

#[test]
fn a_shared_entry_goes_to_the_company_log_and_not_the_agents_own() {
    let mut w = world();
    w.start_run("r1", "a1");
    let out = shared(&mut w, agent_actor("a1", "c1", Some("r1")), "s1", "a1").expect("appended");
    let Outcome::MemoryEntry(e) = out else {
        panic!("unexpected {out:?}")
    };
    assert!(e.shared);
    assert_eq!((e.agent_id.as_str(), e.run_id.as_str()), ("a1", "r1"));
    assert_eq!(shared_log(&w, "c1"), ["s1"]);
    assert_eq!(w.state.memory.entry_count("a1"), 0, "not in a1's own log");
    assert!(shared_log(&w, "c2").is_empty(), "not in another company's");
    // A restarted node rebuilds the same log from its rows, and the same state hash.
    let again = reloaded(&w.state);
    assert_eq!(
        again
            .memory
            .log_entries(&LogOwner::Company("c1".into()))
            .count(),
        1
    );
    assert_eq!(again.hash(), w.state.hash());
}

#[test]
fn a_shared_entry_is_fenced_on_its_run_like_the_agents_own() {
    let mut w = world();
    w.start_run("r1", "a1");
    finish(&mut w, "r1");
    let err = shared(&mut w, agent_actor("a1", "c1", Some("r1")), "late", "a1").unwrap_err();
    assert_eq!(err.code(), "stale_run", "{err}");
    let err = shared(&mut w, agent_actor("a1", "c1", None), "no-run", "a1").unwrap_err();
    assert_eq!(err.code(), "bad_request", "{err}");
    // Another company's agent cannot write into c1's log through a1.
    w.start_run("r2", "a1");
    let err = shared(&mut w, agent_actor("b1", "c2", Some("r2")), "x", "a1").unwrap_err();
    assert_eq!(err.code(), "not_found", "{err}");
    assert!(shared_log(&w, "c1").is_empty());
}

#[test]
fn the_company_log_rolls_at_its_own_cap_without_touching_the_agents_logs() {
    let mut w = world();
    w.start_run("r1", "a1");
    let me = agent_actor("a1", "c1", Some("r1"));
    for n in 0..MAX_MEMORY_ENTRIES_PER_COMPANY + 2 {
        shared(&mut w, me.clone(), &format!("s{n}"), "a1").expect("appended");
    }
    let log = shared_log(&w, "c1");
    assert_eq!(log.len(), MAX_MEMORY_ENTRIES_PER_COMPANY);
    assert_eq!(
        log.first().map(String::as_str),
        Some("s2"),
        "oldest two dropped"
    );
    assert_eq!(
        log.last().map(String::as_str),
        Some(format!("s{}", MAX_MEMORY_ENTRIES_PER_COMPANY + 1).as_str())
    );
    assert_eq!(w.state.memory.entry_count("a1"), 0);
}

#[test]
fn company_live_state_is_saved_by_an_administrator_or_an_agent_of_it_in_a_run() {
    let mut w = world();
    let out = w
        .run_at(5_000, admin(), {
            Command::SetCompanyMemoryLive {
                company_id: "c1".into(),
                current_task: Some(CurrentTask {
                    doing: "release 1.3".into(),
                    ..Default::default()
                }),
                coordinates: None,
            }
        })
        .expect("an administrator saves it without a run");
    let Outcome::CompanyMemoryLive(live) = out else {
        panic!("unexpected {out:?}")
    };
    assert_eq!(live.parts.current_task_updated_at.map(|t| t.0), Some(5_000));
    assert_eq!((live.parts.coordinates, live.run_id), (None, None));
    assert_eq!(live.updated_by_type, "user");

    // An agent of the company, in its run: the parts it sends, each with the command's time;
    // the part it does not send stays.
    w.start_run("r1", "a2");
    let out = w
        .run_at(
            9_000,
            agent_actor("a2", "c1", Some("r1")),
            Command::SetCompanyMemoryLive {
                company_id: "c1".into(),
                current_task: None,
                coordinates: Some(serde_json::json!({ "branch": "release-1.3" })),
            },
        )
        .expect("saved");
    let Outcome::CompanyMemoryLive(live) = out else {
        panic!("unexpected {out:?}")
    };
    assert_eq!(
        live.parts.current_task.map(|t| t.doing).as_deref(),
        Some("release 1.3")
    );
    assert_eq!(live.parts.current_task_updated_at.map(|t| t.0), Some(5_000));
    assert_eq!(live.parts.coordinates_updated_at.map(|t| t.0), Some(9_000));
    assert_eq!(
        (live.updated_by_id.as_str(), live.run_id.as_deref()),
        ("a2", Some("r1"))
    );
    let again = reloaded(&w.state);
    assert_eq!(again.memory.company_live, w.state.memory.company_live);
    assert_eq!(again.hash(), w.state.hash());
}

#[test]
fn company_live_state_refuses_an_agent_without_a_live_run_another_company_and_an_empty_write() {
    let mut w = world();
    w.start_run("r1", "a1");
    finish(&mut w, "r1");
    w.start_run("r2", "b1");
    let settled = w.state.hash();
    let err = set_live(&mut w, agent_actor("a1", "c1", None), "c1", "x").unwrap_err();
    assert_eq!(err.code(), "bad_request", "{err}");
    assert!(err.to_string().contains("during a run"), "{err}");
    let err = set_live(&mut w, agent_actor("a1", "c1", Some("r1")), "c1", "x").unwrap_err();
    assert_eq!(err.code(), "stale_run", "{err}");
    let err = set_live(&mut w, agent_actor("b1", "c2", Some("r2")), "c1", "x").unwrap_err();
    assert_eq!(
        err.code(),
        "not_found",
        "another company's is not found: {err}"
    );
    // An administrator naming a run names one of this company's.
    let err = set_live(
        &mut w,
        {
            let mut a = admin();
            a.run_id = Some("r2".into());
            a
        },
        "c1",
        "x",
    )
    .unwrap_err();
    assert_eq!(err.code(), "forbidden", "{err}");
    let err = set_live(&mut w, worker_actor("wk1"), "c1", "x").unwrap_err();
    assert_eq!(err.code(), "forbidden", "{err}");
    let err = w
        .run(
            admin(),
            Command::SetCompanyMemoryLive {
                company_id: "c1".into(),
                current_task: None,
                coordinates: None,
            },
        )
        .unwrap_err();
    assert_eq!(err.code(), "bad_request", "{err}");
    assert!(w.state.memory.company_live.is_empty());
    assert_eq!(w.state.hash(), settled, "a refused write changes nothing");
    let too_long = "x".repeat(MAX_CURRENT_TASK_CHARS + 1);
    let err = crate::limits::check(&Command::SetCompanyMemoryLive {
        company_id: "c1".into(),
        current_task: Some(CurrentTask {
            doing: too_long,
            ..Default::default()
        }),
        coordinates: None,
    })
    .unwrap_err();
    assert_eq!(
        err.code(),
        "too_large",
        "the same bounds as an agent's: {err}"
    );
}

#[test]
fn a_compacted_day_of_the_company_log_says_which_agent_each_line_is_from() {
    const DAY: i64 = 86_400_000;
    let mut w = world();
    w.start_run("r1", "a1");
    w.start_run("r2", "a2");
    let day0 = 20_000 * DAY;
    for (at, actor, id, agent) in [
        (day0 + 1, agent_actor("a1", "c1", Some("r1")), "s1", "a1"),
        (day0 + 2, agent_actor("a2", "c1", Some("r2")), "s2", "a2"),
    ] {
        w.run_at(
            at,
            actor,
            Command::AppendMemoryEntry {
                id: id.into(),
                agent_id: agent.into(),
                entry: NewMemoryEntry {
                    what: format!("what {agent} found"),
                    ..Default::default()
                },
                shared: true,
            },
        )
        .expect("appended");
    }
    // An append more than a week later compacts that day into one summary.
    w.run_at(
        day0 + 9 * DAY,
        agent_actor("a1", "c1", Some("r1")),
        Command::AppendMemoryEntry {
            id: "s3".into(),
            agent_id: "a1".into(),
            entry: NewMemoryEntry {
                what: "later".into(),
                ..Default::default()
            },
            shared: true,
        },
    )
    .expect("appended");
    let log: Vec<&MemoryEntry> = w
        .state
        .memory
        .log_entries(&LogOwner::Company("c1".into()))
        .collect();
    assert_eq!(log.len(), 2, "{log:?}");
    let summary = log[0];
    assert_eq!(summary.summary_of, 2);
    assert!(summary.shared);
    assert!(
        summary.did.contains("- what a1 found (agent a1)")
            && summary.did.contains("- what a2 found (agent a2)"),
        "{}",
        summary.did
    );
    assert_eq!(w.state.memory.entry_count("a1"), 0, "own log untouched");
}
