//! Indexes of ids grouped under a key (a run's checkouts, an issue's pending wakes, the wakes
//! waiting on a run, an issue's comments): the one way to add an id, and to remove one so that
//! no empty group stays behind.

use std::collections::{BTreeMap, BTreeSet};

pub(crate) type SetIndex = BTreeMap<String, BTreeSet<String>>;

pub(crate) fn link(index: &mut SetIndex, key: &str, id: &str) {
    match index.get_mut(key) {
        Some(set) => {
            set.insert(id.to_string());
        }
        None => {
            index.insert(key.to_string(), BTreeSet::from([id.to_string()]));
        }
    }
}

pub(crate) fn unlink(index: &mut SetIndex, key: &str, id: &str) {
    if let Some(set) = index.get_mut(key) {
        set.remove(id);
        if set.is_empty() {
            index.remove(key);
        }
    }
}
