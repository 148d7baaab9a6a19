//! Linearizability of each issue's checkout history, modeled as a lock with a fencing token.
//!
//! The model, per issue: a holder (run, token) or none, the highest token issued so far, and
//! the runs that have ended. From the history it takes the `ok` and `unknown` checkouts and
//! releases of the issue and the ends of the runs involved (`failed` operations changed
//! nothing and are left out):
//!
//! - checkout by run `r` with token `t`: if free, `t` must exceed every token issued before
//!   and `r` becomes the holder; if `r` already holds, `t` must be its token (a repeat); if
//!   another run holds, or `r` has ended, it cannot succeed. An `ok` checkout without a token
//!   takes one known only to exceed the previous ones.
//! - release by `r` (or an administrator): frees the issue if `r` holds it or it is free;
//!   impossible while another run holds it or after `r` ended.
//! - run end: `r` has ended, and whatever it held is free.
//!
//! The search (Wing & Gong, with Lowe's memoization of visited configurations, as in Knossos)
//! looks for an order of the operations that respects real time (A before B if A returned
//! before B was called; equal times are concurrent) and in which every `ok` operation is legal.
//! An `unknown` operation may take effect at any time after its call, or never; the search
//! only tries the ones that can help, those that free the issue from its holder (an unknown
//! checkout, or the end of a run holding nothing, can only forbid later operations).
//! Configurations are remembered by the `ok` operations placed and the holder, and one is
//! skipped when an explored one with the same key had used no more of the still useful
//! unknown operations, issued no higher token and ended no more of the runs that still matter.
//!
//! Issues with more than [`SearchLimits::max_ops`] operations, or whose search explores more
//! than [`SearchLimits::max_states`] configurations, are reported as inconclusive ("too large
//! to check") instead of searched forever. Simulated histories of 1,000 operations with a
//! quarter timing out check in milliseconds.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

use crate::history::{Action, Op, OpId};
use crate::verdict::Verdict;

pub const NAME: &str = "checkout_linearizable";

/// Bounds on the search, per issue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchLimits {
    /// Issues with more `ok` and `unknown` operations than this are not searched.
    pub max_ops: usize,
    /// The search gives up after exploring this many configurations. Each costs time linear
    /// in the issue's operations: at the defaults a hopeless search of a few hundred
    /// operations gives up after about ten seconds in a debug build, one in a release build.
    pub max_states: usize,
}

impl Default for SearchLimits {
    fn default() -> Self {
        SearchLimits {
            max_ops: 1_000,
            max_states: 100_000,
        }
    }
}

pub fn check_checkout_linearizable(ops: &[Op], limits: &SearchLimits) -> Verdict {
    let mut verdict = Verdict::new(NAME);
    for (issue, lin_ops) in per_issue(ops) {
        if lin_ops.len() > limits.max_ops {
            verdict.inconclusive.push(format!(
                "issue {issue}: too large to check ({} operations, limit {})",
                lin_ops.len(),
                limits.max_ops
            ));
            continue;
        }
        let mut search = Search::new(&lin_ops, limits.max_states);
        match search.run() {
            Found::Yes => {}
            Found::TooLarge => verdict.inconclusive.push(format!(
                "issue {issue}: too large to check (gave up after {} configurations, {} \
                 operations)",
                limits.max_states,
                lin_ops.len()
            )),
            Found::No => {
                let (message, involved) = search.explain();
                verdict.violation(format!("issue {issue}"), message, involved);
            }
        }
    }
    verdict
}

/// An operation as the model sees it.
#[derive(Clone, Debug)]
struct LinOp {
    id: OpId,
    call: i64,
    /// `None`: unknown outcome, it may take effect any time after its call, or never.
    ret: Option<i64>,
    effect: Effect,
}

#[derive(Clone, Copy, Debug)]
enum Effect {
    Checkout { run: u32, token: Option<u64> },
    Release { run: Option<u32> },
    RunEnd { run: u32 },
}

/// Splits the history into each issue's operations, sorted by call time.
fn per_issue(ops: &[Op]) -> BTreeMap<&str, Vec<LinOp>> {
    let relevant = |op: &&Op| op.is_ok() || op.is_unknown();
    let mut runs: BTreeMap<&str, HashMap<&str, u32>> = BTreeMap::new();
    for op in ops.iter().filter(relevant) {
        let (issue, run) = match &op.action {
            Action::Checkout {
                issue_id, run_id, ..
            } => (issue_id, Some(run_id)),
            Action::Release { issue_id, run_id } => (issue_id, run_id.as_ref()),
            _ => continue,
        };
        let interned = runs.entry(issue).or_default();
        if let Some(run) = run {
            let next = interned.len() as u32;
            interned.entry(run).or_insert(next);
        }
    }
    let mut out = BTreeMap::new();
    for (issue, interned) in &runs {
        let mut lin: Vec<LinOp> = Vec::new();
        for op in ops.iter().filter(relevant) {
            let effect = match &op.action {
                Action::Checkout {
                    issue_id, run_id, ..
                } if issue_id == issue => Effect::Checkout {
                    run: interned[run_id.as_str()],
                    token: op.ok_result().and_then(|r| r.token),
                },
                Action::Release { issue_id, run_id } if issue_id == issue => Effect::Release {
                    run: run_id.as_deref().map(|run| interned[run]),
                },
                Action::RunEnd { run_id } => match interned.get(run_id.as_str()) {
                    Some(&run) => Effect::RunEnd { run },
                    None => continue,
                },
                _ => continue,
            };
            lin.push(LinOp {
                id: op.id,
                call: op.call_ns,
                ret: op.is_ok().then_some(op.return_ns),
                effect,
            });
        }
        lin.sort_by_key(|op| (op.call, op.id));
        out.insert(*issue, lin);
    }
    out
}

/// The lock's state.
#[derive(Clone, Debug)]
struct Model {
    /// The holding run and its token (`None`: unknown, at least `last`).
    holder: Option<(u32, Option<u64>)>,
    /// The highest token issued, or a lower bound on it after a checkout without a token.
    last: u64,
    /// Runs that have ended, as a bit set.
    ended: Vec<u64>,
}

impl Model {
    fn new() -> Self {
        Model {
            holder: None,
            last: 0,
            ended: Vec::new(),
        }
    }

    fn holds(&self, run: u32) -> bool {
        self.holder.is_some_and(|(holder, _)| holder == run)
    }

    fn has_ended(&self, run: u32) -> bool {
        let (word, bit) = (run as usize / 64, run % 64);
        self.ended.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }

    /// The state after `effect`, or `None` if it cannot happen now.
    ///
    /// An optional (unknown) operation is refused where taking effect could only restrict what
    /// follows, since not taking effect at all is then at least as good: an effect that changes
    /// nothing, any checkout (it takes the issue from others and raises the token floor, and
    /// what its run may do next it may do from a free issue too), and the end of a run that
    /// holds nothing (it only fences the run). What remains is what frees the issue.
    fn step(&self, effect: Effect, required: bool) -> Option<Model> {
        let unchanged = || required.then(|| self.clone());
        match effect {
            Effect::Checkout { .. } if !required => None,
            Effect::RunEnd { run } if !required && !self.holds(run) => None,
            Effect::Checkout { run, token } => {
                if self.has_ended(run) {
                    return None;
                }
                match self.holder {
                    None => {
                        let mut next = self.clone();
                        match token {
                            Some(t) if t <= self.last => return None,
                            Some(t) => (next.holder, next.last) = (Some((run, Some(t))), t),
                            None => (next.holder, next.last) = (Some((run, None)), self.last + 1),
                        }
                        Some(next)
                    }
                    Some((holder, held)) if holder == run => match (token, held) {
                        (Some(t), Some(h)) => (t == h).then(unchanged).flatten(),
                        (Some(t), None) if t >= self.last => {
                            let mut next = self.clone();
                            (next.holder, next.last) = (Some((run, Some(t))), t);
                            Some(next)
                        }
                        (Some(_), None) => None,
                        (None, _) => unchanged(),
                    },
                    Some(_) => None,
                }
            }
            Effect::Release { run } => {
                if run.is_some_and(|run| self.has_ended(run)) {
                    return None;
                }
                match self.holder {
                    None => unchanged(),
                    Some((holder, _)) if run.is_none_or(|run| run == holder) => {
                        let mut next = self.clone();
                        next.holder = None;
                        Some(next)
                    }
                    Some(_) => None,
                }
            }
            Effect::RunEnd { run } => {
                if self.has_ended(run) {
                    return unchanged();
                }
                let mut next = self.clone();
                let (word, bit) = (run as usize / 64, run % 64);
                if next.ended.len() <= word {
                    next.ended.resize(word + 1, 0);
                }
                next.ended[word] |= 1 << bit;
                if self.holds(run) {
                    next.holder = None;
                }
                Some(next)
            }
        }
    }
}

enum Found {
    Yes,
    No,
    TooLarge,
}

/// An explored configuration, beside its key (the `ok` operations placed and the holder).
struct Seen {
    last: u64,
    ended: Vec<u64>,
    unknowns_used: Vec<u64>,
}

impl Seen {
    /// Everything possible from `other` is possible from `self`: it has used no more unknown
    /// operations, issued no higher token and ended no more runs.
    fn covers(&self, other: &Seen) -> bool {
        self.last <= other.last
            && is_subset(&self.ended, &other.ended)
            && is_subset(&self.unknowns_used, &other.unknowns_used)
    }
}

fn is_subset(small: &[u64], large: &[u64]) -> bool {
    small
        .iter()
        .enumerate()
        .all(|(i, word)| word & !large.get(i).copied().unwrap_or(0) == 0)
}

/// One run's operations on the issue (indices into the search's operations).
#[derive(Clone, Default)]
struct RunOps {
    /// Its `ok` checkouts: only these can make it the holder.
    ok_checkouts: Vec<usize>,
    /// Its `ok` checkouts and releases: the operations its having ended can refuse.
    ok_fenced: Vec<usize>,
    /// Its `unknown` releases and end: what may free the issue from it. (Unknown checkouts
    /// are never worth applying, see [`Model::step`].)
    unknown: Vec<usize>,
}

struct Search<'a> {
    ops: &'a [LinOp],
    max_states: usize,
    /// Explored configurations: key → the variants seen. A configuration covered by one
    /// already explored (same key, see [`Seen::covers`]) cannot lead anywhere new.
    visited: HashMap<u128, Vec<Seen>>,
    states: usize,
    done: Vec<u64>,
    /// Bits of the `ok` operations (the rest are `unknown`).
    ok_mask: Vec<u64>,
    /// The `ok` operations, by call time.
    ok_ops: Vec<usize>,
    /// Each run's operations, by interned run.
    runs: Vec<RunOps>,
    /// Administrators' `unknown` releases.
    unknown_admin: Vec<usize>,
    ok_left: usize,
    ok_total: usize,
    path: Vec<usize>,
    /// The path that placed the most `ok` operations, and how many.
    best: Vec<usize>,
    best_ok: usize,
}

impl<'a> Search<'a> {
    fn new(ops: &'a [LinOp], max_states: usize) -> Self {
        let ok_total = ops.iter().filter(|op| op.ret.is_some()).count();
        let mut ok_mask = vec![0; ops.len().div_ceil(64)];
        let mut ok_ops = Vec::new();
        let mut runs: Vec<RunOps> = Vec::new();
        let mut unknown_admin = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            let ok = op.ret.is_some();
            if ok {
                ok_mask[i / 64] |= 1 << (i % 64);
                ok_ops.push(i);
            }
            let run = match op.effect {
                Effect::Release { run: None } => {
                    if !ok {
                        unknown_admin.push(i);
                    }
                    continue;
                }
                Effect::Checkout { run, .. }
                | Effect::Release { run: Some(run) }
                | Effect::RunEnd { run } => run as usize,
            };
            if runs.len() <= run {
                runs.resize(run + 1, RunOps::default());
            }
            let entry = &mut runs[run];
            match (op.effect, ok) {
                (Effect::Checkout { .. }, true) => {
                    entry.ok_checkouts.push(i);
                    entry.ok_fenced.push(i);
                }
                (Effect::Release { .. }, true) => entry.ok_fenced.push(i),
                (Effect::Release { .. } | Effect::RunEnd { .. }, false) => entry.unknown.push(i),
                _ => {}
            }
        }
        Search {
            ops,
            max_states,
            visited: HashMap::new(),
            states: 0,
            done: vec![0; ops.len().div_ceil(64)],
            ok_mask,
            ok_ops,
            runs,
            unknown_admin,
            ok_left: ok_total,
            ok_total,
            path: Vec::new(),
            best: Vec::new(),
            best_ok: 0,
        }
    }

    fn run(&mut self) -> Found {
        self.dfs(&Model::new())
    }

    fn is_done(&self, i: usize) -> bool {
        self.done[i / 64] & (1 << (i % 64)) != 0
    }

    fn flip(&mut self, i: usize) {
        self.done[i / 64] ^= 1 << (i % 64);
    }

    /// Records the configuration; false if an explored one already covers it.
    fn is_new(&mut self, model: &Model) -> bool {
        let mut low = DefaultHasher::new();
        let mut high = DefaultHasher::new();
        high.write_u8(0x5a);
        for hasher in [&mut low, &mut high] {
            for (word, mask) in self.done.iter().zip(&self.ok_mask) {
                hasher.write_u64(word & mask);
            }
            model.holder.hash(hasher);
        }
        let key = (u128::from(high.finish()) << 64) | u128::from(low.finish());
        let seen = self.variant(model);
        let variants = self.visited.entry(key).or_default();
        if variants.iter().any(|old| old.covers(&seen)) {
            return false;
        }
        variants.push(seen);
        self.states += 1;
        true
    }

    /// What tells configurations with the same key apart, reduced to what can still matter:
    /// an ended run only while its `ok` checkouts or releases are pending, a run's used
    /// `unknown` operations only while it holds the issue or may hold it again.
    fn variant(&self, model: &Model) -> Seen {
        let mut ended = vec![0u64; self.runs.len().div_ceil(64)];
        let mut unknowns_used = vec![0u64; self.done.len()];
        let mut mark_used = |i: usize, done: bool| {
            if done {
                unknowns_used[i / 64] |= 1 << (i % 64);
            }
        };
        for &i in &self.unknown_admin {
            mark_used(i, self.is_done(i));
        }
        for (r, run) in self.runs.iter().enumerate() {
            let id = r as u32;
            let any_pending = |list: &[usize]| list.iter().any(|&i| !self.is_done(i));
            if model.has_ended(id) {
                if any_pending(&run.ok_fenced) {
                    ended[r / 64] |= 1 << (r % 64);
                }
            } else if model.holds(id) || any_pending(&run.ok_checkouts) {
                for &i in &run.unknown {
                    mark_used(i, self.is_done(i));
                }
            }
        }
        Seen {
            last: model.last,
            ended,
            unknowns_used,
        }
    }

    /// The pending operations that may come next: those called no later than the earliest
    /// return of a pending `ok` operation; of the `unknown` ones, only those that may free the
    /// issue from its holder. `ok` ones first, earliest return first.
    fn candidates(&self, model: &Model) -> Vec<usize> {
        let pending = |i: &usize| !self.is_done(*i);
        let horizon = self
            .ok_ops
            .iter()
            .copied()
            .filter(pending)
            .filter_map(|i| self.ops[i].ret)
            .min()
            .unwrap_or(i64::MAX);
        let mut out: Vec<usize> = self
            .ok_ops
            .iter()
            .copied()
            .take_while(|&i| self.ops[i].call <= horizon)
            .filter(pending)
            .collect();
        out.sort_by_key(|&i| (self.ops[i].ret, i));
        if let Some((holder, _)) = model.holder {
            let of_holder = self
                .runs
                .get(holder as usize)
                .into_iter()
                .flat_map(|run| &run.unknown);
            out.extend(
                of_holder
                    .chain(&self.unknown_admin)
                    .copied()
                    .filter(pending)
                    .filter(|&i| self.ops[i].call <= horizon),
            );
        }
        out
    }

    fn dfs(&mut self, model: &Model) -> Found {
        if self.ok_left == 0 {
            return Found::Yes;
        }
        if !self.is_new(model) {
            return Found::No;
        }
        if self.states > self.max_states {
            return Found::TooLarge;
        }
        for i in self.candidates(model) {
            let op = &self.ops[i];
            let required = op.ret.is_some();
            let Some(next) = model.step(op.effect, required) else {
                continue;
            };
            self.flip(i);
            self.path.push(i);
            if required {
                self.ok_left -= 1;
                let placed = self.ok_total - self.ok_left;
                if placed > self.best_ok {
                    self.best_ok = placed;
                    self.best = self.path.clone();
                }
            }
            match self.dfs(&next) {
                Found::No => {}
                found => return found,
            }
            if required {
                self.ok_left += 1;
            }
            self.path.pop();
            self.flip(i);
        }
        Found::No
    }

    /// Describes a failed search: the longest linearizable prefix found and the acknowledged
    /// operation it could not be extended to.
    fn explain(&self) -> (String, Vec<OpId>) {
        let mut placed = vec![false; self.ops.len()];
        for &i in &self.best {
            placed[i] = true;
        }
        let stuck = (0..self.ops.len())
            .filter(|&i| !placed[i])
            .filter_map(|i| self.ops[i].ret.map(|ret| (ret, i)))
            .min()
            .map(|(_, i)| self.ops[i].id);
        let tail: Vec<OpId> = self.best[self.best.len().saturating_sub(3)..]
            .iter()
            .map(|&i| self.ops[i].id)
            .collect();
        let mut involved = tail.clone();
        involved.extend(stuck);
        let tail_text = if tail.is_empty() {
            "nothing".to_string()
        } else {
            let ids: Vec<String> = tail.iter().map(|id| id.to_string()).collect();
            format!("ops {}", ids.join(", "))
        };
        let message = format!(
            "not linearizable as a fenced lock: at most {} of {} acknowledged operations can be \
             ordered (last placed: {tail_text}); op {} cannot follow",
            self.best_ok,
            self.ok_total,
            stuck.map_or("?".to_string(), |id| id.to_string()),
        );
        (message, involved)
    }
}

#[cfg(test)]
mod tests;
