use super::*;

/// Every value of the domain enum goes out and comes back as itself, distinct proto values for
/// distinct domain values, and the proto enum has no value the domain lacks.
fn round_trips<T: ProtoEnum + PartialEq + fmt::Debug>(all: &[T]) {
    let mut seen = std::collections::BTreeSet::new();
    for &value in all {
        let wire = value.to_proto();
        assert_ne!(wire, 0, "{value:?} travels as UNSPECIFIED");
        assert!(seen.insert(wire), "{value:?} shares proto value {wire}");
        assert_eq!(T::from_proto(wire), Ok(value));
    }
    let past = seen.last().copied().unwrap_or(0) + 1;
    let unknown = T::from_proto(past).expect_err("a value past the last is unknown");
    assert_eq!(unknown.expected.len(), all.len(), "{}", unknown.enum_name);
}

#[test]
fn every_domain_value_round_trips_through_its_proto_enum() {
    round_trips(IssueStatus::ALL);
    round_trips(Priority::ALL);
    round_trips(CompanyStatus::ALL);
    round_trips(AgentStatus::ALL);
    round_trips(PauseReason::ALL);
    round_trips(AdapterType::ALL);
    round_trips(RunStatus::ALL);
    round_trips(WakeReason::ALL);
    round_trips(WakeStatus::ALL);
    round_trips(WorkerStatus::ALL);
    round_trips(CredentialKind::ALL);
    round_trips(BudgetScopeType::ALL);
    round_trips(BudgetWindow::ALL);
    round_trips(IncidentKind::ALL);
    round_trips(IncidentStatus::ALL);
    round_trips(IncidentAction::ALL);
    round_trips(GoalLevel::ALL);
    round_trips(GoalStatus::ALL);
    round_trips(ProjectStatus::ALL);
    round_trips(ApprovalType::ALL);
    round_trips(ApprovalStatus::ALL);
    round_trips(ApprovalDecision::ALL);
    round_trips(RoutineStatus::ALL);
    round_trips(ConcurrencyPolicy::ALL);
    round_trips(CatchUpPolicy::ALL);
    round_trips(TriggerKind::ALL);
    round_trips(SigningMode::ALL);
    round_trips(RunSource::ALL);
    round_trips(RoutineRunStatus::ALL);
    round_trips(RoutineAction::ALL);
    round_trips(NodeRole::ALL);
    round_trips(MemberHealth::ALL);
    round_trips(InteractionKind::ALL);
    round_trips(InteractionStatus::ALL);
    round_trips(ResolverPolicy::ALL);
    round_trips(ContinuationPolicy::ALL);
    round_trips(ItemVerdict::ALL);
    round_trips(MonitorStatus::ALL);
    round_trips(ScheduledBy::ALL);
    round_trips(MonitorRecovery::ALL);
    round_trips(ClearReason::ALL);
    round_trips(&[
        MemoryHitKind::Entry,
        MemoryHitKind::Document,
        MemoryHitKind::Comment,
    ]);
}

#[test]
fn proto_names_are_the_domain_names_in_capitals() {
    // What a reader of the proto relies on: ISSUE_STATUS_IN_PROGRESS is REST's "in_progress".
    for &status in IssueStatus::ALL {
        let name = pb::IssueStatus::try_from(status.to_proto())
            .expect("a known value")
            .as_str_name();
        assert_eq!(
            name,
            format!("ISSUE_STATUS_{}", status.as_str().to_uppercase())
        );
    }
    for &adapter in AdapterType::ALL {
        let name = pb::AdapterType::try_from(adapter.to_proto())
            .expect("a known value")
            .as_str_name();
        let snake = name.trim_start_matches("ADAPTER_TYPE_").to_lowercase();
        assert_eq!(snake.replace('_', ""), adapter.as_str().replace('_', ""));
    }
}

#[test]
fn unspecified_and_unknown_values_say_what_would_do() {
    let unset = RunStatus::from_proto(0).expect_err("UNSPECIFIED is no status");
    assert_eq!(
        unset.to_string(),
        "RunStatus is required; expected one of: RUN_STATUS_QUEUED, RUN_STATUS_ASSIGNED, \
         RUN_STATUS_RUNNING, RUN_STATUS_SUCCEEDED, RUN_STATUS_FAILED, RUN_STATUS_CANCELLED, \
         RUN_STATUS_TIMED_OUT, RUN_STATUS_LOST"
    );
    let unknown = WorkerStatus::from_proto(-3).expect_err("no such value");
    assert_eq!(
        unknown.to_string(),
        "-3 is not a value of WorkerStatus; expected one of: WORKER_STATUS_ONLINE, WORKER_STATUS_LOST"
    );
}
