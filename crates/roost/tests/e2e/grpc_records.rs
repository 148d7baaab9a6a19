//! Live memory (an agent's and its company's), the company's shared log, document versions,
//! routine triggers and skills over gRPC: each call answers what
//! its REST twin answers, with the same rules and refusals.

use roost_proto::v1::{
    self as pb, AppendMemoryEntryRequest, CreateRoutineRequest, CreateRoutineTriggerRequest,
    CreateSkillRequest, CurrentTask, DeleteRoutineTriggerRequest, DeleteSkillRequest,
    GetAgentSkillsRequest, GetCompanyMemoryLiveRequest, GetSkillRequest,
    ListMemoryDocumentVersionsRequest, ListMemoryEntriesRequest, ListRoutineTriggersRequest,
    ListSkillsRequest, PutMemoryDocumentRequest, RotateRoutineTriggerSecretRequest,
    SetAgentSkillsRequest, SetMemoryLiveRequest, UpdateRoutineTriggerRequest, UpdateSkillRequest,
};
use serde_json::json;
use tonic::Code;

use roost_testkit::TestNode;

use crate::grpc_wakes::{call, ids, refused};
use crate::support::*;

#[tokio::test]
async fn grpc_live_memory_document_versions_triggers_and_skills_match_rest() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let cid = node.company_id.clone();
    let admin = node.admin_token.clone();
    let mut grpc = control(&node).await?;
    let (agent, key) = node.agent("grpc-keeper").await?;

    // Live memory is saved in the agent's run, and the summary shows it as REST does.
    let live = SetMemoryLiveRequest {
        current_task: Some(CurrentTask {
            doing: "fixing the build".into(),
            last: vec!["read the log".into()],
            next: vec!["rerun CI".into()],
        }),
        coordinates_json: Some(r#"{"branch":"fix-build"}"#.into()),
        ..Default::default()
    };
    let (code, text) = refused(
        grpc.set_memory_live(call(&key, live.clone()))
            .await
            .expect_err("live memory saved outside a run"),
    );
    assert_eq!(code, Code::InvalidArgument, "{text}");
    assert!(text.contains("during a run"), "{text}");
    let run = node.start_run(&agent).await?;
    let saved = grpc
        .set_memory_live(authed(&key, Some(&run), live)?)
        .await?
        .into_inner();
    assert_eq!(saved.run_id.as_deref(), Some(run.as_str()));
    assert!(saved.current_task_updated_at_ms.is_some());
    // The company's shared memory: the same calls with company_id, REST's rules.
    let shared = grpc
        .append_memory_entry(authed(
            &key,
            Some(&run),
            AppendMemoryEntryRequest {
                what: "the build cache lives in /var/cache/ci".into(),
                company_id: cid.clone(),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert!(shared.shared, "{shared:?}");
    let company_live = grpc
        .set_memory_live(authed(
            &admin,
            None,
            SetMemoryLiveRequest {
                coordinates_json: Some(r#"{"release":"1.3"}"#.into()),
                company_id: cid.clone(),
                ..Default::default()
            },
        )?)
        .await?
        .into_inner();
    assert_eq!(
        (
            company_live.agent_id.as_str(),
            company_live.updated_by_type.as_str()
        ),
        ("", "user")
    );
    let read_live = grpc
        .get_company_memory_live(call(
            &key,
            GetCompanyMemoryLiveRequest {
                company_id: cid.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(read_live.coordinates_json, r#"{"release":"1.3"}"#);
    let log = grpc
        .list_memory_entries(call(
            &key,
            ListMemoryEntriesRequest {
                company_id: cid.clone(),
                ..Default::default()
            },
        ))
        .await?
        .into_inner()
        .entries;
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(log[0].id, shared.id);
    let rest_log = node
        .admin
        .get(&format!("/api/companies/{cid}/memory/entries"))
        .await?
        .ok()?;
    assert_eq!(rest_log[0]["id"], shared.id.as_str(), "{rest_log}");
    let rest = node
        .admin
        .get(&format!("/api/agents/{agent}/memory"))
        .await?
        .ok()?;
    assert_eq!(
        rest["live"]["currentTask"]["doing"], "fixing the build",
        "{rest}"
    );
    assert_eq!(rest["live"]["coordinates"]["branch"], "fix-build", "{rest}");
    let (code, text) = refused(
        grpc.set_memory_live(authed(
            &key,
            Some(&run),
            SetMemoryLiveRequest {
                coordinates_json: Some("{not json".into()),
                ..Default::default()
            },
        )?)
        .await
        .expect_err("bad JSON was saved"),
    );
    assert_eq!(code, Code::InvalidArgument, "{text}");
    assert!(text.contains("coordinates_json"), "{text}");

    // A document's versions, newest first, as REST lists them.
    for (expected_version, content) in [(0, "first"), (1, "second")] {
        grpc.put_memory_document(authed(
            &key,
            Some(&run),
            PutMemoryDocumentRequest {
                agent_id: "me".into(),
                name: "MEMORY.md".into(),
                content: content.into(),
                expected_version,
                ..Default::default()
            },
        )?)
        .await?;
    }
    let versions = grpc
        .list_memory_document_versions(call(
            &admin,
            ListMemoryDocumentVersionsRequest {
                agent_id: agent.clone(),
                name: "MEMORY.md".into(),
                ..Default::default()
            },
        ))
        .await?
        .into_inner()
        .versions;
    let rest = node
        .admin
        .get(&format!(
            "/api/agents/{agent}/memory/documents/MEMORY.md/history"
        ))
        .await?
        .ok()?;
    assert_eq!(
        versions
            .iter()
            .map(|v| (v.version, v.content.as_str()))
            .collect::<Vec<_>>(),
        [(2, "second"), (1, "first")]
    );
    let rest_versions: Vec<u64> = rest
        .as_array()
        .map(|a| a.iter().filter_map(|v| v["version"].as_u64()).collect())
        .unwrap_or_default();
    assert_eq!(rest_versions, [2, 1], "{rest}");
    node.admin
        .post(
            &format!("/api/heartbeat-runs/{run}/finish"),
            json!({ "status": "succeeded" }),
        )
        .await?
        .ok()?;

    // Routine triggers: administrators only; a webhook's secret is shown once and works.
    let routine = grpc
        .create_routine(call(
            &admin,
            CreateRoutineRequest {
                company_id: cid.clone(),
                title: "Nightly report".into(),
                assignee_agent_id: Some(agent.clone()),
                ..Default::default()
            },
        ))
        .await?
        .into_inner();
    let webhook = || CreateRoutineTriggerRequest {
        routine_id: routine.id.clone(),
        kind: pb::TriggerKind::Webhook as i32,
        label: Some("ci".into()),
        ..Default::default()
    };
    let denied = grpc
        .create_routine_trigger(call(&key, webhook()))
        .await
        .expect_err("an agent made a trigger");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let created = grpc
        .create_routine_trigger(call(&admin, webhook()))
        .await?
        .into_inner();
    let trigger = created.trigger.expect("the trigger");
    let secret = created.webhook_secret.expect("a bearer webhook's secret");
    let url = created.webhook_url.expect("the webhook's path");
    assert_eq!(
        url,
        format!(
            "/api/routine-triggers/public/{}/fire",
            trigger.public_id.as_deref().unwrap_or_default()
        )
    );
    assert!(trigger.has_secret && trigger.enabled, "{trigger:?}");
    let listed = grpc
        .list_routine_triggers(call(
            &admin,
            ListRoutineTriggersRequest {
                routine_id: routine.id.clone(),
            },
        ))
        .await?
        .into_inner()
        .triggers;
    let rest = node
        .admin
        .get(&format!("/api/routines/{}/triggers", routine.id))
        .await?
        .ok()?;
    assert_eq!(
        listed.iter().map(|t| t.id.clone()).collect::<Vec<_>>(),
        ids(&rest)
    );
    assert!(
        !format!("{listed:?}").contains(&secret),
        "never shown again"
    );
    let fire = |secret: String| {
        let http = node.http().with_token(&secret);
        let path = url.clone();
        async move { http.post(&path, json!({})).await }
    };
    assert_eq!(fire(secret.clone()).await?.status.as_u16(), 202);
    let rotated = grpc
        .rotate_routine_trigger_secret(call(
            &admin,
            RotateRoutineTriggerSecretRequest {
                trigger_id: trigger.id.clone(),
            },
        ))
        .await?
        .into_inner();
    let new_secret = rotated.webhook_secret.expect("the new secret");
    assert_ne!(new_secret, secret);
    assert_eq!(fire(secret).await?.status.as_u16(), 401, "the old secret");
    assert_eq!(fire(new_secret).await?.status.as_u16(), 202);
    let updated = grpc
        .update_routine_trigger(call(
            &admin,
            UpdateRoutineTriggerRequest {
                trigger_id: trigger.id.clone(),
                label: Some(String::new()),
                enabled: Some(false),
                ..Default::default()
            },
        ))
        .await?
        .into_inner();
    assert_eq!((updated.label, updated.enabled), (None, false));
    let (code, text) = refused(
        grpc.update_routine_trigger(call(
            &admin,
            UpdateRoutineTriggerRequest {
                trigger_id: trigger.id.clone(),
                signing_mode: Some(99),
                ..Default::default()
            },
        ))
        .await
        .expect_err("an unknown signing mode was accepted"),
    );
    assert_eq!(code, Code::InvalidArgument, "{text}");
    let delete = || DeleteRoutineTriggerRequest {
        trigger_id: trigger.id.clone(),
    };
    grpc.delete_routine_trigger(call(&admin, delete())).await?;
    let rest = node
        .admin
        .get(&format!("/api/routines/{}/triggers", routine.id))
        .await?
        .ok()?;
    assert!(ids(&rest).is_empty(), "{rest}");
    let gone = grpc
        .delete_routine_trigger(call(&admin, delete()))
        .await
        .expect_err("a deleted trigger was deleted again");
    assert_eq!(gone.code(), Code::NotFound);

    // Skills: administrators write them; every file reads back as REST serves it.
    let create = CreateSkillRequest {
        company_id: cid.clone(),
        name: "Deploy".into(),
        markdown: Some("# Deploy\nRun scripts/run.sh".into()),
        files: [("scripts/run.sh".to_string(), "echo hi".to_string())].into(),
        ..Default::default()
    };
    let denied = grpc
        .create_skill(call(&key, create.clone()))
        .await
        .expect_err("an agent made a skill");
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    let skill = grpc.create_skill(call(&admin, create)).await?.into_inner();
    assert_eq!((skill.key.as_str(), skill.version), ("deploy", 1));
    let rest = node
        .admin
        .get(&format!(
            "/api/companies/{cid}/skills/{}/files?path=scripts/run.sh",
            skill.id
        ))
        .await?
        .ok()?;
    let script = skill
        .files
        .iter()
        .find(|f| f.path == "scripts/run.sh")
        .expect("the script");
    assert_eq!(script.content, str_field(&rest, "content"));
    let updated = grpc
        .update_skill(call(
            &admin,
            UpdateSkillRequest {
                company_id: cid.clone(),
                skill_id: skill.id.clone(),
                write_files: [("notes.md".to_string(), "notes".to_string())].into(),
                remove_files: vec!["scripts/run.sh".into()],
                ..Default::default()
            },
        ))
        .await?
        .into_inner();
    let paths: Vec<&str> = updated.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["SKILL.md", "notes.md"]);
    assert_eq!(updated.version, 2);
    let (code, text) = refused(
        grpc.update_skill(call(
            &admin,
            UpdateSkillRequest {
                company_id: cid.clone(),
                skill_id: skill.id.clone(),
                remove_files: vec!["scripts/run.sh".into()],
                ..Default::default()
            },
        ))
        .await
        .expect_err("a missing file was removed"),
    );
    assert_eq!(code, Code::NotFound, "{text}");
    assert!(text.contains("scripts/run.sh"), "{text}");

    let assigned = grpc
        .set_agent_skills(call(
            &admin,
            SetAgentSkillsRequest {
                agent_id: agent.clone(),
                desired_skills: vec!["deploy".into()],
            },
        ))
        .await?
        .into_inner();
    assert_eq!(assigned.desired_skills, ["deploy"]);
    assert!(assigned
        .skills
        .iter()
        .any(|s| s.key == "deploy" && s.desired));
    let read = grpc
        .get_agent_skills(call(
            &key,
            GetAgentSkillsRequest {
                agent_id: agent.clone(),
            },
        ))
        .await?
        .into_inner();
    let rest = node
        .admin
        .get(&format!("/api/agents/{agent}/skills"))
        .await?
        .ok()?;
    assert_eq!(rest["desiredSkills"], json!(read.desired_skills), "{rest}");
    let holders = grpc
        .get_skill(call(
            &key,
            GetSkillRequest {
                company_id: cid.clone(),
                skill_id: skill.id.clone(),
            },
        ))
        .await?
        .into_inner()
        .agent_ids;
    assert_eq!(holders, vec![agent.clone()]);
    let listed = grpc
        .list_skills(call(
            &key,
            ListSkillsRequest {
                company_id: cid.clone(),
            },
        ))
        .await?
        .into_inner()
        .skills;
    assert!(
        listed
            .iter()
            .flat_map(|s| &s.files)
            .all(|f| f.content.is_empty() && f.bytes > 0),
        "{listed:?}"
    );
    let deleted = grpc
        .delete_skill(call(
            &admin,
            DeleteSkillRequest {
                company_id: cid.clone(),
                skill_id: skill.id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(deleted.id, skill.id);
    let rest = node
        .admin
        .get(&format!("/api/companies/{cid}/skills/{}", skill.id))
        .await?;
    assert_eq!(rest.status.as_u16(), 404, "{:?}", rest.body);
    node.shutdown().await
}

/// An agent's config revisions over gRPC: what REST lists, read and rolled back the same way,
/// an administrator's only.
#[tokio::test]
async fn grpc_agent_config_revisions_match_rest() -> anyhow::Result<()> {
    let node = TestNode::start().await?;
    let admin = node.admin_token.clone();
    let mut grpc = control(&node).await?;
    let (agent, key) = node.agent("grpc-revised").await?;
    for command in ["v1", "v2"] {
        grpc.update_agent(call(
            &admin,
            pb::UpdateAgentRequest {
                agent_id: agent.clone(),
                adapter_config_json: Some(
                    json!({ "command": command, "env": { "TOKEN": { "type": "secret", "value": "hidden" } } })
                        .to_string(),
                ),
                ..Default::default()
            },
        ))
        .await?;
    }
    let listed = grpc
        .list_agent_config_revisions(call(
            &admin,
            pb::ListAgentConfigRevisionsRequest {
                agent_id: agent.clone(),
            },
        ))
        .await?
        .into_inner()
        .revisions;
    let rest = node
        .http()
        .with_token(&admin)
        .get(&format!("/api/agents/{agent}/config-revisions"))
        .await?
        .ok()?;
    assert_eq!(
        listed.iter().map(|r| r.id.clone()).collect::<Vec<_>>(),
        ids(&rest),
        "{rest}"
    );
    let first = listed.last().cloned().unwrap_or_default();
    assert_eq!(first.changed_keys, ["adapterConfig"]);
    assert!(
        !first.after_config_json.contains("hidden"),
        "{}",
        first.after_config_json
    );
    let after: serde_json::Value = serde_json::from_str(&first.after_config_json)?;
    assert_eq!(after["adapterConfig"]["command"], "v1", "{after}");
    let got = grpc
        .get_agent_config_revision(call(
            &admin,
            pb::GetAgentConfigRevisionRequest {
                agent_id: agent.clone(),
                revision_id: first.id.clone(),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(got, first);
    let rollback = pb::RollbackAgentConfigRequest {
        agent_id: agent.clone(),
        revision_id: first.id.clone(),
    };
    let (code, text) = refused(
        grpc.rollback_agent_config(call(&key, rollback.clone()))
            .await
            .expect_err("an agent rolls back its own configuration"),
    );
    assert_eq!(code, Code::PermissionDenied, "{text}");
    let rolled = grpc
        .rollback_agent_config(call(&admin, rollback))
        .await?
        .into_inner();
    let config: serde_json::Value = serde_json::from_str(&rolled.adapter_config_json)?;
    assert_eq!(config["command"], "v1", "{config}");
    let (code, text) = refused(
        grpc.get_agent_config_revision(call(
            &admin,
            pb::GetAgentConfigRevisionRequest {
                agent_id: agent,
                revision_id: "rev-404".into(),
            },
        ))
        .await
        .expect_err("an unknown revision"),
    );
    assert_eq!(code, Code::NotFound, "{text}");
    Ok(())
}

/// Roost's CLI over an agent's config revisions: the table, one revision's changes, a rollback,
/// and an agent key's refusal as a message and a non-zero exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roosts_cli_lists_shows_and_rolls_back_agent_config_revisions() -> anyhow::Result<()> {
    use crate::processes::{cli, stdout_json};
    let node = TestNode::start().await?;
    let base = format!("http://{}", node.server().http_addr());
    let admin = node.admin_token.clone();
    let (agent, key) = node.agent("cli-revised").await?;
    let http = node.http().with_token(&admin);
    for command in ["first", "second"] {
        http.patch(
            &format!("/api/agents/{agent}"),
            json!({ "adapterConfig": { "command": command } }),
        )
        .await?
        .ok()?;
    }
    let run = |args: &[&str]| cli(&base, &admin, args);
    let listed = stdout_json(&run(&["agent", "revisions", &agent, "--json"])?)?;
    let revisions = ids(&listed);
    assert_eq!(revisions.len(), 2, "{listed}");
    let table = run(&["agent", "revisions", &agent])?;
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("SOURCE") && table.contains(&revisions[1]),
        "{table}"
    );
    let shown = run(&["agent", "revision", &agent, &revisions[0]])?;
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(r#"adapterConfig: {"command":"first"} -> {"command":"second"}"#),
        "{shown}"
    );
    let rolled = stdout_json(&run(&[
        "agent",
        "rollback",
        &agent,
        &revisions[1],
        "--json",
    ])?)?;
    assert_eq!(rolled["adapterConfig"]["command"], "first", "{rolled}");
    let refused = cli(&base, &key, &["agent", "rollback", &agent, &revisions[1]])?;
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("administrator"), "{stderr}");
    Ok(())
}
