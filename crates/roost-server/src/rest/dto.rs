//! Request bodies of the REST API, in Paperclip's camelCase. Unknown fields are refused.
//!
//! Paperclip's clients send every field of its request schemas (often their defaults), so
//! each body also lists the fields Paperclip defines that Roost does not use, as
//! `serde::de::IgnoredAny`: accepted whatever their value, never stored. A field that no
//! Paperclip schema has is still refused with a 400 naming it.

use std::collections::BTreeMap;

use roost_core::command::{AgentPatch, CompanyPatch, IssuePatch};
use roost_core::loop_breaker::LoopBreaker;
use roost_core::{
    AdapterType, AgentPermissions, CompanyStatus, HeartbeatPolicy, IssueStatus, PauseReason,
    Priority, RunStatus, SessionRotation,
};
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer};

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
pub(super) fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateCompany {
    pub name: String,
    pub issue_prefix: Option<String>,
    /// A monthly company budget (hard stop) when above 0.
    pub budget_monthly_cents: Option<u64>,
    pub description: Option<String>,
    /// Loop-breaker settings its agents inherit (Roost's; set by a second write).
    pub loop_breaker: Option<LoopBreaker>,
    pub default_responsible_user_id: Option<IgnoredAny>,
}

/// `PATCH /api/companies/{cid}` (Paperclip's `updateCompanySchema`).
#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchCompany {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<String>>,
    pub status: Option<CompanyStatus>,
    pub require_board_approval_for_new_agents: Option<bool>,
    /// A monthly company budget (hard stop) when above 0.
    pub budget_monthly_cents: Option<u64>,
    /// Roost derives spend from cost events; a value is refused (`rest/compat.rs`).
    pub spent_monthly_cents: Option<u64>,
    /// Replaces the company's loop-breaker settings (Roost's).
    pub loop_breaker: Option<LoopBreaker>,
    /// Minutes an issue may stay blocked before its assignee's manager is woken; 0 is off
    /// (Roost's, `roost-core/src/rules/org.rs`). `escalateBlockedAfterSecs` wins when both
    /// are sent.
    pub escalate_blocked_after_minutes: Option<u32>,
    pub escalate_blocked_after_secs: Option<u32>,
    /// Seconds a stranded issue stays quiet before its agent is woken again; 0 is off
    /// (Roost's, `roost-core/src/rules/recovery.rs`).
    pub recover_stranded_after_secs: Option<u32>,
    pub default_responsible_user_id: Option<IgnoredAny>,
    pub interaction_resolver_governance: Option<IgnoredAny>,
    pub feedback_data_sharing_enabled: Option<IgnoredAny>,
    pub feedback_data_sharing_consent_at: Option<IgnoredAny>,
    pub feedback_data_sharing_consent_by_user_id: Option<IgnoredAny>,
    pub feedback_data_sharing_terms_version: Option<IgnoredAny>,
    pub logo_asset_id: Option<IgnoredAny>,
}

impl PatchCompany {
    pub fn patch(&self) -> CompanyPatch {
        CompanyPatch {
            name: self.name.clone(),
            description: self.description.clone(),
            status: self.status,
            require_board_approval_for_new_agents: self.require_board_approval_for_new_agents,
            loop_breaker: self.loop_breaker,
            escalate_blocked_after_secs: self.escalate_blocked_after_secs.or(self
                .escalate_blocked_after_minutes
                .map(|m| m.saturating_mul(60))),
            recover_stranded_after_secs: self.recover_stranded_after_secs,
        }
    }
}

/// `PATCH /api/companies/{cid}/branding` (Paperclip's `updateCompanyBrandingSchema`).
#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompanyBranding {
    pub name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<String>>,
    pub logo_asset_id: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateAgent {
    pub name: String,
    pub role: Option<String>,
    pub title: Option<String>,
    pub adapter_type: Option<AdapterType>,
    pub adapter_config: Option<serde_json::Value>,
    pub heartbeat: Option<HeartbeatPolicy>,
    pub placement_labels: Option<BTreeMap<String, String>>,
    /// Paperclip's `runtimeConfig`: its `heartbeat` object sets the heartbeat policy.
    pub runtime_config: Option<serde_json::Value>,
    /// A monthly agent budget (hard stop) when above 0.
    pub budget_monthly_cents: Option<u64>,
    /// Loop-breaker settings over the company's (Roost's; set by a second write).
    pub loop_breaker: Option<LoopBreaker>,
    /// The agent's manager (Paperclip's; set by a second write, `rest/admin.rs`).
    pub reports_to: Option<String>,
    // Paperclip fields Roost does not use.
    icon: Option<IgnoredAny>,
    appearance: Option<IgnoredAny>,
    capabilities: Option<IgnoredAny>,
    desired_skills: Option<IgnoredAny>,
    instructions_bundle: Option<IgnoredAny>,
    default_environment_id: Option<IgnoredAny>,
    metadata: Option<IgnoredAny>,
    stored_session_id: Option<IgnoredAny>,
    apply_stored_claude_login: Option<IgnoredAny>,
    onboarding_first_agent: Option<IgnoredAny>,
    work_mode: Option<IgnoredAny>,
    /// Paperclip's grants (`canCreateAgents`, ...) at creation; Roost's are set by PATCH.
    permissions: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchAgent {
    pub name: Option<String>,
    pub role: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub title: Option<Option<String>>,
    pub adapter_type: Option<AdapterType>,
    pub adapter_config: Option<serde_json::Value>,
    pub heartbeat: Option<HeartbeatPolicy>,
    pub placement_labels: Option<BTreeMap<String, String>>,
    /// Replaces every grant: an administrator's (a ceo agent grants `canCreateAgents` alone,
    /// through `PATCH /api/agents/{id}/permissions`).
    pub permissions: Option<AgentPermissions>,
    /// When the agent's saved sessions are retired (runs, tokens, age; 0 is no limit).
    pub session_rotation: Option<SessionRotation>,
    /// Replaces the agent's loop-breaker settings (Roost's; absent fields inherit).
    pub loop_breaker: Option<LoopBreaker>,
    /// The most the agent's home files may hold, in bytes.
    pub home_max_bytes: Option<u64>,
    /// Paperclip's `runtimeConfig`: its `heartbeat` object changes the heartbeat policy.
    pub runtime_config: Option<serde_json::Value>,
    pub budget_monthly_cents: Option<u64>,
    /// The agent's manager; `null` clears it (`roost-core/src/rules/org.rs`).
    #[serde(default, deserialize_with = "nullable")]
    pub reports_to: Option<Option<String>>,
    // Paperclip fields Roost does not use.
    icon: Option<IgnoredAny>,
    appearance: Option<IgnoredAny>,
    capabilities: Option<IgnoredAny>,
    desired_skills: Option<IgnoredAny>,
    instructions_bundle: Option<IgnoredAny>,
    default_environment_id: Option<IgnoredAny>,
    metadata: Option<IgnoredAny>,
    stored_session_id: Option<IgnoredAny>,
    apply_stored_claude_login: Option<IgnoredAny>,
    work_mode: Option<IgnoredAny>,
    replace_adapter_config: Option<IgnoredAny>,
    status: Option<IgnoredAny>,
    spent_monthly_cents: Option<IgnoredAny>,
}

impl PatchAgent {
    /// The patch, with `heartbeat` (already merged from `runtimeConfig` by the caller).
    pub fn into_patch(self, heartbeat: Option<HeartbeatPolicy>) -> AgentPatch {
        AgentPatch {
            name: self.name,
            role: self.role,
            title: self.title,
            adapter_type: self.adapter_type,
            adapter_config: self.adapter_config,
            heartbeat,
            placement_labels: self.placement_labels,
            permissions: self.permissions,
            can_create_agents: None,
            session_rotation: self.session_rotation,
            loop_breaker: self.loop_breaker,
            home_max_bytes: self.home_max_bytes,
            reports_to: self.reports_to,
            rolled_back_from: None,
        }
    }
}

/// Paperclip's `updateAgentPermissionsSchema` (`PATCH /api/agents/{id}/permissions`).
#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentPermissionsBody {
    pub can_create_agents: bool,
    /// Required by Paperclip's schema. Roost does not restrict which agent assigns work to
    /// which (docs/paperclip.md), so there is nothing to grant.
    can_assign_tasks: bool,
    can_create_skills: Option<IgnoredAny>,
    trust_preset: Option<IgnoredAny>,
    authorization_policy: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PauseAgent {
    pub reason: Option<PauseReason>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Empty {}

/// `POST /api/agents/{id}/runtime-state/reset-session`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResetSession {
    pub task_key: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateKey {
    pub name: Option<String>,
}

/// Declares an issue body (create or update) with the fields of Paperclip's issue schemas that
/// Roost keeps without using appended (`roost_core::limits::PAPERCLIP_ISSUE_FIELDS`; a test
/// below checks the two lists agree): one list for both bodies, gathered by `kept()`. (serde's
/// `flatten` would collect them but cannot be combined with `deny_unknown_fields`, which names
/// a field no schema has.) `createdByUserId` is accepted and ignored: Roost sets its own.
macro_rules! with_paperclip_issue_fields {
    ($(#[$m:meta])* pub struct $name:ident { $($body:tt)* }) => {
        with_paperclip_issue_fields!(@emit [$(#[$m])*] $name { $($body)* } [
            project_workspace_id,
            team_id,
            inherit_execution_workspace_from_issue_id,
            estimate,
            request_depth,
            assignee_adapter_overrides,
            execution_policy,
            execution_workspace_id,
            execution_workspace_preference,
            execution_workspace_settings,
            label_ids,
            allow_duplicate,
            acceptance_criteria,
            block_parent_until_done,
            interrupt,
            hidden_at,
            review_request,
            unblock_descriptor,
            work_mode,
            harness_kind,
            review_policy,
            responsible_user_id,
            watchdog_discovery,
            watchdog,
            initial_plan,
            onboarding_first_task,
            comment_client_request_id,
            attachment_ids,
            on_behalf_of_user_id,
            review_interaction_id,
            defer_wake_for_goal,
        ]);
    };
    (@emit [$(#[$m:meta])*] $name:ident { $($body:tt)* } [$($kept:ident),* $(,)?]) => {
        $(#[$m])*
        pub struct $name {
            $($body)*
            $(
                #[serde(default, deserialize_with = "nullable")]
                $kept: Option<Option<serde_json::Value>>,
            )*
            created_by_user_id: Option<IgnoredAny>,
        }

        impl $name {
            /// The kept Paperclip fields sent, by their camelCase names; `null` removes one.
            pub fn kept(&mut self) -> Option<BTreeMap<String, serde_json::Value>> {
                let mut kept = BTreeMap::new();
                $(
                    if let Some(v) = self.$kept.take() {
                        kept.insert(camel_case(stringify!($kept)), v.unwrap_or_default());
                    }
                )*
                (!kept.is_empty()).then_some(kept)
            }

            /// The kept fields' names, for the test that they match the core's list.
            #[cfg(test)]
            pub fn kept_names() -> Vec<String> {
                vec![$(camel_case(stringify!($kept))),*]
            }
        }
    };
}

/// `label_ids` → `labelIds`.
fn camel_case(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Paperclip's `multilineTextSchema` for the texts people and agents write (descriptions,
/// comments, documents, approval notes): a line break escaped twice, as a shell-quoted `curl`
/// body easily does (a backslash and an `n` in the string), is read as a line break.
pub fn multiline(text: String) -> String {
    if !text.contains('\\') {
        return text;
    }
    text.replace("\\r\\n", "\n")
        .replace("\\n", "\n")
        .replace("\\r", "\n")
}

with_paperclip_issue_fields! {
    #[derive(Deserialize)]
    #[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct CreateIssue {
        pub title: String,
        pub description: Option<String>,
        pub status: Option<IssueStatus>,
        pub priority: Option<Priority>,
        pub assignee_agent_id: Option<String>,
        pub assignee_user_id: Option<String>,
        pub parent_id: Option<String>,
        pub blocked_by_issue_ids: Option<Vec<String>>,
        pub billing_code: Option<String>,
        pub project_id: Option<String>,
        pub goal_id: Option<String>,
        /// Paperclip's body form of the `Idempotency-Key` header (the header wins).
        pub idempotency_key: Option<String>,
    }
}

impl From<CreateIssue> for IssuePatch {
    fn from(mut c: CreateIssue) -> Self {
        let paperclip = c.kept();
        IssuePatch {
            title: Some(c.title),
            description: c.description.map(multiline).map(Some),
            status: c.status,
            priority: c.priority,
            assignee_agent_id: c.assignee_agent_id.map(Some),
            assignee_user_id: c.assignee_user_id.map(Some),
            parent_id: c.parent_id.map(Some),
            blocked_by_issue_ids: c.blocked_by_issue_ids,
            billing_code: c.billing_code.map(Some),
            project_id: c.project_id.map(Some),
            goal_id: c.goal_id.map(Some),
            // Taken from `executionPolicy` by the API (`api/issues.rs`).
            monitor: None,
            paperclip,
        }
    }
}

with_paperclip_issue_fields! {
    #[derive(Deserialize)]
    #[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
    #[serde(rename_all = "camelCase", deny_unknown_fields)]
    pub struct PatchIssue {
        pub title: Option<String>,
        #[serde(default, deserialize_with = "nullable")]
        pub description: Option<Option<String>>,
        pub status: Option<IssueStatus>,
        pub priority: Option<Priority>,
        #[serde(default, deserialize_with = "nullable")]
        pub assignee_agent_id: Option<Option<String>>,
        #[serde(default, deserialize_with = "nullable")]
        pub assignee_user_id: Option<Option<String>>,
        #[serde(default, deserialize_with = "nullable")]
        pub parent_id: Option<Option<String>>,
        pub blocked_by_issue_ids: Option<Vec<String>>,
        #[serde(default, deserialize_with = "nullable")]
        pub billing_code: Option<Option<String>>,
        #[serde(default, deserialize_with = "nullable")]
        pub project_id: Option<Option<String>>,
        #[serde(default, deserialize_with = "nullable")]
        pub goal_id: Option<Option<String>>,
        pub comment: Option<String>,
        /// Reopen a `done` or `cancelled` issue (to `todo`) unless `status` says otherwise.
        pub reopen: Option<bool>,
        /// Paperclip's "resume the assignee's work": reopens like `reopen`.
        pub resume: Option<bool>,
    }
}

impl PatchIssue {
    pub fn split(mut self) -> (IssuePatch, Option<String>) {
        let paperclip = self.kept();
        let patch = IssuePatch {
            title: self.title,
            description: self.description.map(|d| d.map(multiline)),
            status: self.status,
            priority: self.priority,
            assignee_agent_id: self.assignee_agent_id,
            assignee_user_id: self.assignee_user_id,
            parent_id: self.parent_id,
            blocked_by_issue_ids: self.blocked_by_issue_ids,
            billing_code: self.billing_code,
            project_id: self.project_id,
            goal_id: self.goal_id,
            monitor: None,
            paperclip,
        };
        (patch, self.comment.map(multiline))
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Checkout {
    pub agent_id: String,
    pub expected_statuses: Vec<IssueStatus>,
}

#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NewComment {
    pub body: String,
    /// Reopen a `done` or `cancelled` issue (to `todo`) with the comment.
    pub reopen: Option<bool>,
    /// Paperclip's "resume the assignee's work": reopens like `reopen`.
    pub resume: Option<bool>,
    interrupt: Option<IgnoredAny>,
    client_request_id: Option<IgnoredAny>,
    attachment_ids: Option<IgnoredAny>,
    on_behalf_of_user_id: Option<IgnoredAny>,
    author_type: Option<IgnoredAny>,
    presentation: Option<IgnoredAny>,
    metadata: Option<IgnoredAny>,
}

impl NewComment {
    pub fn reopens(&self) -> bool {
        self.reopen == Some(true) || self.resume == Some(true)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartRun {
    pub issue_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FinishRun {
    pub status: RunStatus,
    pub error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IssueListQuery {
    /// Comma-separated statuses.
    pub status: Option<String>,
    pub assignee_agent_id: Option<String>,
    pub parent_id: Option<String>,
    /// Paperclip's alias of `parentId`.
    pub parent_issue_id: Option<String>,
    pub project_id: Option<String>,
    /// Only issues that carry this label (Paperclip's `labelId`).
    pub label_id: Option<String>,
    /// Text in the title, identifier or description (Paperclip's `q`).
    pub q: Option<String>,
    pub offset: Option<usize>,
    pub limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommentListQuery {
    pub after: Option<String>,
    /// Paperclip's name for `after`.
    pub after_comment_id: Option<String>,
    pub order: Option<String>,
    pub limit: Option<u32>,
}

/// `DELETE /api/issues/{id}/comments/{commentId}`: Paperclip's `mode` is `delete` (the
/// default) or `cancel` (take back a comment still queued for a run, which Roost does not keep).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommentDeleteQuery {
    pub mode: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeartbeatContextQuery {
    pub wake_comment_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunLogQuery {
    pub offset: Option<u64>,
    pub limit_bytes: Option<usize>,
    pub follow: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunListQuery {
    pub agent_id: Option<String>,
    pub limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ActivityQuery {
    pub before: Option<u64>,
    pub limit: Option<u32>,
    /// Entries this agent made.
    pub agent_id: Option<String>,
    pub entity_type: Option<String>,
    pub entity_id: Option<String>,
}

#[derive(Deserialize)]
#[allow(dead_code)] // Paperclip's fields Roost accepts and ignores are never read.
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Wakeup {
    /// An issue id or `PREFIX-N` identifier.
    pub issue_id: Option<String>,
    /// Free text, as in Paperclip; `routine` makes a routine wake.
    pub reason: Option<String>,
    pub payload: Option<serde_json::Value>,
    pub idempotency_key: Option<String>,
    /// Paperclip's `timer|assignment|on_demand|automation`; checked, not used.
    pub source: Option<WakeSource>,
    pub trigger_detail: Option<TriggerDetail>,
    /// Start the run without resuming a saved session.
    pub force_fresh_session: Option<bool>,
    failed_run_id: Option<IgnoredAny>,
    debug: Option<IgnoredAny>,
}

#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)] // Checked for Paperclip's values, not used.
#[serde(rename_all = "snake_case")]
pub enum WakeSource {
    Timer,
    Assignment,
    OnDemand,
    Automation,
}

#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)] // Checked for Paperclip's values, not used.
#[serde(rename_all = "snake_case")]
pub enum TriggerDetail {
    Manual,
    Ping,
    Callback,
    System,
}

impl Wakeup {
    /// The wake reason: `routine` when `reason` says so, else `on_demand` (an API wakeup is
    /// one or the other; any other `reason` is free text, as in Paperclip, and so is `source`).
    pub fn wake_reason(&self) -> roost_core::WakeReason {
        use roost_core::WakeReason;
        match self.reason.as_deref().map(str::parse::<WakeReason>) {
            Some(Ok(WakeReason::Routine)) => WakeReason::Routine,
            _ => WakeReason::OnDemand,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WakeListQuery {
    pub agent_id: Option<String>,
    /// Comma-separated wake statuses.
    pub status: Option<String>,
    pub issue_id: Option<String>,
    pub limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateJoinToken {
    pub name: Option<String>,
    /// Seconds until it admits no more workers.
    pub ttl_secs: Option<u64>,
    /// How many distinct worker ids it admits, each bound to it (default: any number).
    pub max_uses: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kept_issue_fields_are_the_cores_list() {
        let core: Vec<String> = roost_core::limits::PAPERCLIP_ISSUE_FIELDS
            .iter()
            .map(|f| f.to_string())
            .collect();
        assert_eq!(CreateIssue::kept_names(), core);
        assert_eq!(PatchIssue::kept_names(), core);
    }

    #[test]
    fn paperclip_fields_are_kept_and_null_removes_one() {
        let body = serde_json::json!({
            "title": "t", "labelIds": ["l1"], "executionPolicy": {"mode": "x"},
            "createdByUserId": "someone"
        });
        let create: CreateIssue = serde_json::from_value(body).expect("a Paperclip body");
        let patch = IssuePatch::from(create);
        let kept = patch.paperclip.expect("kept fields");
        assert_eq!(kept["labelIds"], serde_json::json!(["l1"]));
        assert_eq!(kept.len(), 2, "createdByUserId is not kept: {kept:?}");
        let update: PatchIssue =
            serde_json::from_value(serde_json::json!({ "labelIds": null })).expect("a patch");
        let (patch, _) = update.split();
        assert_eq!(
            patch.paperclip.expect("kept")["labelIds"],
            serde_json::Value::Null
        );
        let unknown: Result<CreateIssue, _> =
            serde_json::from_value(serde_json::json!({ "title": "t", "labelz": [] }));
        assert!(
            unknown.is_err(),
            "a field no Paperclip schema has is refused"
        );
    }
}
