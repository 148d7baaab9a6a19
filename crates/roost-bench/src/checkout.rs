//! Checkout/release cycles: each client is an agent with its own run and issues, so the
//! numbers measure the replicated write path, not contention.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use roost_proto::v1::control_client::ControlClient;
use roost_proto::v1::{CheckoutRequest, IssueStatus, ReleaseRequest};
use roost_testkit::{Http, TestCluster, TestNode};
use serde_json::json;
use tonic::transport::Channel;

use crate::stats::{ms, percentile, us};

#[derive(Args)]
pub struct CheckoutArgs {
    /// Nodes in the cluster: 1 (single node) or 3
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// Client counts to measure, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    clients: Vec<usize>,
    /// Transports to measure, comma-separated (rest, grpc)
    #[arg(long, value_delimiter = ',', default_value = "rest,grpc")]
    transports: Vec<String>,
    /// Seconds of measurement per point
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Send every request to the leader (default) or spread clients over all nodes
    #[arg(long, default_value = "leader")]
    target: String,
    /// One JSON object per point instead of a table
    #[arg(long)]
    json: bool,
}

/// Where the load goes: the nodes clients talk to, and an admin client for setup.
struct Target {
    admin: Http,
    company_id: String,
    http: Vec<String>,
    grpc: Vec<String>,
    _node: Option<TestNode>,
    _cluster: Option<TestCluster>,
}

impl Target {
    async fn start(nodes: usize, spread: bool) -> anyhow::Result<Target> {
        if nodes == 1 {
            let node = TestNode::start().await?;
            let http = vec![node.admin.base().to_string()];
            let grpc = vec![format!("http://{}", node.server().grpc_addr())];
            return Ok(Target {
                admin: node.admin.clone(),
                company_id: node.company_id.clone(),
                http,
                grpc,
                _node: Some(node),
                _cluster: None,
            });
        }
        let timing = roost_raft::RaftTiming::default();
        let cluster = TestCluster::start_with(nodes, timing).await?;
        let leader = cluster.leader().await?;
        let ids = if spread { cluster.ids() } else { vec![leader] };
        let http = ids
            .iter()
            .map(|id| cluster.admin(*id).base().to_string())
            .collect();
        let grpc = ids
            .iter()
            .map(|id| format!("http://{}", cluster.grpc_addr(*id)))
            .collect();
        Ok(Target {
            admin: cluster.admin(leader),
            company_id: cluster.company_id.clone(),
            http,
            grpc,
            _node: None,
            _cluster: Some(cluster),
        })
    }
}

struct Client {
    agent_id: String,
    key: String,
    run_id: String,
    issues: Vec<String>,
}

async fn make_clients(t: &Target, n: usize, tag: &str) -> anyhow::Result<Vec<Client>> {
    let mut clients = Vec::with_capacity(n);
    for i in 0..n {
        let agent = t
            .admin
            .post(
                &format!("/api/companies/{}/agents", t.company_id),
                json!({ "name": format!("bench-{tag}-{i}") }),
            )
            .await?
            .ok()?;
        let agent_id = agent["id"].as_str().unwrap_or_default().to_string();
        let key = t
            .admin
            .post(&format!("/api/agents/{agent_id}/keys"), json!({}))
            .await?
            .ok()?;
        let run = t
            .admin
            .post(&format!("/api/agents/{agent_id}/runs"), json!({}))
            .await?
            .ok()?;
        let mut issues = Vec::new();
        for j in 0..2 {
            let issue = t
                .admin
                .post(
                    &format!("/api/companies/{}/issues", t.company_id),
                    json!({ "title": format!("bench {tag} {i}.{j}"), "status": "todo" }),
                )
                .await?
                .ok()?;
            issues.push(issue["id"].as_str().unwrap_or_default().to_string());
        }
        clients.push(Client {
            agent_id,
            key: key["token"].as_str().unwrap_or_default().to_string(),
            run_id: run["id"].as_str().unwrap_or_default().to_string(),
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
        latencies.push(us(start.elapsed()));
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
            expected_statuses: vec![IssueStatus::Todo as i32],
        };
        let start = Instant::now();
        grpc.checkout(grpc_request(&client, checkout)?).await?;
        latencies.push(us(start.elapsed()));
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

pub struct Point {
    pub transport: String,
    pub clients: usize,
    pub checkouts: usize,
    pub elapsed: Duration,
    pub latencies_us: Vec<u64>,
}

async fn measure(
    t: &Target,
    transport: &str,
    clients: usize,
    seconds: u64,
) -> anyhow::Result<Point> {
    let identities = make_clients(t, clients, &format!("{transport}{clients}")).await?;
    let mut channels = Vec::new();
    for url in &t.grpc {
        channels.push(
            Channel::from_shared(url.clone())?
                .tcp_nodelay(true)
                .connect()
                .await
                .context("connect gRPC")?,
        );
    }
    let start = Instant::now();
    let until = start + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for (i, client) in identities.into_iter().enumerate() {
        let task = match transport {
            "rest" => tokio::spawn(rest_loop(
                Http::new(t.http[i % t.http.len()].clone()),
                client,
                until,
            )),
            "grpc" => tokio::spawn(grpc_loop(
                channels[i % channels.len()].clone(),
                client,
                until,
            )),
            other => anyhow::bail!("unknown transport {other}"),
        };
        tasks.push(task);
    }
    let mut latencies_us = Vec::new();
    for task in tasks {
        latencies_us.extend(task.await??);
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

pub async fn run(args: CheckoutArgs) -> anyhow::Result<()> {
    eprintln!(
        "starting {} in-process node(s) (SQLite, fsync on)...",
        args.nodes
    );
    let target = Target::start(args.nodes, args.target == "all").await?;
    if !args.json {
        println!(
            "{:<6} {:>5} {:>7} {:>12} {:>9} {:>9} {:>9} {:>9}",
            "proto", "nodes", "clients", "checkouts/s", "p50 ms", "p90 ms", "p99 ms", "max ms"
        );
    }
    for transport in &args.transports {
        for &clients in &args.clients {
            eprintln!(
                "measuring {transport}, {clients} clients, {}s...",
                args.seconds
            );
            let p = measure(&target, transport, clients, args.seconds).await?;
            let rate = p.checkouts as f64 / p.elapsed.as_secs_f64();
            let l = &p.latencies_us;
            let (p50, p90, p99, max) = (
                percentile(l, 50.0),
                percentile(l, 90.0),
                percentile(l, 99.0),
                l.last().copied().unwrap_or(0),
            );
            if args.json {
                println!(
                    "{}",
                    json!({ "transport": p.transport, "nodes": args.nodes, "clients": p.clients, "checkoutsPerSec": rate,
                    "p50Ms": ms(p50), "p90Ms": ms(p90), "p99Ms": ms(p99), "maxMs": ms(max), "checkouts": p.checkouts })
                );
            } else {
                println!(
                    "{:<6} {:>5} {:>7} {:>12.0} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
                    p.transport,
                    args.nodes,
                    p.clients,
                    rate,
                    ms(p50),
                    ms(p90),
                    ms(p99),
                    ms(max)
                );
            }
        }
    }
    Ok(())
}
