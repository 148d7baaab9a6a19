//! `[recall]`: pluggable embeddings for memory search. With an
//! OpenAI-compatible `/v1/embeddings` endpoint configured (Ollama serves one), a search takes
//! the index's best any-word candidates and the agent's newest texts, embeds what this node has
//! not embedded yet, and ranks them by bm25 and cosine similarity (`score.rs`). Without one, or
//! when the endpoint fails or times out, search is the index's bm25 alone, as before, and says
//! `"ranking": "lexical"` (one warning is logged per run of failures).
//!
//! The embeddings cache is this node's memory only: derived, never replicated, bounded, keyed
//! by the SHA-256 of the model and the text.

pub mod score;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Longest text sent to the endpoint, in characters (a text is cut there; embedding models
/// read a few thousand tokens at most).
const MAX_EMBEDDED_CHARS: usize = 8000;

/// Texts sent in one request.
const BATCH: usize = 64;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecallConfig {
    /// The endpoint's base URL, without `/embeddings` (`http://127.0.0.1:11434/v1` for a local
    /// Ollama). Unset: lexical search only (the default; no model needed).
    pub embeddings_url: Option<String>,
    /// The model the endpoint embeds with (`nomic-embed-text`); required with the URL.
    pub embeddings_model: String,
    /// The name of an environment variable holding the endpoint's API key, sent as a bearer
    /// token (the key itself is never in the config).
    pub api_key_env: Option<String>,
    /// How long a search waits for the endpoint before it answers with lexical ranking.
    pub timeout_ms: u64,
    /// The vector score's share of the hybrid score, in percent (`score.rs`).
    pub vector_weight_percent: u8,
    /// The least cosine similarity, in percent, for a text that matched no word of the query.
    pub min_similarity_percent: u8,
    /// Lexical candidates (any word of the query, best bm25 first) re-ranked per search.
    pub candidates: u32,
    /// The agent's newest texts added to the candidates, whatever words they hold.
    pub recent: u32,
    /// Embeddings this node keeps in memory (oldest dropped first).
    pub cache_entries: usize,
}

impl Default for RecallConfig {
    fn default() -> Self {
        RecallConfig {
            embeddings_url: None,
            embeddings_model: String::new(),
            api_key_env: None,
            timeout_ms: 2000,
            vector_weight_percent: 70,
            min_similarity_percent: 50,
            candidates: 50,
            recent: 20,
            cache_entries: 20_000,
        }
    }
}

impl RecallConfig {
    /// Refuses a URL that is not http(s), a URL without a model, weights over 100 %.
    pub fn validate(&self) -> Result<(), String> {
        let Some(url) = &self.embeddings_url else {
            return Ok(());
        };
        if !url.starts_with("http://") && !url.starts_with("https://") {
            return Err(format!(
                "recall.embeddings_url = {url:?}: must be an http:// or https:// URL (the \
                 endpoint's base, e.g. http://127.0.0.1:11434/v1)"
            ));
        }
        if self.embeddings_model.trim().is_empty() {
            return Err(
                "recall.embeddings_url is set but recall.embeddings_model is not: name the \
                 model the endpoint embeds with (e.g. nomic-embed-text)"
                    .into(),
            );
        }
        if self.vector_weight_percent > 100 || self.min_similarity_percent > 100 {
            return Err(format!(
                "recall.vector_weight_percent = {} and recall.min_similarity_percent = {}: \
                 each must be 0 to 100",
                self.vector_weight_percent, self.min_similarity_percent
            ));
        }
        if self.timeout_ms == 0 {
            return Err("recall.timeout_ms must be at least 1".into());
        }
        Ok(())
    }
}

/// A node's embeddings client and cache; `None` in the API when no URL is configured.
pub struct Embedder {
    client: reqwest::Client,
    endpoint: String,
    model: String,
    api_key: Option<String>,
    timeout: Duration,
    pub(crate) weights: score::Weights,
    pub(crate) candidates: u32,
    pub(crate) recent: u32,
    cache: Mutex<Cache>,
    failing: AtomicBool,
}

impl Embedder {
    /// The embedder `config` describes, or `None` without a URL. The API key is read from its
    /// environment variable now (a missing variable is an error naming it).
    pub fn from_config(config: &RecallConfig) -> Result<Option<Arc<Embedder>>, String> {
        config.validate()?;
        let Some(url) = &config.embeddings_url else {
            return Ok(None);
        };
        let api_key = match &config.api_key_env {
            Some(name) => Some(std::env::var(name).map_err(|_| {
                format!(
                    "recall.api_key_env names {name}, which is not set in the server's \
                     environment"
                )
            })?),
            None => None,
        };
        let tls = roost_tls::client_config(None, None)
            .map_err(|e| format!("recall: the embeddings client's TLS: {e}"))?;
        let timeout = Duration::from_millis(config.timeout_ms);
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .use_preconfigured_tls(tls)
            .build()
            .map_err(|e| format!("recall: cannot build the embeddings client: {e}"))?;
        Ok(Some(Arc::new(Embedder {
            client,
            endpoint: format!("{}/embeddings", url.trim_end_matches('/')),
            model: config.embeddings_model.clone(),
            api_key,
            timeout,
            weights: score::Weights {
                vector: f64::from(config.vector_weight_percent) / 100.0,
                min_similarity: f64::from(config.min_similarity_percent) / 100.0,
            },
            candidates: config.candidates.clamp(1, 1000),
            recent: config.recent.min(1000),
            cache: Mutex::new(Cache::new(config.cache_entries)),
            failing: AtomicBool::new(false),
        })))
    }

    /// The embeddings of `texts`, in order: cached ones from memory, the others from the
    /// endpoint within the timeout. An error is a sentence (already logged: one warning when
    /// the endpoint starts failing, then debug lines until it answers again).
    pub async fn embed(&self, texts: &[&str]) -> Result<Vec<Arc<Vec<f32>>>, String> {
        let keys: Vec<[u8; 32]> = texts.iter().map(|t| self.key(t)).collect();
        let mut found: Vec<Option<Arc<Vec<f32>>>> = {
            let cache = self.lock_cache();
            keys.iter().map(|k| cache.get(k)).collect()
        };
        let missing: Vec<usize> = (0..texts.len()).filter(|i| found[*i].is_none()).collect();
        if !missing.is_empty() {
            let fetched =
                match tokio::time::timeout(self.timeout, self.fetch(texts, &missing)).await {
                    Ok(result) => result,
                    Err(_) => Err(format!(
                        "the embeddings endpoint {} did not answer within {} ms",
                        self.endpoint,
                        self.timeout.as_millis()
                    )),
                };
            let fetched = match fetched {
                Ok(v) => v,
                Err(why) => {
                    if !self.failing.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "memory search falls back to lexical ranking: {why} (logged once \
                             until the endpoint answers again)"
                        );
                    } else {
                        tracing::debug!("memory search: lexical ranking: {why}");
                    }
                    return Err(why);
                }
            };
            if self.failing.swap(false, Ordering::Relaxed) {
                tracing::info!("the embeddings endpoint {} answers again", self.endpoint);
            }
            let mut cache = self.lock_cache();
            for (i, vector) in missing.into_iter().zip(fetched) {
                let vector = Arc::new(vector);
                cache.put(keys[i], vector.clone());
                found[i] = Some(vector);
            }
        }
        Ok(found.into_iter().map(Option::unwrap_or_default).collect())
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        // A panic while holding the lock leaves a usable cache: it holds whole entries only.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn key(&self, text: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(self.model.as_bytes());
        h.update([0]);
        h.update(cut(text).as_bytes());
        h.finalize().into()
    }

    /// Asks the endpoint for the texts at `which`, [`BATCH`] at a time.
    async fn fetch(&self, texts: &[&str], which: &[usize]) -> Result<Vec<Vec<f32>>, String> {
        let mut out = Vec::with_capacity(which.len());
        for chunk in which.chunks(BATCH) {
            let input: Vec<&str> = chunk.iter().map(|i| cut(texts[*i])).collect();
            out.extend(self.request(&input).await?);
        }
        Ok(out)
    }

    async fn request(&self, input: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let mut request = self.client.post(&self.endpoint).json(&EmbeddingsRequest {
            model: &self.model,
            input,
        });
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let reply = request
            .send()
            .await
            .map_err(|e| format!("the embeddings endpoint {}: {e}", self.endpoint))?;
        let status = reply.status();
        if !status.is_success() {
            let body = reply.text().await.unwrap_or_default();
            let body: String = body.chars().take(200).collect();
            return Err(format!(
                "the embeddings endpoint {} answered {status}: {body}",
                self.endpoint
            ));
        }
        let reply: EmbeddingsReply = reply.json().await.map_err(|e| {
            format!(
                "the embeddings endpoint {} sent a reply that is not an embeddings list: {e}",
                self.endpoint
            )
        })?;
        vectors_in_order(reply, input.len())
            .map_err(|why| format!("the embeddings endpoint {}: {why}", self.endpoint))
    }
}

/// `reply`'s vectors by their `index`, checked: one per input, all of one length, finite.
fn vectors_in_order(reply: EmbeddingsReply, inputs: usize) -> Result<Vec<Vec<f32>>, String> {
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; inputs];
    for (position, item) in reply.data.into_iter().enumerate() {
        let i = item.index.unwrap_or(position);
        let slot = slots
            .get_mut(i)
            .ok_or_else(|| format!("it sent index {i} for {inputs} inputs"))?;
        if item.embedding.iter().any(|x| !x.is_finite()) {
            return Err(format!(
                "the embedding at index {i} holds a non-finite number"
            ));
        }
        *slot = Some(item.embedding);
    }
    let vectors: Vec<Vec<f32>> = slots
        .into_iter()
        .enumerate()
        .map(|(i, v)| v.ok_or_else(|| format!("it sent no embedding for input {i}")))
        .collect::<Result<_, _>>()?;
    if let Some(first) = vectors.first() {
        if vectors.iter().any(|v| v.len() != first.len()) || first.is_empty() {
            return Err("its embeddings are not all of one non-zero length".into());
        }
    }
    Ok(vectors)
}

fn cut(text: &str) -> &str {
    match text.char_indices().nth(MAX_EMBEDDED_CHARS) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [&'a str],
}

#[derive(Deserialize)]
struct EmbeddingsReply {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

/// At most `capacity` embeddings, the oldest inserted dropped first.
struct Cache {
    capacity: usize,
    map: HashMap<[u8; 32], Arc<Vec<f32>>>,
    order: VecDeque<[u8; 32]>,
}

impl Cache {
    fn new(capacity: usize) -> Cache {
        Cache {
            capacity,
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn get(&self, key: &[u8; 32]) -> Option<Arc<Vec<f32>>> {
        self.map.get(key).cloned()
    }

    fn put(&mut self, key: [u8; 32], vector: Arc<Vec<f32>>) {
        if self.capacity == 0 || self.map.insert(key, vector).is_some() {
            return;
        }
        self.order.push_back(key);
        while self.order.len() > self.capacity {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_bounded_oldest_out_first() {
        let mut cache = Cache::new(2);
        for k in 0..3u8 {
            cache.put([k; 32], Arc::new(vec![f32::from(k)]));
        }
        assert!(cache.get(&[0; 32]).is_none());
        assert_eq!(cache.get(&[2; 32]).map(|v| v[0]), Some(2.0));
        assert_eq!(cache.map.len(), 2);
        let mut off = Cache::new(0);
        off.put([1; 32], Arc::new(vec![1.0]));
        assert!(off.get(&[1; 32]).is_none());
    }

    #[test]
    fn replies_are_put_in_input_order_and_checked() {
        let reply = |json: &str| serde_json::from_str::<EmbeddingsReply>(json).expect("json");
        let ordered = vectors_in_order(
            reply(r#"{"data":[{"embedding":[2],"index":1},{"embedding":[1],"index":0}]}"#),
            2,
        );
        assert_eq!(ordered, Ok(vec![vec![1.0], vec![2.0]]));
        assert!(vectors_in_order(reply(r#"{"data":[{"embedding":[1]}]}"#), 2).is_err());
        assert!(vectors_in_order(reply(r#"{"data":[{"embedding":[1],"index":5}]}"#), 1).is_err());
        assert!(vectors_in_order(
            reply(r#"{"data":[{"embedding":[1]},{"embedding":[1,2]}]}"#),
            2
        )
        .is_err());
    }

    #[test]
    fn config_is_checked() {
        let mut c = RecallConfig::default();
        assert_eq!(c.validate(), Ok(()));
        c.embeddings_url = Some("127.0.0.1:11434/v1".into());
        assert!(c.validate().is_err_and(|e| e.contains("http://")));
        c.embeddings_url = Some("http://127.0.0.1:11434/v1".into());
        assert!(c.validate().is_err_and(|e| e.contains("embeddings_model")));
        c.embeddings_model = "nomic-embed-text".into();
        assert_eq!(c.validate(), Ok(()));
        c.vector_weight_percent = 101;
        assert!(c.validate().is_err());
        let parsed: Result<RecallConfig, _> = toml_like(r#"{"embeddings_urll": "x"}"#);
        assert!(parsed.is_err(), "unknown keys are refused");
    }

    fn toml_like(json: &str) -> Result<RecallConfig, serde_json::Error> {
        serde_json::from_str(json)
    }
}
