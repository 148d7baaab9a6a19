//! Mapping tests for the gRPC conversions: round trips, defaults, clearing and bad input.

use std::collections::BTreeMap;

use roost_core::{AgentStatus, Priority, Timestamp};

use super::*;

fn sample_agent() -> Agent {
    Agent {
        id: "a1".into(),
        company_id: "c1".into(),
        name: "Builder".into(),
        role: "engineer".into(),
        title: None,
        status: AgentStatus::Paused,
        pause_reason: Some(PauseReason::Budget),
        adapter_type: AdapterType::Claude,
        adapter_config: serde_json::json!({"model": "x", "args": [1, 2]}),
        heartbeat: HeartbeatPolicy {
            enabled: true,
            interval_sec: 60,
            wake_on_demand: false,
            max_concurrent_runs: 3,
            skip_when_idle: false,
            run_reserve_cents: 40,
            max_daily_runs: Some(0),
            max_daily_cost_cents: Some(500),
        },
        placement_labels: BTreeMap::from([("gpu".into(), "a100".into())]),
        created_at: Timestamp(1_000),
        updated_at: Timestamp(2_000),
        last_heartbeat_at: None,
        task_sessions: BTreeMap::new(),
        permissions: Default::default(),
        session_rotation: Default::default(),
        home_max_bytes: roost_core::home::DEFAULT_HOME_MAX_BYTES,
        loop_breaker: Default::default(),
        loop_window_since: None,
        reports_to: None,
        desired_skills: Vec::new(),
    }
}

fn sample_issue() -> Issue {
    Issue {
        id: "i1".into(),
        company_id: "c1".into(),
        identifier: "ENG-7".into(),
        issue_number: 7,
        title: "Fix it".into(),
        description: Some("details".into()),
        status: IssueStatus::InProgress,
        priority: Priority::High,
        assignee_agent_id: Some("a1".into()),
        assignee_user_id: None,
        parent_id: None,
        blocked_by_issue_ids: vec!["i0".into()],
        billing_code: None,
        checkout: Some(Checkout {
            agent_id: "a1".into(),
            run_id: "r1".into(),
            token: 42,
            at: Timestamp(3_000),
        }),
        checkout_run_id: Some("r1".into()),
        execution_run_id: Some("r1".into()),
        created_by_agent_id: None,
        created_by_user_id: Some("admin".into()),
        started_at: Some(Timestamp(3_000)),
        completed_at: None,
        cancelled_at: None,
        created_at: Timestamp(1_000),
        updated_at: Timestamp(3_000),
        status_changed_at: None,
        escalated_blocked_since: None,
        recovery: None,
        project_id: None,
        goal_id: None,
        monitor: Default::default(),
        paperclip: Default::default(),
    }
}

fn assert_invalid_argument(error: ApiError, field: &str) {
    let message = error.to_string();
    let status = tonic::Status::from(error);
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(message.contains(field), "{message}");
}

#[test]
fn agent_maps_enums_json_and_timestamps() {
    let proto = agent_to_proto(sample_agent());
    assert_eq!(proto.status(), pb::AgentStatus::Paused);
    assert_eq!(proto.pause_reason(), pb::PauseReason::Budget);
    assert_eq!(proto.adapter_type(), pb::AdapterType::Claude);
    let config: serde_json::Value = serde_json::from_str(&proto.adapter_config_json).unwrap();
    assert_eq!(config, serde_json::json!({"model": "x", "args": [1, 2]}));
    assert_eq!(
        proto.placement_labels.get("gpu").map(String::as_str),
        Some("a100")
    );
    assert_eq!((proto.created_at_ms, proto.updated_at_ms), (1_000, 2_000));
    let heartbeat = proto.heartbeat.unwrap();
    assert_eq!(heartbeat_from_proto(heartbeat), sample_agent().heartbeat);
}

#[test]
fn created_agent_round_trips_through_a_create_request() {
    let agent = sample_agent();
    let proto = agent_to_proto(agent.clone());
    let request = pb::CreateAgentRequest {
        company_id: proto.company_id,
        name: proto.name,
        role: proto.role,
        title: proto.title,
        adapter_type: proto.adapter_type,
        adapter_config_json: proto.adapter_config_json,
        heartbeat: proto.heartbeat,
        placement_labels: proto.placement_labels,
    };
    let (company_id, new) = new_agent(request).unwrap();
    assert_eq!(company_id, agent.company_id);
    assert_eq!(new.name, agent.name);
    assert_eq!(new.role, agent.role);
    assert_eq!(new.adapter_type, agent.adapter_type);
    assert_eq!(new.adapter_config, agent.adapter_config);
    assert_eq!(new.heartbeat, agent.heartbeat);
    assert_eq!(new.placement_labels, agent.placement_labels);
}

#[test]
fn empty_create_agent_fields_take_the_rest_defaults() {
    let request = pb::CreateAgentRequest {
        name: "n".into(),
        ..Default::default()
    };
    let (_, new) = new_agent(request).unwrap();
    assert_eq!(new.role, "general");
    assert_eq!(new.adapter_type, AdapterType::Process);
    assert_eq!(new.adapter_config, serde_json::json!({}));
    assert_eq!(new.heartbeat, HeartbeatPolicy::default());
    assert!(new.placement_labels.is_empty());
}

#[test]
fn bad_adapter_input_is_invalid_argument() {
    let bad_type = pb::CreateAgentRequest {
        adapter_type: 99,
        ..Default::default()
    };
    assert_invalid_argument(new_agent(bad_type).unwrap_err(), "adapter_type");
    let bad_json = pb::CreateAgentRequest {
        adapter_config_json: "{oops".into(),
        ..Default::default()
    };
    assert_invalid_argument(new_agent(bad_json).unwrap_err(), "adapter_config_json");
}

#[test]
fn agent_patch_clears_title_and_replaces_labels_only_when_asked() {
    let request = pb::UpdateAgentRequest {
        agent_id: "a1".into(),
        title: Some(String::new()),
        adapter_type: Some(AdapterType::Http.to_proto()),
        adapter_config_json: Some(r#"{"url":"u"}"#.into()),
        placement_labels: [("zone".to_string(), "eu".to_string())].into(),
        ..Default::default()
    };
    let (agent_id, patch) = agent_patch(request.clone()).unwrap();
    assert_eq!(agent_id, "a1");
    assert_eq!(patch.title, Some(None));
    assert_eq!(patch.adapter_type, Some(AdapterType::Http));
    assert_eq!(patch.adapter_config, Some(serde_json::json!({"url": "u"})));
    assert_eq!(
        patch.placement_labels, None,
        "labels ignored without the flag"
    );
    assert_eq!(
        (patch.name, patch.role, patch.heartbeat),
        (None, None, None)
    );

    let replace = pb::UpdateAgentRequest {
        set_placement_labels: true,
        ..request
    };
    let (_, patch) = agent_patch(replace).unwrap();
    let expected = BTreeMap::from([("zone".to_string(), "eu".to_string())]);
    assert_eq!(patch.placement_labels, Some(expected));

    let clear = pb::UpdateAgentRequest {
        set_placement_labels: true,
        ..Default::default()
    };
    let (_, patch) = agent_patch(clear).unwrap();
    assert_eq!(patch.placement_labels, Some(BTreeMap::new()));
    assert_eq!(patch.title, None, "absent title is unchanged");
}

#[test]
fn issue_maps_every_field() {
    let proto = issue_to_proto(sample_issue());
    assert_eq!(proto.status(), pb::IssueStatus::InProgress);
    assert_eq!(proto.priority(), pb::Priority::High);
    assert_eq!(proto.identifier, "ENG-7");
    let checkout = proto.checkout.unwrap();
    assert_eq!(
        (checkout.token, checkout.at_ms, checkout.run_id.as_str()),
        (42, 3_000, "r1")
    );
    assert_eq!(proto.checkout_run_id.as_deref(), Some("r1"));
    assert_eq!(proto.started_at_ms, Some(3_000));
    assert_eq!(proto.completed_at_ms, None);
    assert_eq!(proto.blocked_by_issue_ids, vec!["i0".to_string()]);
}

#[test]
fn issue_status_and_priority_round_trip_for_every_variant() {
    for &status in IssueStatus::ALL {
        let value = issue_to_proto(Issue {
            status,
            ..sample_issue()
        })
        .status;
        assert_eq!(enum_value::<IssueStatus>("status", value).unwrap(), status);
    }
    for &priority in Priority::ALL {
        let value = issue_to_proto(Issue {
            priority,
            ..sample_issue()
        })
        .priority;
        assert_eq!(enum_value::<Priority>("priority", value).unwrap(), priority);
    }
    for &status in RunStatus::ALL {
        let run = Run {
            id: "r".into(),
            company_id: "c".into(),
            agent_id: "a".into(),
            issue_id: None,
            status,
            invocation_source: "on_demand".into(),
            error: None,
            created_at: Timestamp(5),
            started_at: None,
            finished_at: Some(Timestamp(9)),
            wake_id: None,
            wake_reason: None,
            comment_ids: Vec::new(),
            payload: serde_json::Value::Null,
            worker_id: None,
            assigned_at: None,
            retry_of_run_id: None,
            token_hashes: Vec::new(),
            usage: Default::default(),
            session_id_before: None,
            session_id_after: None,
            session_reset: false,
            session_rotated: None,
            log_tail: String::new(),
            log_bytes: 0,
            summary: None,
            reserved_cents: 0,
            workspace_path: None,
        };
        let proto = run_to_proto(run);
        assert_eq!(run_status(proto.status).unwrap(), status);
        assert_eq!((proto.created_at_ms, proto.finished_at_ms), (5, Some(9)));
    }
}

#[test]
fn update_issue_empty_string_clears_and_absent_leaves_unchanged() {
    let request = pb::UpdateIssueRequest {
        issue_id: "ENG-7".into(),
        description: Some(String::new()),
        assignee_agent_id: Some(String::new()),
        assignee_user_id: Some("u1".into()),
        billing_code: Some(String::new()),
        blocked_by_issue_ids: vec!["i9".into()],
        comment: Some("done".into()),
        ..Default::default()
    };
    let (issue_id, patch, comment) = issue_patch(request.clone()).unwrap();
    assert_eq!(issue_id, "ENG-7");
    assert_eq!(patch.description, Some(None));
    assert_eq!(patch.assignee_agent_id, Some(None));
    assert_eq!(patch.assignee_user_id, Some(Some("u1".into())));
    assert_eq!(patch.billing_code, Some(None));
    assert_eq!(patch.parent_id, None);
    assert_eq!(patch.title, None);
    assert_eq!((patch.status, patch.priority), (None, None));
    assert_eq!(
        patch.blocked_by_issue_ids, None,
        "blockers ignored without the flag"
    );
    assert_eq!(comment.as_deref(), Some("done"));

    let replace = pb::UpdateIssueRequest {
        set_blocked_by: true,
        ..request
    };
    let (_, patch, _) = issue_patch(replace).unwrap();
    assert_eq!(patch.blocked_by_issue_ids, Some(vec!["i9".to_string()]));
    let clear = pb::UpdateIssueRequest {
        set_blocked_by: true,
        ..Default::default()
    };
    let (_, patch, _) = issue_patch(clear).unwrap();
    assert_eq!(patch.blocked_by_issue_ids, Some(Vec::new()));
}

#[test]
fn bad_enum_values_are_invalid_argument() {
    let update = pb::UpdateIssueRequest {
        status: Some(42),
        ..Default::default()
    };
    assert_invalid_argument(issue_patch(update).unwrap_err(), "status");
    let create = pb::CreateIssueRequest {
        priority: Some(-1),
        ..Default::default()
    };
    assert_invalid_argument(new_issue(create).unwrap_err(), "priority");
    let list = pb::ListIssuesRequest {
        status: vec![IssueStatus::Todo.to_proto(), 77],
        ..Default::default()
    };
    assert_invalid_argument(
        issue_filter(&list).unwrap_err(),
        "77 is not a value of IssueStatus",
    );
    // A filter of "any status" is an empty list, not UNSPECIFIED.
    assert_invalid_argument(expected_statuses(&[0]).unwrap_err(), "expected_statuses");
    assert_invalid_argument(run_status(0).unwrap_err(), "RunStatus is required");
    assert_invalid_argument(pause_reason(Some(12)).unwrap_err(), "reason");
}

#[test]
fn new_issue_keeps_given_fields_and_drops_empty_ones() {
    let request = pb::CreateIssueRequest {
        company_id: "c1".into(),
        title: "t".into(),
        description: Some("d".into()),
        status: Some(IssueStatus::Todo.to_proto()),
        assignee_agent_id: Some(String::new()),
        parent_id: Some("i0".into()),
        ..Default::default()
    };
    let (company_id, fields) = new_issue(request).unwrap();
    assert_eq!(company_id, "c1");
    assert_eq!(fields.title.as_deref(), Some("t"));
    assert_eq!(fields.description, Some(Some("d".into())));
    assert_eq!(fields.status, Some(IssueStatus::Todo));
    assert_eq!(
        fields.priority, None,
        "absent priority is the domain default"
    );
    assert_eq!(fields.assignee_agent_id, None);
    assert_eq!(fields.parent_id, Some(Some("i0".into())));
    assert_eq!(fields.blocked_by_issue_ids, None);
}

#[test]
fn list_defaults_apply_when_limit_is_zero() {
    let filter = issue_filter(&pb::ListIssuesRequest::default()).unwrap();
    assert!(filter.statuses.is_empty());
    assert_eq!(filter.limit, None);
    let filter = issue_filter(&pb::ListIssuesRequest {
        status: vec![IssueStatus::Blocked.to_proto()],
        limit: 5,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        (filter.statuses, filter.limit),
        (vec![IssueStatus::Blocked], Some(5))
    );

    let query = comment_query(&pb::ListCommentsRequest {
        after_comment_id: Some(String::new()),
        ..Default::default()
    });
    assert_eq!(
        (query.after, query.descending, query.limit),
        (None, false, 200)
    );
    assert_eq!((run_page_size(0), run_page_size(7)), (100, 7));
    assert_eq!((activity_page_size(0), activity_page_size(3)), (100, 3));
}

#[test]
fn small_defaults_match_rest() {
    assert_eq!(pause_reason(None).unwrap(), PauseReason::Manual);
    assert_eq!(
        pause_reason(Some(PauseReason::System.to_proto())).unwrap(),
        PauseReason::System
    );
    assert_eq!(pause_reason(Some(0)).unwrap(), PauseReason::Manual);
    assert_eq!(key_name(String::new()), "default");
    assert_eq!(key_name("ci".into()), "ci");
    assert_eq!(optional_id(Some(String::new())), None);
    assert_eq!(crate::api::default_prefix("Acme Corp"), "AC");
    assert_eq!(crate::api::default_prefix("roost"), "ROO");
    assert_eq!(crate::api::default_prefix("42"), "ISS");
    let named = pb::CreateCompanyRequest {
        name: "Acme Corp".into(),
        issue_prefix: String::new(),
    };
    assert_eq!(company_prefix(&named), "AC");
    let explicit = pb::CreateCompanyRequest {
        issue_prefix: "ENG".into(),
        ..named
    };
    assert_eq!(company_prefix(&explicit), "ENG");
}

#[test]
fn records_without_enums_map_field_for_field() {
    let company = company_to_proto(Company {
        id: "c1".into(),
        name: "Acme".into(),
        description: None,
        status: Default::default(),
        require_board_approval_for_new_agents: false,
        loop_breaker: Default::default(),
        escalate_blocked_after_secs: 3600,
        recover_stranded_after_secs: 60,
        issue_prefix: "AC".into(),
        issue_counter: 3,
        created_at: Timestamp(10),
        updated_at: Timestamp(20),
    });
    assert_eq!(
        (
            company.issue_counter,
            company.created_at_ms,
            company.updated_at_ms
        ),
        (3, 10, 20)
    );

    let entry = activity_to_proto(ActivityEntry {
        seq: 4,
        log_index: 9,
        company_id: Some("c1".into()),
        at: Timestamp(30),
        actor_type: "agent".into(),
        actor_id: "a1".into(),
        credential_id: None,
        run_id: Some("r1".into()),
        action: "issue.updated".into(),
        entity_type: "issue".into(),
        entity_id: "i1".into(),
        details: serde_json::json!({"status": "done"}),
        prev_hash: "p".into(),
        hash: "h".into(),
    });
    let details: serde_json::Value = serde_json::from_str(&entry.details_json).unwrap();
    assert_eq!(details, serde_json::json!({"status": "done"}));
    assert_eq!((entry.seq, entry.log_index, entry.at_ms), (4, 9, 30));

    let report = audit_report_to_proto(AuditReport {
        ok: false,
        entries: 2,
        head_hash: None,
        broken_at_seq: Some(3),
        message: "broken".into(),
    });
    assert_eq!(
        (report.ok, report.head_hash.as_str(), report.broken_at_seq),
        (false, "", Some(3))
    );
}

#[test]
fn comments_and_created_keys_map_field_for_field() {
    let comment = comment_to_proto(Comment {
        id: "m1".into(),
        company_id: "c1".into(),
        issue_id: "i1".into(),
        body: "hello".into(),
        author_agent_id: Some("a1".into()),
        author_user_id: None,
        created_by_run_id: Some("r1".into()),
        created_at: Timestamp(40),
        ..Default::default()
    });
    assert_eq!(
        (comment.body.as_str(), comment.created_at_ms),
        ("hello", 40)
    );
    assert_eq!(comment.created_by_run_id.as_deref(), Some("r1"));
    assert_eq!(comment.deleted_at_ms, None);
    let deleted = comment_to_proto(Comment {
        id: "m2".into(),
        deleted_at: Some(Timestamp(50)),
        deleted_by_type: Some(roost_core::ActorKind::Agent),
        deleted_by_agent_id: Some("a1".into()),
        deleted_by_run_id: Some("r2".into()),
        ..Default::default()
    });
    assert_eq!(
        (
            deleted.deleted_at_ms,
            deleted.deleted_by_type.as_deref(),
            deleted.deleted_by_agent_id.as_deref(),
            deleted.deleted_by_user_id.as_deref(),
            deleted.deleted_by_run_id.as_deref()
        ),
        (Some(50), Some("agent"), Some("a1"), None, Some("r2"))
    );

    let credential = Credential {
        id: "k1".into(),
        kind: roost_core::CredentialKind::AgentKey,
        name: "ci".into(),
        agent_id: Some("a1".into()),
        company_id: Some("c1".into()),
        token_hash: "secret-hash".into(),
        revoked: false,
        created_at: Timestamp(50),
        revoked_at: None,
        expires_at: None,
        max_uses: None,
        worker_ids: Vec::new(),
        worker_id: None,
        join_token_id: None,
    };
    let created = created_key_to_proto(credential, "rst_agent_x".into());
    let key = created.key.unwrap();
    assert_eq!(
        (key.id.as_str(), key.agent_id.as_str(), key.name.as_str()),
        ("k1", "a1", "ci")
    );
    assert_eq!(
        (key.created_at_ms, created.token.as_str()),
        (50, "rst_agent_x")
    );
}
