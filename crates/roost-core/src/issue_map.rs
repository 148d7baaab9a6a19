//! The issues by id, each boxed.
//!
//! Why boxed: an ordered map keeps its values inline in nodes of eleven slots, about a third of
//! them empty on average, so every issue paid for half an issue more of empty slot (an issue is
//! about 600 bytes). Boxed, a slot is one pointer, and leaves are small enough that a lookup's
//! walk over the keys reads fewer cache lines. Nothing outside `issue_index.rs` writes it: every
//! write goes through `State::put_issue`, which keeps the indexes.

use std::collections::BTreeMap;
use std::ops::Index;

use crate::entity::Issue;

#[derive(Clone, Debug, Default)]
pub struct IssueMap(BTreeMap<String, Box<Issue>>);

impl IssueMap {
    pub fn get(&self, id: &str) -> Option<&Issue> {
        self.0.get(id).map(|i| &**i)
    }

    pub fn contains_key(&self, id: &str) -> bool {
        self.0.contains_key(id)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every issue, in id order.
    pub fn values(&self) -> impl Iterator<Item = &Issue> {
        self.0.values().map(|i| &**i)
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.keys()
    }

    /// Writes `issue` under its id, reusing the old one's allocation if there is one.
    pub(crate) fn put(&mut self, issue: Issue) {
        match self.0.get_mut(&issue.id) {
            Some(slot) => **slot = issue,
            None => {
                self.0.insert(issue.id.clone(), Box::new(issue));
            }
        }
    }

    pub(crate) fn remove(&mut self, id: &str) -> Option<Issue> {
        self.0.remove(id).map(|i| *i)
    }
}

impl Index<&str> for IssueMap {
    type Output = Issue;

    /// Panics if there is no such issue, as a map's index does: for tests.
    fn index(&self, id: &str) -> &Issue {
        match self.get(id) {
            Some(i) => i,
            None => panic!("no issue {id}"),
        }
    }
}

impl serde::Serialize for IssueMap {
    /// As the map by id it is.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(id, i)| (id, &**i)))
    }
}
