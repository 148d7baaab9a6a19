//! Hybrid recall: a node with `[recall]` pointing at an OpenAI-compatible
//! `/v1/embeddings` endpoint ranks memory search hits by bm25 and embedding similarity. The
//! endpoint here is a FAKE, served by this test: no embedding model can run on the test
//! machines, so it maps a handful of words onto concept axes (car, automobile, vehicle, truck,
//! highway: one axis; crash, collision: another; ...), deterministically. With it, a query
//! ranks the entry that means it above one that shares more of its words; when the endpoint
//! hangs past the timeout or is gone, the search still answers, ranked lexically, and says so.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use roost_testkit::{Http, TestNode};

use crate::support::str_field;

/// The fake's concept axes; a text holding none of these words lies on the last one.
const CONCEPTS: &[&[&str]] = &[
    &["car", "automobile", "vehicle", "truck", "highway"],
    &["crash", "collision", "wreck"],
    &["spreadsheet", "invoices", "tax", "budget"],
    &["lunch", "pizza"],
];

/// The fake model: how often each concept's words occur in `text`.
fn fake_embedding(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; CONCEPTS.len() + 1];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
    {
        if let Some(axis) = CONCEPTS.iter().position(|c| c.contains(&word.as_str())) {
            v[axis] += 1.0;
        }
    }
    if v.iter().all(|x| *x == 0.0) {
        v[CONCEPTS.len()] = 1.0;
    }
    v
}

const SERVE: u8 = 0;
const HANG: u8 = 1;

/// The fake endpoint: `POST /v1/embeddings` `{"model","input":[...]}` →
/// `{"data":[{"embedding":[...],"index":i}]}`, one request per connection; in `HANG` mode it
/// reads the request and never answers. Counts the requests it read.
struct FakeEmbeddings {
    addr: std::net::SocketAddr,
    mode: Arc<AtomicU8>,
    requests: Arc<AtomicUsize>,
    accept: tokio::task::JoinHandle<()>,
}

impl FakeEmbeddings {
    async fn start() -> anyhow::Result<FakeEmbeddings> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let mode = Arc::new(AtomicU8::new(SERVE));
        let requests = Arc::new(AtomicUsize::new(0));
        let (m, r) = (mode.clone(), requests.clone());
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (m, r) = (m.clone(), r.clone());
                tokio::spawn(async move {
                    let _ = serve(stream, &m, &r).await;
                });
            }
        });
        Ok(FakeEmbeddings {
            addr,
            mode,
            requests,
            accept,
        })
    }

    /// Stops accepting and closes the listener (its task is gone when this returns).
    async fn stop(self) {
        self.accept.abort();
        let _ = self.accept.await;
    }
}

async fn serve(
    mut stream: TcpStream,
    mode: &AtomicU8,
    requests: &AtomicUsize,
) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head_end, length) = loop {
        let n = stream.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "the client closed before a whole request head");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..at]).to_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            anyhow::ensure!(
                head.starts_with("post /v1/embeddings "),
                "unexpected request {head}"
            );
            break (at + 4, length);
        }
    };
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "the client closed before a whole body");
        buf.extend_from_slice(&chunk[..n]);
    }
    requests.fetch_add(1, Ordering::SeqCst);
    if mode.load(Ordering::SeqCst) == HANG {
        std::future::pending::<()>().await;
    }
    let request: Value = serde_json::from_slice(&buf[head_end..head_end + length])?;
    anyhow::ensure!(request["model"] == "fake-concepts", "{request}");
    let data: Vec<Value> = request["input"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, text)| json!({ "embedding": fake_embedding(text.as_str().unwrap_or_default()), "index": i }))
        .collect();
    let body = json!({ "object": "list", "data": data, "model": "fake-concepts" }).to_string();
    stream
        .write_all(
            format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await?;
    stream.shutdown().await?;
    Ok(())
}

/// The hits' ids, best first, and whether every hit says `ranking`.
async fn search(http: &Http, agent: &str, q: &str) -> anyhow::Result<Vec<Value>> {
    let q: String = q.replace(' ', "%20");
    let reply = http
        .get(&format!(
            "/api/agents/{agent}/memory/search?q={q}&match=any"
        ))
        .await?
        .ok()?;
    Ok(reply.as_array().cloned().unwrap_or_default())
}

fn ids(hits: &[Value]) -> Vec<String> {
    hits.iter().map(|h| str_field(h, "id")).collect()
}

fn position(hits: &[Value], id: &str) -> usize {
    ids(hits).iter().position(|h| h == id).unwrap_or(usize::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_recall_ranks_meaning_with_a_fake_embeddings_server_and_falls_back_to_lexical(
) -> anyhow::Result<()> {
    let fake = FakeEmbeddings::start().await?;
    let url = format!("http://{}/v1", fake.addr);
    let node = TestNode::start_with(|c| {
        c.recall.embeddings_url = Some(url);
        c.recall.embeddings_model = "fake-concepts".into();
        c.recall.timeout_ms = 700;
    })
    .await?;
    let (agent, key) = node.agent("recaller").await?;
    let run = node.start_run(&agent).await?;
    let as_run = node.http().with_token(&key).with_run(&run);
    let mut entry_ids = Vec::new();
    for what in [
        // Means the query, shares one word of it.
        "automobile crash on the highway, the vehicle was towed",
        // Shares both words of the query, is about something else.
        "spreadsheet crash lost the car pool invoices and the tax budget",
        // Means the query, shares no word of it.
        "the truck collision report",
        // Neither.
        "ordered pizza for lunch",
    ] {
        let e = as_run
            .post(
                "/api/agents/me/memory/entries",
                json!({ "what": what, "did": "noted" }),
            )
            .await?
            .ok()?;
        entry_ids.push(str_field(&e, "id"));
    }
    let [meaning, words, no_words, neither] = [0, 1, 2, 3].map(|i| entry_ids[i].clone());

    // Hybrid: the meaning first, the entry with no query word found, the unrelated one not.
    let hits = search(&node.admin, &agent, "car crash").await?;
    assert!(
        hits.iter().all(|h| h["ranking"] == "hybrid"),
        "every hit says hybrid: {hits:?}"
    );
    assert!(
        position(&hits, &meaning) < position(&hits, &words),
        "meaning above words: {hits:?}"
    );
    assert!(
        position(&hits, &no_words) < position(&hits, &words),
        "{hits:?}"
    );
    assert_eq!(position(&hits, &neither), usize::MAX, "{hits:?}");
    assert!(hits.iter().all(|h| h["vectorScore"].is_f64()), "{hits:?}");
    // The agent's own search (as the worker's auto-recall asks) is hybrid too.
    let own = search(&node.http().with_token(&key), "me", "car crash").await?;
    assert_eq!(ids(&own), ids(&hits));
    // Embeddings are cached on the node: the same search asks the endpoint nothing.
    let asked = fake.requests.load(Ordering::SeqCst);
    assert!(asked >= 1);
    search(&node.admin, &agent, "car crash").await?;
    assert_eq!(fake.requests.load(Ordering::SeqCst), asked);

    // The endpoint hangs past `timeout_ms`: lexical ranking, which puts the words first.
    fake.mode.store(HANG, Ordering::SeqCst);
    let hits = search(&node.admin, &agent, "crash car").await?;
    assert!(hits.iter().all(|h| h["ranking"] == "lexical"), "{hits:?}");
    assert_eq!(ids(&hits), vec![words.clone(), meaning.clone()], "{hits:?}");
    assert!(fake.requests.load(Ordering::SeqCst) > asked);

    // The endpoint is gone: still an answer, lexical.
    fake.stop().await;
    let hits = search(&node.admin, &agent, "car crash wreck").await?;
    assert!(hits.iter().all(|h| h["ranking"] == "lexical"), "{hits:?}");
    assert_eq!(ids(&hits), vec![words, meaning], "{hits:?}");
    node.shutdown().await?;
    Ok(())
}

/// A node refuses a `[recall]` it cannot use, with a sentence naming the setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recall_url_without_a_model_is_refused_at_start() -> anyhow::Result<()> {
    let started = TestNode::start_with(|c| {
        c.recall.embeddings_url = Some("http://127.0.0.1:9/v1".into());
    })
    .await;
    let Err(e) = started else {
        anyhow::bail!("a node started with recall.embeddings_url and no model");
    };
    assert!(
        format!("{e:#}").contains("recall.embeddings_model"),
        "{e:#}"
    );
    Ok(())
}
