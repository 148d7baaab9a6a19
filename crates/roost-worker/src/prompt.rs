//! The prompt an agent reads: bootstrap text for a fresh session and the agent's memory (its
//! documents first, as they change least, then where it stands now), then why it was woken
//! (the issue and the new comments, oldest first), then a hand-off note when a saved session
//! could not be resumed. A resumed session gets only the wake: it already knows the rest.
//! The parts before the wake do not depend on the wake or the clock, so a model's prompt cache
//! keeps them from one run to the next.

use roost_core::{IssueStatus, Priority};
use roost_proto::v1::Assignment;
use roost_proto::ProtoEnum;

use crate::memory::Memory;

/// Used when the agent's adapter config has no `bootstrapPrompt`.
const DEFAULT_BOOTSTRAP: &str = "\
You are {name} (agent {id}), working for a company on Roost. Roost is your task board: use its \
REST API at $ROOST_API_URL with `Authorization: Bearer $ROOST_API_KEY` (also exported as \
PAPERCLIP_API_URL and PAPERCLIP_API_KEY). Each heartbeat: read your inbox \
(GET /api/agents/me/inbox-lite), check out the issue you work on \
(POST /api/issues/{issueId}/checkout), read its context \
(GET /api/issues/{issueId}/heartbeat-context), do the work, comment on what you did, and set \
the issue's status. A 409 means someone else holds the task: never retry it.";

/// The session the run resumes, if any, and why a saved one was dropped.
pub(crate) enum Session<'a> {
    Fresh,
    Resumed,
    /// The saved session `id` was refused (`why`); this is a fresh one.
    HandedOff {
        id: &'a str,
        why: &'a str,
    },
    /// The saved session was retired (`why`: it passed the agent's rotation limits); this is a
    /// fresh one.
    Rotated {
        why: &'a str,
    },
}

impl<'a> Session<'a> {
    /// The session the assignment asks for: its saved one resumed, else fresh (noting a
    /// retired one).
    pub(crate) fn assigned(a: &'a Assignment) -> Session<'a> {
        if !a.session_id.is_empty() {
            Session::Resumed
        } else if !a.session_rotated.is_empty() {
            Session::Rotated {
                why: &a.session_rotated,
            }
        } else {
            Session::Fresh
        }
    }
}

pub(crate) fn compose(
    a: &Assignment,
    session: Session<'_>,
    bootstrap: Option<&str>,
    memory: Option<&Memory>,
) -> String {
    let mut text = String::new();
    if !matches!(session, Session::Resumed) {
        let template = bootstrap.unwrap_or(DEFAULT_BOOTSTRAP);
        text.push_str(
            &template
                .replace("{name}", &a.agent_name)
                .replace("{id}", &a.agent_id),
        );
        text.push_str("\n\n");
        if let Some(memory) = memory {
            text.push_str(&memory.boot_text());
            text.push('\n');
            text.push_str(&memory.now_text());
            text.push('\n');
        }
    }
    text.push_str(&format!(
        "You were woken: {}.\n",
        crate::adapter::wake_reason(a)
    ));
    if let Some(issue_id) = &a.issue_id {
        match &a.issue {
            Some(i) => {
                text.push_str(&format!(
                    "Issue {} ({issue_id}): {} [{}, {}]\n",
                    i.identifier,
                    i.title,
                    IssueStatus::from_proto(i.status).map_or("", IssueStatus::as_str),
                    Priority::from_proto(i.priority).map_or("", Priority::as_str)
                ));
                if !i.description.is_empty() {
                    text.push_str(&format!("\n{}\n", i.description));
                }
            }
            None => text.push_str(&format!("Issue {issue_id}.\n")),
        }
    }
    if !a.comments.is_empty() {
        text.push_str("\nNew comments, oldest first:\n");
        for c in &a.comments {
            text.push_str(&format!("- {} ({}): {}\n", c.author, c.id, c.body));
        }
    }
    if a.comment_ids.len() > a.comments.len() {
        text.push_str(&format!(
            "({} comments in all; read the rest with GET /api/issues/{}/comments.)\n",
            a.comment_ids.len(),
            a.issue_id.as_deref().unwrap_or("")
        ));
    }
    if let Session::Rotated { why } = session {
        text.push_str(&format!(
            "\nNote: your previous session on this task was retired ({why}). This is a fresh \
             session: your memory above says where you left off; read the issue and its comments \
             through the API before you act.\n"
        ));
    }
    if let Session::HandedOff { id, why } = session {
        text.push_str(&format!(
            "\nNote: your previous session {id} on this task could not be resumed ({why}). \
             This is a fresh session: read the issue and its comments through the API to \
             catch up before you act.\n"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use roost_core::WakeReason;
    use roost_proto::v1::{IssueSummary, WakeComment};

    use super::*;

    fn assignment() -> Assignment {
        Assignment {
            agent_id: "a1".into(),
            agent_name: "coder".into(),
            issue_id: Some("i1".into()),
            wake_reason: WakeReason::IssueCommented.to_proto(),
            comment_ids: vec!["c1".into(), "c2".into(), "c3".into()],
            issue: Some(IssueSummary {
                identifier: "ACM-7".into(),
                title: "Fix the parser".into(),
                status: IssueStatus::InProgress.to_proto(),
                priority: Priority::High.to_proto(),
                description: "It drops the last line.".into(),
            }),
            comments: vec![
                WakeComment {
                    id: "c2".into(),
                    author: "u1".into(),
                    body: "first".into(),
                    created_at_ms: 1,
                },
                WakeComment {
                    id: "c3".into(),
                    author: "u1".into(),
                    body: "second".into(),
                    created_at_ms: 2,
                },
            ],
            ..Default::default()
        }
    }

    #[test]
    fn a_fresh_session_gets_the_bootstrap_and_the_wake_in_order() {
        let text = compose(&assignment(), Session::Fresh, None, None);
        assert!(text.starts_with("You are coder (agent a1)"), "{text}");
        let issue = text
            .find("Issue ACM-7 (i1): Fix the parser")
            .expect("issue");
        let first = text.find("(c2): first").expect("first comment");
        let second = text.find("(c3): second").expect("second comment");
        assert!(issue < first && first < second, "{text}");
        assert!(text.contains("3 comments in all"), "{text}");
        assert!(!text.contains("could not be resumed"));
    }

    #[test]
    fn a_rotated_session_starts_fresh_with_the_bootstrap_and_says_why() {
        let text = compose(
            &assignment(),
            Session::Rotated {
                why: "session s-1 was retired: it served 20 runs (sessionRotation.maxRuns 20)",
            },
            None,
            None,
        );
        assert!(text.starts_with("You are coder (agent a1)"), "{text}");
        let wake = text.find("You were woken").expect("wake");
        let note = text
            .find("your previous session on this task was retired (session s-1 was retired: it served 20 runs")
            .expect("note");
        assert!(wake < note, "{text}");
    }

    #[test]
    fn a_resumed_session_gets_only_the_wake_and_a_handed_off_one_gets_the_note() {
        let resumed = compose(&assignment(), Session::Resumed, None, None);
        assert!(
            resumed.starts_with("You were woken: issue_commented."),
            "{resumed}"
        );
        let handed = compose(
            &assignment(),
            Session::HandedOff {
                id: "s-old",
                why: "no conversation found",
            },
            Some("Boot {name}."),
            None,
        );
        assert!(handed.starts_with("Boot coder."), "{handed}");
        assert!(handed
            .contains("session s-old on this task could not be resumed (no conversation found)"));
    }
}
