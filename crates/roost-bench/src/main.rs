//! `roost-bench`: checkout/release cycles against a single in-process node, over REST and gRPC,
//! at several client counts. Prints throughput and checkout latency percentiles.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Parser;
use roost_proto::v1::control_client::ControlClient;
use roost_proto::v1::{CheckoutRequest, ReleaseRequest};
use roost_testkit::{Http, TestNode};
use serde_json::json;
use tonic::transport::Channel;

#[derive(Parser)]
#[command(about = "Single-node checkout benchmark (REST and gRPC)")]
struct Args {
    /// Client counts to measure, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    clients: Vec<usize>,
    /// Transports to measure, comma-separated (rest, grpc)
    #[arg(long, value_delimiter = ',', default_value = "rest,grpc")]
    transports: Vec<String>,
    /// Seconds of measurement per (transport, clients) point
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Print one JSON object per point instead of a table
    #[arg(long)]
    json: bool,
}

/// One client's identity: an agent, its key, a live run and issues of its own.
struct Client {
    agent_id: String,
    key: String,
    run_id: String,
    issues: Vec<String>,
}

struct Point {
    transport: String,
    clients: usize,
    checkouts: usize,
    elapsed: Duration,
    latencies_us: Vec<u64>,
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

async fn make_clients(node: &TestNode, n: usize, tag: &str) -> anyhow::Result<Vec<Client>> {
    let mut clients = Vec::with_capacity(n);
    for i in 0..n {
        let (agent_id, key) = node.agent(&format!("bench-{tag}-{i}")).await?;
        let run_id = node.start_run(&agent_id).await?;
        let mut issues = Vec::new();
        for j in 0..2 {
            let issue = node
                .issue(json!({ "title": format!("bench {tag} {i}.{j}"), "status": "todo" }))
                .await?;
            issues.push(issue["id"].as_str().unwrap_or_default().to_string());
        }
        clients.push(Client {
            agent_id,
            key,
            run_id,
            issues,
        });
    }
    Ok(clients)
}

async fn rest_loop(http: Http, client: Client, until: Instant) -> anyhow::Result<Vec<u64>> {
    let http = http.with_token(&client.key).with_run(&client.run_id);
    let mut latencies = Vec::new();
    for issue in client.issues.iter().cycle() {
        if Instant::now() >= until {
            break;
        }
        let start = Instant::now();
        http.post(
            &format!("/api/issues/{issue}/checkout"),
            json!({ "agentId": client.agent_id, "expectedStatuses": ["todo"] }),
        )
        .await?
        .ok()?;
        latencies.push(start.elapsed().as_micros() as u64);
        http.post(&format!("/api/issues/{issue}/release"), json!({}))
            .await?
            .ok()?;
    }
    Ok(latencies)
}

fn grpc_request<T>(client: &Client, message: T) -> anyhow::Result<tonic::Request<T>> {
    let mut req = tonic::Request::new(message);
    req.metadata_mut()
        .insert("authorization", format!("Bearer {}", client.key).parse()?);
    req.metadata_mut()
        .insert("x-roost-run-id", client.run_id.parse()?);
    Ok(req)
}

async fn grpc_loop(channel: Channel, client: Client, until: Instant) -> anyhow::Result<Vec<u64>> {
    let mut grpc = ControlClient::new(channel);
    let mut latencies = Vec::new();
    for issue in client.issues.iter().cycle() {
        if Instant::now() >= until {
            break;
        }
        let checkout = CheckoutRequest {
            issue_id: issue.clone(),
            agent_id: client.agent_id.clone(),
            expected_statuses: vec!["todo".into()],
        };
        let start = Instant::now();
        grpc.checkout(grpc_request(&client, checkout)?).await?;
        latencies.push(start.elapsed().as_micros() as u64);
        grpc.release(grpc_request(
            &client,
            ReleaseRequest {
                issue_id: issue.clone(),
            },
        )?)
        .await?;
    }
    Ok(latencies)
}

async fn measure(
    node: &TestNode,
    transport: &str,
    clients: usize,
    seconds: u64,
) -> anyhow::Result<Point> {
    let identities = make_clients(node, clients, &format!("{transport}{clients}")).await?;
    let grpc_url = format!("http://{}", node.server().grpc_addr());
    let channel = Channel::from_shared(grpc_url)?
        .connect()
        .await
        .context("connect gRPC")?;
    let start = Instant::now();
    let until = start + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for client in identities {
        let task = match transport {
            "rest" => tokio::spawn(rest_loop(node.http(), client, until)),
            "grpc" => tokio::spawn(grpc_loop(channel.clone(), client, until)),
            other => anyhow::bail!("unknown transport {other}"),
        };
        tasks.push(task);
    }
    let mut latencies_us = Vec::new();
    for t in tasks {
        latencies_us.extend(t.await??);
    }
    let elapsed = start.elapsed();
    latencies_us.sort_unstable();
    Ok(Point {
        transport: transport.into(),
        clients,
        checkouts: latencies_us.len(),
        elapsed,
        latencies_us,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    eprintln!("starting an in-process single node (SQLite, fsync on)...");
    let node = TestNode::start().await?;
    if !args.json {
        println!(
            "{:<6} {:>7} {:>12} {:>10} {:>10} {:>10}",
            "proto", "clients", "checkouts/s", "p50 ms", "p99 ms", "max ms"
        );
    }
    for transport in &args.transports {
        for &clients in &args.clients {
            eprintln!(
                "measuring {transport} with {clients} clients for {}s...",
                args.seconds
            );
            let p = measure(&node, transport, clients, args.seconds).await?;
            let rate = p.checkouts as f64 / p.elapsed.as_secs_f64();
            let ms = |us: u64| us as f64 / 1000.0;
            let (p50, p99, max) = (
                percentile(&p.latencies_us, 50.0),
                percentile(&p.latencies_us, 99.0),
                p.latencies_us.last().copied().unwrap_or(0),
            );
            if args.json {
                println!(
                    "{}",
                    json!({ "transport": p.transport, "clients": p.clients, "checkoutsPerSec": rate,
                            "p50Ms": ms(p50), "p99Ms": ms(p99), "maxMs": ms(max), "checkouts": p.checkouts })
                );
            } else {
                println!(
                    "{:<6} {:>7} {:>12.0} {:>10.2} {:>10.2} {:>10.2}",
                    p.transport,
                    p.clients,
                    rate,
                    ms(p50),
                    ms(p99),
                    ms(max)
                );
            }
        }
    }
    node.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::percentile;

    #[test]
    fn percentiles_pick_ranks() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 51);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&[], 99.0), 0);
    }
}
