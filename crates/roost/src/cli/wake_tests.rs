//! Wake, worker and run commands: parsing and the tables and blocks they print.

use clap::Parser;
use roost_client::{WakeView, WorkerView};
use roost_core::{Issue, Run, Timestamp, WakeReason};
use serde_json::json;

use super::*;

#[derive(Parser)]
#[command(name = "roost")]
struct Cli {
    #[command(subcommand)]
    command: ClientCommand,
}

fn parse(args: &[&str]) -> Result<ClientCommand, clap::Error> {
    Cli::try_parse_from(std::iter::once("roost").chain(args.iter().copied())).map(|c| c.command)
}

fn wake_view(id: &str, status: &str, why: Option<&str>, blocked_by: Option<&str>) -> WakeView {
    serde_json::from_value(json!({
        "id": id, "companyId": "c1", "agentId": "a1", "issueId": "i1",
        "reason": "issue_assigned", "status": status, "statusReason": why,
        "count": 2, "commentIds": ["k1", "k2"], "payload": {"x": 1}, "idempotencyKey": null,
        "requestedByType": "user", "requestedById": "admin", "coalescedInto": null,
        "runId": null, "retryOfRunId": null, "waitingOnRun": null, "seq": 3,
        "createdAt": 0, "updatedAt": 0, "blockedBy": blocked_by
    }))
    .expect("wake view JSON")
}

fn agent(id: &str, name: &str) -> Agent {
    serde_json::from_value(json!({
        "id": id, "companyId": "c1", "name": name, "role": "engineer", "title": null,
        "status": "active", "pauseReason": null, "adapterType": "process", "adapterConfig": {},
        "heartbeat": {}, "placementLabels": {}, "createdAt": 0, "updatedAt": 0
    }))
    .expect("agent JSON")
}

fn issue(id: &str, identifier: &str) -> Issue {
    serde_json::from_value(json!({
        "id": id, "companyId": "c1", "identifier": identifier, "issueNumber": 1,
        "title": "t", "description": null, "status": "todo", "priority": "medium",
        "assigneeAgentId": null, "assigneeUserId": null, "parentId": null, "blockedByIssueIds": [],
        "billingCode": null, "checkout": null, "checkoutRunId": null, "executionRunId": null,
        "createdByAgentId": null, "createdByUserId": "admin", "startedAt": null, "completedAt": null,
        "cancelledAt": null, "createdAt": 0, "updatedAt": 0
    }))
    .expect("issue JSON")
}

#[test]
fn wake_and_worker_commands_parse() {
    let cases: &[&[&str]] = &[
        &["agent", "wake", "coder"],
        &[
            "agent", "wake", "coder", "--issue", "TST-1", "--reason", "routine", "--key", "k1",
            "-q",
        ],
        &[
            "wake",
            "list",
            "--agent",
            "coder",
            "--status",
            "queued,deferred",
        ],
        &["wake", "list", "--issue", "TST-1", "--limit", "5", "--json"],
        &["wake", "show", "w1"],
        &["run", "cancel", "r1"],
        &["worker", "list"],
        &["worker", "token", "create", "--name", "gpu-box", "-q"],
    ];
    for args in cases {
        parse(args).unwrap_or_else(|e| panic!("{args:?} should parse: {e}"));
    }
    let refused: &[&[&str]] = &[
        // Event reasons are the state machine's to give, not a person's.
        &["agent", "wake", "coder", "--reason", "issue_assigned"],
        &["agent", "wake", "coder", "--reason", "nap"],
        &["wake", "list", "--status", "queued,sleeping"],
        &["wake", "list", "-q"],
        &["worker", "list", "-q"],
    ];
    for args in refused {
        let err = parse(args)
            .err()
            .unwrap_or_else(|| panic!("{args:?} should not parse"));
        assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
    }
}

#[test]
fn only_on_demand_and_routine_are_wakeup_reasons() {
    assert_eq!(
        agent::parse_wakeup_reason("routine"),
        Ok(WakeReason::Routine)
    );
    assert_eq!(
        agent::parse_wakeup_reason("on_demand"),
        Ok(WakeReason::OnDemand)
    );
    assert!(agent::parse_wakeup_reason("heartbeat_timer").is_err());
}

#[test]
fn wake_lists_show_names_identifiers_and_why() {
    let wakes = [
        wake_view(
            "w2",
            "queued",
            Some("promoted: run r1 ended"),
            Some("waiting for a worker"),
        ),
        wake_view("w1", "suppressed", Some("self_authored"), None),
    ];
    let names = AgentNames(vec![agent("a1", "coder")]);
    let issues = IssueLabels(vec![issue("i1", "TST-1")]);
    let text = wake::wake_table(&wakes, &names, &issues, Timestamp(90_000));
    let expected = "\
WAKE  AGENT  ISSUE  REASON          STATUS      WHY                   COUNT  AGE
w2    coder  TST-1  issue_assigned  queued      waiting for a worker  2      1m
w1    coder  TST-1  issue_assigned  suppressed  self_authored         2      1m
";
    assert_eq!(text, expected);
    // Unknown agents and issues show their ids rather than failing the listing.
    let bare = wake::wake_table(
        &wakes[1..],
        &AgentNames::default(),
        &IssueLabels::default(),
        Timestamp(0),
    );
    assert!(bare.contains("w1    a1     i1"), "{bare}");
}

#[test]
fn a_wake_block_names_the_agent_and_explains_a_wait() {
    let view = wake_view(
        "w1",
        "queued",
        None,
        Some("max_concurrent_runs (1) reached"),
    );
    let labels = wake::WakeLabels {
        agent: "coder (a1)".into(),
        issue: "TST-1 (i1)".into(),
    };
    let text = wake::wake_fields(&view, &labels);
    for line in [
        "why:           max_concurrent_runs (1) reached",
        "agent:         coder (a1)",
        "comments:      k1,k2",
        "payload:       {\"x\":1}",
        "requested by:  user admin",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    let result = roost_client::WakeupResult {
        wake: view,
        run: None,
    };
    assert!(wake::wakeup_text(&result, &labels).contains("roost wake show w1"));
    // A merged wake points at the one that will get the run.
    let mut merged = wake_view("w2", "coalesced", Some("merged into wake w1"), None);
    merged.wake.coalesced_into = Some("w1".into());
    let result = roost_client::WakeupResult {
        wake: merged,
        run: None,
    };
    assert!(wake::wakeup_text(&result, &labels).contains("roost wake show w1"));
}

#[test]
fn worker_lists_show_capacity_and_load() {
    let worker: WorkerView = serde_json::from_value(json!({
        "id": "wk1", "name": "gpu-box", "adapters": ["claude", "process"],
        "labels": {"gpu": "a100", "zone": "eu"}, "slots": 4, "version": "0.1.0",
        "status": "online", "registeredAt": 0, "lostAt": null, "liveRuns": 3
    }))
    .expect("worker view JSON");
    let expected = "\
ID   NAME     STATUS  ADAPTERS        SLOTS  LIVE RUNS  LABELS            VERSION
wk1  gpu-box  online  claude,process  4      3          gpu=a100,zone=eu  0.1.0
";
    assert_eq!(worker::worker_table(&[worker]), expected);
}

#[test]
fn run_lists_show_the_reason_and_the_worker() {
    let assigned: Run = serde_json::from_value(json!({
        "id": "r2", "companyId": "c1", "agentId": "a1", "issueId": "i1", "status": "assigned",
        "invocationSource": "issue_assigned", "error": null, "createdAt": 0, "startedAt": null,
        "finishedAt": null, "wakeId": "w1", "wakeReason": "issue_assigned", "commentIds": [],
        "payload": null, "workerId": "wk1", "assignedAt": 0, "retryOfRunId": null
    }))
    .expect("run JSON");
    // A run started by hand, stored before runs had wake and worker fields.
    let manual: Run = serde_json::from_value(json!({
        "id": "r1", "companyId": "c1", "agentId": "a1", "issueId": null, "status": "running",
        "invocationSource": "on_demand", "error": null, "createdAt": 0, "startedAt": 0,
        "finishedAt": null
    }))
    .expect("old run JSON");
    let names = AgentNames(vec![agent("a1", "coder")]);
    let issues = IssueLabels(vec![issue("i1", "TST-1")]);
    let text = run::run_table(&[assigned.clone(), manual], &names, &issues);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("ID  STATUS    AGENT  ISSUE  REASON          WORKER"));
    assert!(lines[1].contains("TST-1  issue_assigned  wk1"), "{text}");
    assert!(lines[2].contains("-      on_demand       -"), "{text}");
    let block = run::run_fields(&assigned);
    assert!(block.contains("wake:      w1"), "{block}");
    assert!(block.contains("worker:    wk1"), "{block}");
}
