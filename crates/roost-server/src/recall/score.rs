//! Hybrid ranking of memory search hits, pure: bm25 from the index and the
//! cosine similarity of embeddings, merged by a weighted sum. No IO; the embeddings come from
//! `recall/mod.rs`.
//!
//! For each candidate, with `w` the vector weight (0 to 1):
//!
//! ```text
//! score = (1 - w) * bm25 / max_bm25  +  w * max(cosine, 0)
//! ```
//!
//! where `bm25` is the index's score negated (higher is better, 0 for a candidate that matched
//! no word: one of the agent's newest texts) and `max_bm25` the best among the candidates, so
//! both parts lie in 0..1. A candidate that matched no word is kept only if its cosine reaches
//! `min_similarity`. Ties go to the newer text, then to the id.

use std::cmp::Ordering;
use std::collections::HashSet;

use roost_core::views::{MemoryRanking, MemorySearchHit};

/// How the two scores are weighed ([`rank`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weights {
    /// The share of the vector score, 0 to 1.
    pub vector: f64,
    /// The least cosine a text no query word matched needs to be a hit.
    pub min_similarity: f64,
}

/// The cosine similarity of `a` and `b`; `None` if their lengths differ or either is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    if a.len() != b.len() || a.is_empty() {
        return None;
    }
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na <= 0.0 || nb <= 0.0 || !dot.is_finite() {
        return None;
    }
    Some((dot / (na.sqrt() * nb.sqrt())).clamp(-1.0, 1.0))
}

/// The best `limit` of `lexical` (the index's hits, best first) and `recent` (texts no word
/// need match), each with its embedding, by the weighted sum above for `query`'s embedding.
/// A text in both lists counts once, as the lexical hit (its snippet marks the words). Each hit
/// returned says `hybrid`, its `score` the sum and `vector_score` its cosine.
pub fn rank(
    query: &[f32],
    lexical: Vec<(MemorySearchHit, Vec<f32>)>,
    recent: Vec<(MemorySearchHit, Vec<f32>)>,
    weights: Weights,
    limit: usize,
) -> Vec<MemorySearchHit> {
    let w = weights.vector.clamp(0.0, 1.0);
    let best_lexical = lexical
        .iter()
        .map(|(h, _)| h.score)
        .filter(|s| s.is_finite())
        .fold(0f64, f64::max);
    let mut seen = HashSet::new();
    let mut ranked: Vec<MemorySearchHit> = Vec::new();
    let matched = lexical.into_iter().map(|c| (c, true));
    let newest = recent.into_iter().map(|c| (c, false));
    for ((mut hit, vector), matched_words) in matched.chain(newest) {
        if !seen.insert((hit.kind.as_str(), hit.id.clone())) {
            continue;
        }
        let similarity = cosine(query, &vector).unwrap_or(0.0);
        if !matched_words && similarity < weights.min_similarity {
            continue;
        }
        let lexical = if matched_words && best_lexical > 0.0 && hit.score.is_finite() {
            (hit.score / best_lexical).clamp(0.0, 1.0)
        } else {
            0.0
        };
        hit.score = (1.0 - w) * lexical + w * similarity.max(0.0);
        hit.ranking = MemoryRanking::Hybrid;
        hit.vector_score = Some(similarity);
        ranked.push(hit);
    }
    ranked.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(Ordering::Equal)
            .then(b.created_at.cmp(&a.created_at))
            .then(a.id.cmp(&b.id))
    });
    ranked.truncate(limit);
    ranked
}

#[cfg(test)]
mod tests {
    use roost_core::views::MemoryHitKind;
    use roost_core::Timestamp;

    use super::*;

    fn hit(id: &str, score: f64, at: i64) -> MemorySearchHit {
        MemorySearchHit {
            kind: MemoryHitKind::Entry,
            id: id.into(),
            issue_id: None,
            snippet: id.into(),
            score,
            created_at: Timestamp(at),
            ranking: MemoryRanking::Lexical,
            vector_score: None,
        }
    }

    const WEIGHTS: Weights = Weights {
        vector: 0.7,
        min_similarity: 0.5,
    };

    #[test]
    fn cosine_of_equal_orthogonal_opposite_and_unusable_vectors() {
        let close = |v: Option<f64>, want: f64| v.is_some_and(|v| (v - want).abs() < 1e-12);
        assert!(close(cosine(&[1.0, 2.0], &[2.0, 4.0]), 1.0));
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 3.0]), Some(0.0));
        assert_eq!(cosine(&[1.0, 0.0], &[-1.0, 0.0]), Some(-1.0));
        assert_eq!(cosine(&[1.0], &[1.0, 0.0]), None);
        assert_eq!(cosine(&[], &[]), None);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), None);
        assert!(close(
            cosine(&[f32::MAX, f32::MAX], &[f32::MAX, f32::MAX]),
            1.0
        ));
    }

    /// The weighted sum: a weaker lexical match whose meaning is the query's wins over a
    /// stronger lexical match about something else.
    #[test]
    fn meaning_outweighs_a_closer_lexical_match() {
        let query = [1.0, 1.0, 0.0];
        let lexical = vec![
            (hit("words", 4.0, 1), vec![1.0, 1.0, 4.0]),
            (hit("meaning", 1.6, 1), vec![3.0, 1.0, 0.0]),
        ];
        let ranked = rank(&query, lexical, Vec::new(), WEIGHTS, 10);
        let order: Vec<&str> = ranked.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(order, ["meaning", "words"]);
        // meaning: 0.3 * 1.6/4 + 0.7 * 4/sqrt(20); words: 0.3 + 0.7 * 2/sqrt(36).
        let meaning = 0.3 * 0.4 + 0.7 * (4.0 / 20f64.sqrt());
        assert!((ranked[0].score - meaning).abs() < 1e-9, "{ranked:?}");
        assert!(
            (ranked[1].score - (0.3 + 0.7 / 3.0)).abs() < 1e-9,
            "{ranked:?}"
        );
        assert!(ranked.iter().all(|h| h.ranking == MemoryRanking::Hybrid));
        assert_eq!(ranked[1].vector_score.map(|v| (v * 3.0).round()), Some(1.0));
        // With no weight on vectors the order is bm25's.
        let lexical = vec![
            (hit("words", 4.0, 1), vec![1.0, 1.0, 4.0]),
            (hit("meaning", 1.6, 1), vec![3.0, 1.0, 0.0]),
        ];
        let weights = Weights {
            vector: 0.0,
            ..WEIGHTS
        };
        let ranked = rank(&query, lexical, Vec::new(), weights, 10);
        assert_eq!(ranked[0].id, "words");
        assert_eq!(ranked[0].score, 1.0);
    }

    /// The newest texts join only when close enough in meaning, once each, and the limit and
    /// ties (newer first) hold.
    #[test]
    fn recent_texts_need_similarity_and_count_once() {
        let query = [1.0, 0.0];
        let lexical = vec![(hit("both", 2.0, 1), vec![0.0, 1.0])];
        let recent = vec![
            (hit("both", 0.0, 1), vec![1.0, 0.0]),
            (hit("close-old", 0.0, 1), vec![1.0, 0.1]),
            (hit("close-new", 0.0, 2), vec![1.0, 0.1]),
            (hit("far", 0.0, 3), vec![0.2, 1.0]),
            (hit("unusable", 0.0, 3), vec![1.0]),
        ];
        let ranked = rank(&query, lexical, recent, WEIGHTS, 10);
        let order: Vec<&str> = ranked.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(order, ["close-new", "close-old", "both"]);
        assert_eq!(ranked[2].snippet, "both");
        assert!((ranked[2].score - 0.3).abs() < 1e-9, "{ranked:?}");
        let ranked = rank(
            &query,
            Vec::new(),
            vec![(hit("a", 0.0, 1), vec![1.0, 0.0])],
            WEIGHTS,
            0,
        );
        assert!(ranked.is_empty());
    }
}
