//! The derived indexes over issues (by company and number, assignee, parent, blocker, open
//! work, checkout holder, label, comments): how an issue's write and its deletion keep them, and the
//! reads that walk them, so that no rule or API read scans every issue.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::entity::{Issue, IssueStatus};
use crate::label::{label_ids, LABEL_IDS};
use crate::set_index::{link, unlink, SetIndex};
use crate::state::State;
use crate::state_hash::Table;

/// An issue's key in the open index by company.
fn by_number(x: &Issue) -> (&str, u64) {
    (x.company_id.as_str(), x.issue_number)
}

/// An issue's key in the open index by assignee, if it has one.
fn by_assignee(x: &Issue) -> Option<(&str, u64)> {
    x.assignee_agent_id.as_deref().map(|a| (a, x.issue_number))
}

/// Removes `old`'s entries from the indexes that follow an issue's assignee, parent and
/// checkout (a field borrow each, so the caller may hold `old` from `State::issues`).
fn unlink_issue(
    by_assignee: &mut BTreeMap<(String, u64), String>,
    by_parent: &mut BTreeMap<(String, u64), String>,
    checkouts_by_run: &mut SetIndex,
    old: &Issue,
) {
    if let Some(agent) = &old.assignee_agent_id {
        by_assignee.remove(&(agent.clone(), old.issue_number));
    }
    if let Some(parent) = &old.parent_id {
        by_parent.remove(&(parent.clone(), old.issue_number));
    }
    if let Some(c) = &old.checkout {
        unlink(checkouts_by_run, &c.run_id, &old.id);
    }
}

/// The ids a set index groups under `key`, in id order.
fn ids_under<'a>(index: &'a SetIndex, key: &str) -> impl Iterator<Item = &'a str> {
    index.get(key).into_iter().flatten().map(String::as_str)
}

/// The ids one index lists under `owner`, in issue-number order.
fn ids_in<'a>(
    index: &'a BTreeMap<(String, u64), String>,
    owner: &str,
) -> impl Iterator<Item = &'a str> {
    let range = (owner.to_string(), 0)..=(owner.to_string(), u64::MAX);
    index.range(range).map(|(_, id)| id.as_str())
}

impl State {
    /// Writes an issue and moves its entries in every index.
    pub(crate) fn put_issue(&mut self, i: Arc<Issue>) {
        // Most writes (checkout, release, status) keep the issue's identity: its number
        // index entry is then already right, and re-inserting it would allocate per write.
        // One descent of the issue map for the old row: at 10^6 issues each lookup is a walk of
        // 36-character keys, and this runs on every node for every write of an issue.
        let old = self.issues.get(&i.id);
        let was_open = old.as_ref().is_some_and(|o| !o.status.is_terminal());
        let is_open = !i.status.is_terminal();
        if was_open != is_open {
            let open = self.open_issues.entry(i.company_id.clone()).or_default();
            *open = if was_open {
                open.saturating_sub(1)
            } else {
                open.saturating_add(1)
            };
        }
        self.issue_statuses.moved(
            old.as_ref().map(|o| o.status.as_str()),
            Some(i.status.as_str()),
        );
        let old_open = old.as_deref().filter(|o| !o.status.is_terminal());
        let new_open = is_open.then_some(&*i);
        // Compared by reference: a checkout or release keeps both keys, and allocates none.
        if old_open.map(by_number) != new_open.map(by_number) {
            if let Some(o) = old_open {
                self.open_by_number
                    .remove(&(o.company_id.clone(), o.issue_number));
            }
            if let Some(n) = new_open {
                self.open_by_number
                    .insert((n.company_id.clone(), n.issue_number), n.id.clone());
            }
        }
        let (old_key, new_key) = (
            old_open.and_then(by_assignee),
            new_open.and_then(by_assignee),
        );
        if old_key != new_key {
            if let Some((agent, number)) = old_key {
                self.open_by_assignee.remove(&(agent.to_string(), number));
            }
            if let Some((agent, number)) = new_key {
                self.open_by_assignee
                    .insert((agent.to_string(), number), i.id.clone());
            }
        }
        let old_blockers = old.as_ref().map(|o| &o.blocked_by_issue_ids);
        if old_blockers != Some(&i.blocked_by_issue_ids) {
            for b in old_blockers.into_iter().flatten() {
                self.issues_blocked_by.remove(&(b.clone(), i.id.clone()));
            }
            for b in &i.blocked_by_issue_ids {
                self.issues_blocked_by.insert((b.clone(), i.id.clone()));
            }
        }
        let same_identity = old.as_ref().is_some_and(|o| {
            o.identifier == i.identifier
                && o.company_id == i.company_id
                && o.issue_number == i.issue_number
        });
        if let Some(old) = &old {
            unlink_issue(
                &mut self.issues_by_assignee,
                &mut self.issues_by_parent,
                &mut self.checkouts_by_run,
                old,
            );
        }
        let old_goal = old.as_ref().and_then(|o| o.goal_id.as_deref());
        if old_goal != i.goal_id.as_deref() {
            if let Some(goal) = old_goal {
                unlink(&mut self.issues_by_goal, goal, &i.id);
            }
            if let Some(goal) = &i.goal_id {
                link(&mut self.issues_by_goal, goal, &i.id);
            }
        }
        let old_project = old.as_ref().and_then(|o| o.project_id.as_deref());
        if old_project != i.project_id.as_deref() {
            if let Some(project) = old_project {
                unlink(&mut self.issues_by_project, project, &i.id);
            }
            if let Some(project) = &i.project_id {
                link(&mut self.issues_by_project, project, &i.id);
            }
        }
        let old_labels = old.as_ref().map(|o| o.paperclip.get(LABEL_IDS));
        if old_labels != Some(i.paperclip.get(LABEL_IDS)) {
            if let Some(o) = &old {
                for label in label_ids(&o.paperclip) {
                    unlink(&mut self.issues_by_label, label, &i.id);
                }
            }
            for label in label_ids(&i.paperclip) {
                link(&mut self.issues_by_label, label, &i.id);
            }
        }
        if let Some(c) = &i.checkout {
            link(&mut self.checkouts_by_run, &c.run_id, &i.id);
        }
        if !same_identity {
            match self.issues_by_number.get_mut(&i.company_id) {
                Some(numbers) => {
                    numbers.insert(i.issue_number, i.id.clone());
                }
                None => {
                    let numbers = BTreeMap::from([(i.issue_number, i.id.clone())]);
                    self.issues_by_number.insert(i.company_id.clone(), numbers);
                }
            }
        }
        if let Some(agent) = &i.assignee_agent_id {
            self.issues_by_assignee
                .insert((agent.clone(), i.issue_number), i.id.clone());
        }
        if let Some(parent) = &i.parent_id {
            self.issues_by_parent
                .insert((parent.clone(), i.issue_number), i.id.clone());
        }
        if i.status == IssueStatus::Blocked {
            self.blocked_issues.insert(i.id.clone());
        } else {
            self.blocked_issues.remove(&i.id);
        }
        if i.monitor.is_scheduled() {
            self.monitored_issues.insert(i.id.clone());
        } else {
            self.monitored_issues.remove(&i.id);
        }
        self.issues.put(i);
    }

    /// Drops an issue, its comments' refs and every index entry naming it.
    pub(crate) fn delete_issue(&mut self, id: &str) {
        let Some(old) = self.issues.remove(id) else {
            return;
        };
        self.blocked_issues.remove(id);
        self.monitored_issues.remove(id);
        self.issue_statuses.moved(Some(old.status.as_str()), None);
        if !old.status.is_terminal() {
            self.open_by_number
                .remove(&(old.company_id.clone(), old.issue_number));
            if let Some(agent) = &old.assignee_agent_id {
                self.open_by_assignee
                    .remove(&(agent.clone(), old.issue_number));
            }
            if let Some(open) = self.open_issues.get_mut(&old.company_id) {
                *open = open.saturating_sub(1);
            }
        }
        unlink_issue(
            &mut self.issues_by_assignee,
            &mut self.issues_by_parent,
            &mut self.checkouts_by_run,
            &old,
        );
        if let Some(numbers) = self.issues_by_number.get_mut(&old.company_id) {
            numbers.remove(&old.issue_number);
            if numbers.is_empty() {
                self.issues_by_number.remove(&old.company_id);
            }
        }
        for b in &old.blocked_by_issue_ids {
            self.issues_blocked_by.remove(&(b.clone(), old.id.clone()));
        }
        if let Some(goal) = &old.goal_id {
            unlink(&mut self.issues_by_goal, goal, &old.id);
        }
        if let Some(project) = &old.project_id {
            unlink(&mut self.issues_by_project, project, &old.id);
        }
        for label in label_ids(&old.paperclip) {
            unlink(&mut self.issues_by_label, label, &old.id);
        }
        for cid in self.comments_of_issue.remove(id).unwrap_or_default() {
            self.comments.remove(&cid);
            self.row_digests.touch(Table::Comment, &cid);
        }
    }

    /// Looks an issue up by its id or by its `PREFIX-N` identifier (any case).
    pub fn issue_by_ref(&self, id_or_identifier: &str) -> Option<Cow<'_, Issue>> {
        self.issues
            .get(id_or_identifier)
            .or_else(|| self.issue_by_identifier(id_or_identifier))
    }

    /// An identifier is its company's prefix (fixed at the company's creation, letters and
    /// digits) and its issue number (`rules/issue.rs` writes it so), so it resolves through the
    /// company and number indexes; the issue's own identifier is compared last, so a spelling
    /// that names the same number differently (`ACM-07`) finds nothing, as it never did.
    fn issue_by_identifier(&self, identifier: &str) -> Option<Cow<'_, Issue>> {
        let upper = identifier.to_ascii_uppercase();
        let (prefix, number) = upper.rsplit_once('-')?;
        let number: u64 = number.parse().ok()?;
        let company = self.company_by_prefix.get(prefix)?;
        let id = self.issues_by_number.get(company)?.get(&number)?;
        self.issues.get(id).filter(|i| i.identifier == upper)
    }

    /// The ids of a company's issues in issue-number order, none read: filter by
    /// [`IssueMap::status`](crate::issue_map::IssueMap::status) before reading a closed one.
    pub fn issue_ids_of_company<'a>(&'a self, company_id: &str) -> impl Iterator<Item = &'a str> {
        (self.issues_by_number.get(company_id).into_iter())
            .flat_map(BTreeMap::values)
            .map(String::as_str)
    }

    /// The ids of a company's open issues, in issue-number order.
    pub fn open_issue_ids_of_company<'a>(
        &'a self,
        company_id: &str,
    ) -> impl Iterator<Item = &'a str> {
        ids_in(&self.open_by_number, company_id)
    }

    /// The ids of the open issues assigned to `agent_id`, in issue-number order.
    pub fn open_issue_ids_assigned_to<'a>(
        &'a self,
        agent_id: &str,
    ) -> impl Iterator<Item = &'a str> {
        ids_in(&self.open_by_assignee, agent_id)
    }

    /// The issues `ids` name that exist, each read if it must be.
    fn read_each<'a>(
        &'a self,
        ids: impl Iterator<Item = &'a str> + 'a,
    ) -> impl Iterator<Item = Cow<'a, Issue>> {
        ids.filter_map(|id| self.issues.get(id))
    }

    /// The ids of the issues assigned to `agent_id`, in issue-number order, none read.
    pub fn issue_ids_assigned_to<'a>(&'a self, agent_id: &str) -> impl Iterator<Item = &'a str> {
        ids_in(&self.issues_by_assignee, agent_id)
    }

    /// The open issues assigned to `agent_id`, in issue-number order.
    pub fn open_issues_assigned_to<'a>(
        &'a self,
        agent_id: &str,
    ) -> impl Iterator<Item = Cow<'a, Issue>> {
        self.issues_in(&self.open_by_assignee, agent_id)
    }

    /// The children of `issue_id`, in issue-number order.
    pub fn children_of<'a>(&'a self, issue_id: &str) -> impl Iterator<Item = Cow<'a, Issue>> {
        self.issues_in(&self.issues_by_parent, issue_id)
    }

    /// The ids of the children of `issue_id`, in issue-number order, none read.
    pub fn child_ids_of<'a>(&'a self, issue_id: &str) -> impl Iterator<Item = &'a str> {
        ids_in(&self.issues_by_parent, issue_id)
    }

    /// The issues that name `issue_id` among their blockers, in id order.
    pub fn issues_blocked_by<'a>(&'a self, issue_id: &str) -> impl Iterator<Item = Cow<'a, Issue>> {
        self.read_each(self.issue_ids_blocked_by(issue_id))
    }

    /// The ids of the issues that name `issue_id` among their blockers, in id order, none read.
    pub fn issue_ids_blocked_by<'a>(&'a self, issue_id: &str) -> impl Iterator<Item = &'a str> {
        let blocker = issue_id.to_string();
        self.issues_blocked_by
            .range((blocker.clone(), String::new())..)
            .take_while(move |(b, _)| *b == blocker)
            .map(|(_, id)| id.as_str())
    }

    /// The issues one index lists under `owner`, in issue-number order.
    fn issues_in<'a>(
        &'a self,
        index: &'a BTreeMap<(String, u64), String>,
        owner: &str,
    ) -> impl Iterator<Item = Cow<'a, Issue>> {
        self.read_each(ids_in(index, owner))
    }

    /// The issues that serve goal `goal_id`, in id order.
    pub fn issues_of_goal<'a>(&'a self, goal_id: &str) -> impl Iterator<Item = Cow<'a, Issue>> {
        self.issues_under(&self.issues_by_goal, goal_id)
    }

    /// The issues of project `project_id`, in id order.
    pub fn issues_of_project<'a>(
        &'a self,
        project_id: &str,
    ) -> impl Iterator<Item = Cow<'a, Issue>> {
        self.issues_under(&self.issues_by_project, project_id)
    }

    /// The issues that carry label `label_id`, in id order.
    pub fn issues_with_label<'a>(&'a self, label_id: &str) -> impl Iterator<Item = Cow<'a, Issue>> {
        self.issues_under(&self.issues_by_label, label_id)
    }

    /// The ids of the issues that carry label `label_id`, in id order.
    pub fn issue_ids_with_label<'a>(&'a self, label_id: &str) -> impl Iterator<Item = &'a str> {
        ids_under(&self.issues_by_label, label_id)
    }

    fn issues_under<'a>(
        &'a self,
        index: &'a SetIndex,
        key: &str,
    ) -> impl Iterator<Item = Cow<'a, Issue>> {
        self.read_each(ids_under(index, key))
    }

    /// Lets issue `id` leave memory if it is closed, read back from `state.db` when asked for
    /// (`issue_map.rs`). The store calls it once it has written the issue's row as it is now.
    pub fn forget_closed_issue(&mut self, id: &str) -> bool {
        self.issues.forget_closed(id)
    }

    /// Puts a persisted issue while a store loads the state (after [`State::from_rows`]), and
    /// lets it go at once if it is closed and closed issues are read from a store.
    pub fn load_issue(&mut self, issue: Issue) {
        let id = issue.id.clone();
        self.put(crate::state::Change::Issue(Arc::new(issue)));
        self.issues.forget_closed(&id);
    }

    /// Reads closed issues from `rows` from now on, and lets those in memory go: a store that
    /// has just loaded the state from the rows `rows` reads.
    pub fn read_closed_issues_from(&mut self, rows: std::sync::Arc<dyn crate::IssueRows>) {
        self.issues.read_closed_from(rows);
        self.issues.forget_all_closed();
    }

    /// Issues whose checkout is held by `run_id`.
    pub fn issues_checked_out_by(&self, run_id: &str) -> impl Iterator<Item = Cow<'_, Issue>> {
        self.issues_under(&self.checkouts_by_run, run_id)
    }

    /// The ids of the issues whose checkout `run_id` holds, none read.
    pub fn issue_ids_checked_out_by(&self, run_id: &str) -> impl Iterator<Item = &str> {
        ids_under(&self.checkouts_by_run, run_id)
    }
}
