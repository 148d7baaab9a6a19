//! `roost cluster status|node|init|add-node|remove-node`.

use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use roost_client::{ClusterStatus, Member, NodeReport};

use super::output::{fields, or_dash, table};
use super::{ClientOpts, Session};

#[derive(Args)]
pub struct ClusterArgs {
    #[command(flatten)]
    pub(super) client: ClientOpts,
    #[command(subcommand)]
    command: ClusterCommand,
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// The leader, the term, and each member's role, applied index, lag, health and state hash
    Status,
    /// The answering node's own report
    Node,
    /// Form a new cluster from a node that was never part of one
    Init {
        /// A voter as ID=GRPC_ADDR,HTTP_ADDR,PEER_ADDR (repeat for each member)
        #[arg(long = "member", required = true)]
        members: Vec<String>,
    },
    /// Add a node: it catches up as a learner, then becomes a voter
    AddNode {
        #[arg(long)]
        id: u64,
        /// Its gRPC address (host:port)
        #[arg(long)]
        grpc: String,
        /// Its HTTP address (host:port)
        #[arg(long)]
        http: String,
        /// Its peer address, where the other nodes reach its Raft service (host:port)
        #[arg(long)]
        peer: String,
        /// Keep it a learner (replicates, does not vote)
        #[arg(long)]
        learner: bool,
    },
    /// Remove a node from the cluster
    RemoveNode { id: u64 },
}

const MEMBER_FORM: &str = "a member is ID=GRPC_ADDR,HTTP_ADDR,PEER_ADDR";

/// Parses `ID=GRPC_ADDR,HTTP_ADDR,PEER_ADDR`.
pub(super) fn parse_member(text: &str) -> anyhow::Result<Member> {
    let (id, addrs) = text.split_once('=').context(MEMBER_FORM)?;
    let id: u64 = id
        .trim()
        .parse()
        .with_context(|| format!("`{id}` is not a node id"))?;
    let addrs: Vec<&str> = addrs.split(',').map(str::trim).collect();
    let [grpc, http, peer] = addrs[..] else {
        bail!(MEMBER_FORM);
    };
    if [grpc, http, peer].iter().any(|a| a.is_empty()) {
        bail!(MEMBER_FORM);
    }
    Ok(Member {
        id,
        grpc_addr: grpc.into(),
        http_addr: http.into(),
        peer_addr: peer.into(),
        voter: true,
    })
}

fn short_hash(r: &NodeReport) -> String {
    format!(
        "{}@{}",
        r.state_hash.get(..12).unwrap_or(&r.state_hash),
        r.state_index
    )
}

pub(super) fn status_text(s: &ClusterStatus) -> String {
    let rows: Vec<Vec<String>> = s
        .members
        .iter()
        .map(|m| {
            let report = m.report.as_ref();
            vec![
                m.member.id.to_string(),
                report.map_or("?", |r| r.role.as_str()).into(),
                if m.member.voter { "voter" } else { "learner" }.into(),
                or_dash(report.map(|r| r.applied_index)),
                m.lag.to_string(),
                m.health.to_string(),
                m.member.grpc_addr.clone(),
                m.member.http_addr.clone(),
                report
                    .map(short_hash)
                    .unwrap_or_else(|| or_dash(m.error.as_deref())),
            ]
        })
        .collect();
    let hashes: std::collections::BTreeSet<(u64, &str)> = s
        .members
        .iter()
        .filter_map(|m| m.report.as_ref())
        .map(|r| (r.state_index, r.state_hash.as_str()))
        .collect();
    let indexes: std::collections::BTreeSet<u64> = hashes.iter().map(|(i, _)| *i).collect();
    let agreement = if indexes.len() == 1 && hashes.len() > 1 {
        "\nSTATE HASHES DIFFER at the same index: replicas disagree".to_string()
    } else {
        String::new()
    };
    format!(
        "leader {}, term {}, last log index {}\n\n{}{}",
        or_dash(s.leader_id),
        s.term,
        s.last_log_index,
        table(
            &[
                "ID",
                "ROLE",
                "KIND",
                "APPLIED",
                "LAG",
                "HEALTH",
                "GRPC",
                "HTTP",
                "STATE HASH"
            ],
            &rows
        ),
        agreement
    )
}

pub async fn run(session: &Session, args: ClusterArgs) -> anyhow::Result<ExitCode> {
    let (client, out) = (&session.client, session.out);
    match args.command {
        ClusterCommand::Status => out.show(&client.cluster_status().await?, status_text)?,
        ClusterCommand::Node => out.show(&client.node_report().await?, |r: &NodeReport| {
            fields(&[
                ("id", r.id.to_string()),
                ("role", r.role.to_string()),
                ("term", r.term.to_string()),
                ("leader", or_dash(r.leader_id)),
                ("last log index", r.last_log_index.to_string()),
                ("applied index", r.applied_index.to_string()),
                ("snapshot index", or_dash(r.snapshot_index)),
                ("purged index", r.purged_index.to_string()),
                ("state hash", short_hash(r)),
            ])
        })?,
        ClusterCommand::Init { members } => {
            let members = members
                .iter()
                .map(|m| parse_member(m))
                .collect::<anyhow::Result<Vec<_>>>()?;
            out.show(&client.init_cluster(&members).await?, status_text)?
        }
        ClusterCommand::AddNode {
            id,
            grpc,
            http,
            peer,
            learner,
        } => {
            eprintln!(
                "adding node {id}: it catches up as a learner first, which can take a while..."
            );
            let member = Member {
                id,
                grpc_addr: grpc,
                http_addr: http,
                peer_addr: peer,
                voter: !learner,
            };
            out.show(&client.add_node(&member, learner).await?, status_text)?
        }
        ClusterCommand::RemoveNode { id } => {
            out.show(&client.remove_node(id).await?, status_text)?
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::parse_member;

    #[test]
    fn members_parse_from_id_and_three_addresses() {
        let m = parse_member("2=10.0.0.2:7481,10.0.0.2:7480,10.0.0.2:7482").unwrap();
        assert_eq!(
            (
                m.id,
                m.grpc_addr.as_str(),
                m.http_addr.as_str(),
                m.peer_addr.as_str()
            ),
            (2, "10.0.0.2:7481", "10.0.0.2:7480", "10.0.0.2:7482")
        );
        assert!(parse_member("2=10.0.0.2:7481").is_err());
        assert!(parse_member("2=10.0.0.2:7481,10.0.0.2:7480").is_err());
        assert!(parse_member("2=a:1,b:2,c:3,d:4").is_err());
        assert!(parse_member("x=a:1,b:2").is_err());
    }
}
