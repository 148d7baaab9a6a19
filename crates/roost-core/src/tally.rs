//! Counts of rows by one closed-enum field (an issue's status, a wake's reason), kept by apply
//! as rows change, so a reader (a metrics scrape) counts without walking every row under the
//! state's read lock, which apply's write lock waits behind.

use std::collections::BTreeMap;

/// How many rows hold each value; a value no row holds is absent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally(BTreeMap<&'static str, u64>);

impl Tally {
    /// A row moved from `old` (absent for a new row) to `new` (absent for a dropped row).
    pub(crate) fn moved(&mut self, old: Option<&'static str>, new: Option<&'static str>) {
        if old == new {
            return;
        }
        if let Some(old) = old {
            if let Some(n) = self.0.get_mut(old) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    self.0.remove(old);
                }
            }
        }
        if let Some(new) = new {
            *self.0.entry(new).or_default() += 1;
        }
    }

    /// How many rows hold `value`.
    pub fn get(&self, value: &str) -> u64 {
        self.0.get(value).copied().unwrap_or(0)
    }

    /// Each of `all`'s values with its count, in `all`'s order, zeros included (so a metric's
    /// series does not vanish when its last row moves on).
    pub fn of_each<T: Copy>(
        &self,
        all: &[T],
        name: fn(T) -> &'static str,
    ) -> Vec<(&'static str, u64)> {
        all.iter().map(|v| (name(*v), self.get(name(*v)))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_moving_between_values_keep_every_count_and_drop_empty_ones() {
        let mut t = Tally::default();
        t.moved(None, Some("todo"));
        t.moved(None, Some("todo"));
        t.moved(Some("todo"), Some("done"));
        t.moved(Some("done"), Some("done"));
        assert_eq!((t.get("todo"), t.get("done")), (1, 1));
        t.moved(Some("done"), None);
        assert_eq!(t.get("done"), 0);
        assert_eq!(t, {
            let mut only = Tally::default();
            only.moved(None, Some("todo"));
            only
        });
        assert_eq!(
            t.of_each(&["backlog", "todo"], |s| s),
            [("backlog", 0), ("todo", 1)]
        );
    }
}
