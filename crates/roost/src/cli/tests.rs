//! Option parsing and resolution, without a server.

use clap::{CommandFactory, Parser};
use roost_client::IssueUpdate;
use roost_core::{Issue, IssueStatus, Timestamp};

use super::*;

/// The client commands as the binary mounts them: flattened into the top-level list.
#[derive(Parser)]
#[command(name = "roost")]
struct Cli {
    #[command(subcommand)]
    command: ClientCommand,
}

fn parse(args: &[&str]) -> Result<ClientCommand, clap::Error> {
    Cli::try_parse_from(std::iter::once("roost").chain(args.iter().copied())).map(|c| c.command)
}

fn company(id: &str, name: &str, prefix: &str, created: i64) -> Company {
    Company {
        id: id.into(),
        name: name.into(),
        description: None,
        status: Default::default(),
        require_board_approval_for_new_agents: false,
        loop_breaker: Default::default(),
        escalate_blocked_after_secs: 3600,
        recover_stranded_after_secs: 60,
        issue_prefix: prefix.into(),
        issue_counter: 0,
        created_at: Timestamp(created),
        updated_at: Timestamp(created),
    }
}

#[test]
fn the_command_definitions_are_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn client_options_are_accepted_before_and_after_the_verb() {
    let after = parse(&[
        "issue",
        "list",
        "--json",
        "--server",
        "http://n2:7480",
        "--token",
        "t1",
        "--run-id",
        "r1",
    ])
    .expect("options after the verb");
    let opts = after.client_opts();
    assert!(opts.json);
    assert_eq!(
        (
            opts.server.as_str(),
            opts.token.as_deref(),
            opts.run_id.as_deref()
        ),
        ("http://n2:7480", Some("t1"), Some("r1"))
    );

    let before = parse(&["company", "--json", "--token", "t2", "show", "c1"])
        .expect("options before the verb");
    assert!(before.client_opts().json);
    assert_eq!(before.client_opts().token.as_deref(), Some("t2"));

    let nested =
        parse(&["agent", "key", "create", "a1", "--name", "ci", "--json"]).expect("nested verbs");
    assert!(nested.client_opts().json);
}

#[test]
fn usage_errors_are_caught_by_the_parser() {
    let cases: &[&[&str]] = &[
        &["issue", "list", "--status", "todo,nope"],
        &["issue", "update", "RST-1", "--assignee", "a1", "--unassign"],
        &[
            "issue",
            "create",
            "--title",
            "t",
            "--parent",
            "RST-1",
            "--company",
            "c",
        ],
        &["agent", "create", "--name", "n", "--adapter", "docker"],
        &["run", "finish", "r1", "--status", "done"],
        &["issue", "checkout", "RST-1"],
    ];
    for args in cases {
        let err = parse(args)
            .err()
            .unwrap_or_else(|| panic!("{args:?} should not parse"));
        assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
    }
}

#[test]
fn the_token_comes_from_the_flag_then_the_dev_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    assert_eq!(resolve_token(Some(" t1 "), dir.path()).expect("flag"), "t1");

    let missing = resolve_token(None, dir.path()).expect_err("no token anywhere");
    assert_eq!(
        missing.to_string(),
        "no token: set ROOST_TOKEN or pass --token"
    );
    // An empty ROOST_TOKEN counts as unset rather than as an empty secret.
    assert!(resolve_token(Some("  "), dir.path()).is_err());

    std::fs::write(dir.path().join(crate::dev::TOKEN_FILE), "rst_admin_abc\n")
        .expect("write token");
    assert_eq!(
        resolve_token(None, dir.path()).expect("token file"),
        "rst_admin_abc"
    );
    assert_eq!(
        resolve_token(Some("t1"), dir.path()).expect("flag wins"),
        "t1"
    );

    std::fs::write(dir.path().join(crate::dev::TOKEN_FILE), "\n").expect("write empty token");
    assert!(resolve_token(None, dir.path())
        .expect_err("empty file")
        .to_string()
        .contains("is empty"));
}

#[test]
fn the_default_company_is_the_only_or_the_oldest() {
    assert!(pick_company(&[], None).is_err());

    let only = [company("c1", "Acme", "AC", 5)];
    assert_eq!(
        pick_company(&only, None).expect("only"),
        CompanyChoice {
            id: "c1".into(),
            note: None
        }
    );

    let two = [
        company("c9", "Later", "LT", 20),
        company("c2", "First", "FS", 10),
    ];
    let choice = pick_company(&two, None).expect("oldest");
    assert_eq!(choice.id, "c2");
    assert!(
        choice
            .note
            .as_deref()
            .is_some_and(|n| n.contains("--company")),
        "{choice:?}"
    );
}

#[test]
fn a_named_company_matches_id_prefix_or_name() {
    let companies = [
        company("c1", "Acme Corp", "AC", 1),
        company("c2", "Roost", "RST", 2),
    ];
    let id = |wanted: &str| pick_company(&companies, Some(wanted)).map(|c| c.id);
    assert_eq!(id("c2").expect("id"), "c2");
    assert_eq!(id("rst").expect("prefix"), "c2");
    assert_eq!(id("acme corp").expect("name"), "c1");
    // Unknown values go to the server, which answers 404 in its own words.
    assert_eq!(id("c404").expect("pass through"), "c404");

    let twins = [
        company("c1", "Twin", "T1", 1),
        company("c2", "Twin", "T2", 2),
    ];
    assert!(pick_company(&twins, Some("twin")).is_err());
}

#[test]
fn agent_names_stand_in_for_ids_when_known() {
    let agent: Agent = serde_json::from_value(serde_json::json!({
        "id": "a1", "companyId": "c1", "name": "builder", "role": "engineer", "title": null,
        "status": "active", "pauseReason": null, "adapterType": "process", "adapterConfig": {},
        "heartbeat": {}, "placementLabels": {}, "createdAt": 0, "updatedAt": 0
    }))
    .expect("agent JSON");
    let names = AgentNames(vec![agent]);
    assert_eq!(names.label(Some("a1")), "builder");
    assert_eq!(names.label(Some("a2")), "a2");
    assert_eq!(names.label(None), "-");
}

fn issue(identifier: &str, status: IssueStatus, assignee: Option<&str>, title: &str) -> Issue {
    serde_json::from_value(serde_json::json!({
        "id": format!("id-{identifier}"), "companyId": "c1", "identifier": identifier, "issueNumber": 1,
        "title": title, "description": null, "status": status, "priority": "medium",
        "assigneeAgentId": assignee, "assigneeUserId": null, "parentId": null, "blockedByIssueIds": [],
        "billingCode": null, "checkout": null, "checkoutRunId": null, "executionRunId": null,
        "createdByAgentId": null, "createdByUserId": "admin", "startedAt": null, "completedAt": null,
        "cancelledAt": null, "createdAt": 0, "updatedAt": 0
    }))
    .expect("issue JSON")
}

#[test]
fn issue_lists_show_identifier_status_priority_assignee_and_title() {
    let issues = [
        issue("RST-1", IssueStatus::Todo, None, "Write the docs"),
        issue(
            "RST-12",
            IssueStatus::InProgress,
            Some("a1"),
            "Fix the\nflaky test",
        ),
    ];
    let expected = "\
IDENT   STATUS       PRIORITY  ASSIGNEE  TITLE
RST-1   todo         medium    -         Write the docs
RST-12  in_progress  medium    a1        Fix the flaky test
";
    assert_eq!(
        issue::issue_table(&issues, &AgentNames::default()),
        expected
    );
}

/// The statuses `issue checkout` sends as `expectedStatuses`.
fn checkout_expectation(args: &[&str]) -> Vec<IssueStatus> {
    match parse(args) {
        Ok(ClientCommand::Issue(a)) => match a.command {
            issue::IssueCommand::Checkout { expect, .. } => expect,
            _ => panic!("not a checkout"),
        },
        _ => panic!("{args:?} should parse as an issue command"),
    }
}

#[test]
fn checkout_expects_open_statuses_unless_told() {
    let default = checkout_expectation(&["issue", "checkout", "RST-1", "--agent", "a1"]);
    assert_eq!(
        default,
        [
            IssueStatus::Todo,
            IssueStatus::Backlog,
            IssueStatus::Blocked
        ]
    );
    let told = checkout_expectation(&[
        "issue",
        "checkout",
        "RST-1",
        "--agent",
        "a1",
        "--expect",
        "in_progress",
    ]);
    assert_eq!(told, [IssueStatus::InProgress]);
}

#[test]
fn an_update_with_nothing_to_change_is_refused() {
    assert!(issue::is_empty_update(&IssueUpdate::default()));
    assert!(!issue::is_empty_update(&IssueUpdate {
        assignee_agent_id: Some(None),
        ..IssueUpdate::default()
    }));
}

fn agent(id: &str, company_id: &str, name: &str) -> Agent {
    serde_json::from_value(serde_json::json!({
        "id": id, "companyId": company_id, "name": name, "role": "engineer", "title": null,
        "status": "active", "pauseReason": null, "adapterType": "process", "adapterConfig": {},
        "heartbeat": {}, "placementLabels": {}, "createdAt": 0, "updatedAt": 0
    }))
    .expect("agent JSON")
}

#[test]
fn an_agent_is_named_by_id_or_by_name_in_any_case() {
    let agents = [agent("a1", "c1", "coder"), agent("a2", "c1", "Reviewer")];
    let id = |wanted: &str| pick_agent(&agents, wanted).map(|a| a.id.clone());
    assert_eq!(id("a2").expect("id"), "a2");
    assert_eq!(id("coder").expect("name"), "a1");
    assert_eq!(id("REVIEWER").expect("name in another case"), "a2");
    assert_eq!(id(" coder ").expect("padded name"), "a1");
}

#[test]
fn an_id_wins_over_a_name_that_looks_like_it() {
    // Names are free text, so one may equal another agent's id; the id is what was meant.
    let agents = [agent("a1", "c1", "a2"), agent("a2", "c1", "coder")];
    assert_eq!(pick_agent(&agents, "a2").expect("id").id, "a2");
}

#[test]
fn unknown_and_ambiguous_agents_are_clear_errors() {
    let agents = [agent("a1", "c1", "coder"), agent("a2", "c2", "Coder")];
    let unknown = pick_agent(&agents, "tester").expect_err("unknown name");
    assert_eq!(
        unknown.to_string(),
        "no agent has the id or name `tester`; `roost agent list` shows them"
    );
    assert!(pick_agent(&[], "coder").is_err());
    assert!(pick_agent(&agents, "  ").is_err());

    // Names are unique within a company only: the same name in two is not guessed at.
    let twins = pick_agent(&agents, "coder").expect_err("two companies");
    let text = twins.to_string();
    assert!(
        text.contains("2 agents") && text.contains("a1") && text.contains("a2"),
        "{text}"
    );
    assert_eq!(
        pick_agent(&agents[..1], "coder").expect("one company").id,
        "a1"
    );
}

#[test]
fn create_like_commands_take_quiet_and_agents_by_name() {
    let cases: &[&[&str]] = &[
        &["company", "create", "--name", "Acme", "-q"],
        &["agent", "create", "--name", "coder", "--quiet"],
        &["agent", "key", "create", "coder", "-q"],
        &["agent", "show", "coder", "-q"],
        &[
            "issue",
            "create",
            "--title",
            "t",
            "--assignee",
            "coder",
            "-q",
        ],
        &["issue", "comment", "RST-1", "--body", "b", "-q"],
        &["run", "start", "--agent", "coder", "-q"],
        &["issue", "list", "--assignee", "coder"],
        &["run", "list", "--agent", "coder"],
        &["agent", "pause", "coder"],
    ];
    for args in cases {
        parse(args).unwrap_or_else(|e| panic!("{args:?} should parse: {e}"));
    }
    // Only where one value is worth capturing.
    assert!(parse(&["issue", "list", "-q"]).is_err());
    assert!(parse(&["agent", "list", "--quiet"]).is_err());
}
