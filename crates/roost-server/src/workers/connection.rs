//! The `roost.v1.Worker` service: one bidirectional connection per worker.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use roost_core::{Actor, AdapterType, Command, Outcome, RunReport, RunStatus, Usage};
use roost_proto::v1::worker_server::Worker as WorkerRpc;
use roost_proto::v1::{server_message, worker_message, Register, ServerMessage, WorkerMessage};
use roost_proto::ProtoEnum;
use tokio::sync::mpsc;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};
use tracing::{debug, info, warn};

use super::spread::Placement;
use super::{assignment_for, Workers, RUN_TOKEN_PREFIX};
use crate::auth::{generate_token, hash_token, Caller};
use crate::error::ApiError;

/// A worker's usage report, clamped to the bounds apply accepts (`roost-core/src/limits.rs`):
/// the numbers come from what an agent printed, and a refused `FinishRun` would leave its run
/// live, so out-of-range numbers are capped rather than refused.
fn usage_of(u: &roost_proto::v1::RunUsage) -> Usage {
    use roost_core::limits::{MAX_MICRO_USD, MAX_TOKENS};
    Usage {
        input_tokens: u.input_tokens.min(MAX_TOKENS),
        cached_input_tokens: u.cached_input_tokens.min(MAX_TOKENS),
        output_tokens: u.output_tokens.min(MAX_TOKENS),
        cost_micro_usd: u.cost_micro_usd.min(MAX_MICRO_USD),
    }
}

/// A run's error text cut to the bound apply accepts, on a character boundary.
fn error_text(error: String) -> Option<String> {
    let max = roost_core::limits::MAX_ERROR_CHARS;
    match error.char_indices().nth(max) {
        _ if error.is_empty() => None,
        Some((cut, _)) => Some(error[..cut].to_string()),
        None => Some(error),
    }
}

/// The runs a worker still answers for: those it runs and those whose results it still holds.
fn owned_runs(running: &[String], unacknowledged: &[String]) -> Vec<String> {
    running.iter().chain(unacknowledged).cloned().collect()
}

pub(super) type Outbound = Pin<Box<dyn Stream<Item = Result<ServerMessage, Status>> + Send>>;

/// A worker's messages waiting to be handled, at most (`Workers::serve`).
const WAITING: usize = 1024;

/// A worker's connection in the registry, detached when dropped.
struct Attached {
    workers: Workers,
    worker_id: String,
    generation: u64,
}

impl Drop for Attached {
    fn drop(&mut self) {
        self.workers
            .registry
            .detach(&self.worker_id, self.generation);
        info!(worker_id = %self.worker_id, "worker connection closed");
    }
}

pub(crate) struct WorkerService {
    workers: Workers,
    /// With TLS on, a worker presents a worker certificate of the cluster CA besides its
    /// credential, so that the worker port is closed to anyone the CA did not certify
    /// (ARCHITECTURE.md, "Authorization").
    certificates_required: bool,
    /// This service is the peer listener's: every worker on it is relayed by a follower
    /// (`relay.rs`), which checked its certificate.
    relayed: bool,
}

impl WorkerService {
    /// The worker service of the client listener.
    pub(crate) fn new(workers: Workers, certificates_required: bool) -> Self {
        WorkerService {
            workers,
            certificates_required,
            relayed: false,
        }
    }

    /// The worker service of the peer listener, for the workers followers relay.
    pub(crate) fn relayed(workers: Workers) -> Self {
        WorkerService {
            workers,
            certificates_required: false,
            relayed: true,
        }
    }
}

/// The worker name in the client certificate of a worker's connection, or a refusal. The
/// handshake already checked the certificate against the cluster CA; this checks that it is a
/// worker's (`roost cert issue worker`), not a client's or a node's. The name need not be the
/// worker id: a pool of workers may share one certificate (deploy/kubernetes), as Nomad's
/// clients share theirs; the id is bound to the worker's credential (`identity.rs`).
fn certified_worker<C: AsRef<[u8]>>(certificates: Option<&[C]>) -> Result<String, ApiError> {
    const ISSUE: &str = "`roost cert issue worker --name <name>` makes one; name it in the \
                         worker's [tls] cert_file and key_file";
    let Some(first) = certificates.and_then(|c| c.first()) else {
        return Err(ApiError::unauthorized(format!(
            "this worker presented no client certificate: with TLS on, a worker presents a \
             worker certificate of the cluster CA. {ISSUE}"
        )));
    };
    roost_tls::worker_name(first.as_ref()).ok_or_else(|| {
        ApiError::unauthorized(format!(
            "this worker's client certificate names no worker (a node's or a client's \
             certificate?). {ISSUE}"
        ))
    })
}

fn one_message(body: server_message::Body) -> Outbound {
    Box::pin(tokio_stream::once(Ok(ServerMessage { body: Some(body) })))
}

impl Workers {
    async fn register(&self, caller: &Caller, register: &Register) -> Result<(), Status> {
        let adapters = register
            .adapters
            .iter()
            .map(|&a| {
                AdapterType::from_proto(a)
                    .map_err(|e| ApiError::bad_request(format!("adapters: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let command = Command::RegisterWorker {
            worker_id: register.worker_id.clone(),
            name: if register.name.is_empty() {
                register.worker_id.clone()
            } else {
                register.name.clone()
            },
            adapters,
            labels: register.labels.clone().into_iter().collect(),
            slots: register.slots,
            version: register.version.clone(),
        };
        self.api.submit(caller, command).await?;
        Ok(())
    }

    /// After a reconnect: a run the worker says it runs but the cluster still has as assigned
    /// (its `RunStarted` died with the old leader) is marked running now.
    async fn confirm_started(&self, caller: &Caller, running: &[String]) {
        let worker_id = caller.actor.id.as_str();
        let unconfirmed: Vec<String> = self.api.reader().read(|s| {
            running
                .iter()
                .filter(|id| {
                    s.runs.get(*id).is_some_and(|r| {
                        r.status == RunStatus::Assigned && r.worker_id.as_deref() == Some(worker_id)
                    })
                })
                .cloned()
                .collect()
        });
        for run_id in unconfirmed {
            if let Err(e) = self
                .api
                .submit(
                    caller,
                    Command::RunStarted {
                        run_id: run_id.clone(),
                    },
                )
                .await
            {
                warn!(worker_id, run_id, error = %e, "could not confirm a running run");
            }
        }
    }

    /// After a reconnect: a run the cluster has as running on this worker, which the worker
    /// neither runs nor holds a result for (it restarted), has ended; its result is unknown,
    /// so it failed.
    async fn fail_forgotten(&self, caller: &Caller, owned: &[String]) {
        let worker_id = caller.actor.id.as_str();
        let forgotten: Vec<String> = self.api.reader().read(|s| {
            s.live_runs()
                .filter(|r| {
                    r.status == RunStatus::Running && r.worker_id.as_deref() == Some(worker_id)
                })
                .filter(|r| !owned.contains(&r.id))
                .map(|r| r.id.clone())
                .collect()
        });
        for run_id in forgotten {
            let error = Some("the worker reconnected without this run".to_string());
            let command = Command::FinishRun {
                run_id: run_id.clone(),
                status: RunStatus::Failed,
                error,
                report: Default::default(),
            };
            if let Err(e) = self.api.submit(caller, command).await {
                warn!(worker_id, run_id, error = %e, "could not end a forgotten run");
            }
        }
    }

    /// After a (re)connect and on every renewal: send again the runs assigned to the worker
    /// that it neither runs nor has a result for (`owned`: running plus unacknowledged).
    /// Only runs still `assigned`: a `running` run missing from the list has ended on the
    /// worker and its result is on the way; sending it again would start it twice.
    /// Each resent assignment carries a fresh run-scoped key (the cluster keeps only hashes).
    async fn resend_assigned(&self, worker_id: &str, owned: &[String]) {
        let resend: Vec<String> = self.api.reader().read(|s| {
            s.live_runs()
                .filter(|r| r.status == RunStatus::Assigned)
                .filter(|r| r.worker_id.as_deref() == Some(worker_id) && !owned.contains(&r.id))
                .map(|r| r.id.clone())
                .collect()
        });
        for run_id in resend {
            let token = generate_token(RUN_TOKEN_PREFIX);
            let command = Command::AddRunToken {
                run_id: run_id.clone(),
                token_hash: hash_token(&token),
            };
            let system = Caller {
                actor: Actor::system(),
                idempotency_key: None,
            };
            match self.api.submit(&system, command).await {
                Ok(Outcome::Run(run)) => {
                    if let Some(a) = assignment_for(&self.api, &run, token).await {
                        self.registry
                            .send(worker_id, server_message::Body::Assignment(a));
                    }
                }
                Ok(_) => {}
                Err(e) => debug!(worker_id, run_id, error = %e, "assignment not sent again"),
            }
        }
    }

    /// Tells the worker to stop the runs it runs that the cluster has ended (cancelled, or
    /// lost and retried elsewhere). Checked on every renewal, so a cancel committed through
    /// any node reaches the worker within one renewal interval.
    fn cancel_ended(&self, worker_id: &str, running: &[String]) {
        let cancel: Vec<String> = self.api.reader().read(|s| {
            running
                .iter()
                .filter(|id| {
                    !s.runs.get(*id).is_some_and(|r| {
                        r.status.is_live() && r.worker_id.as_deref() == Some(worker_id)
                    })
                })
                .cloned()
                .collect()
        });
        for run_id in cancel {
            let reason = "the cluster no longer considers this run live".to_string();
            self.registry.send(
                worker_id,
                server_message::Body::Cancel(roost_proto::v1::Cancel { run_id, reason }),
            );
        }
    }

    /// Commits the usage a renewal carries for runs whose usage changed.
    async fn record_usage(&self, caller: &Caller, reports: &[roost_proto::v1::RunUsage]) {
        for report in reports {
            let usage = usage_of(report);
            let changed = self.api.reader().read(|s| {
                s.runs
                    .get(&report.run_id)
                    .is_some_and(|r| r.status.is_live() && r.usage != usage)
            });
            if !changed {
                continue;
            }
            let command = Command::ReportUsage {
                run_id: report.run_id.clone(),
                usage,
            };
            if let Err(e) = self.api.submit(caller, command).await {
                warn!(worker_id = %caller.actor.id, run_id = %report.run_id, code = e.code(), error = %e, "usage refused");
            }
        }
    }

    /// The in-memory part of a renewal, done as soon as it arrives: renew the lease and ack.
    /// False if the worker was declared lost meanwhile, or its credential revoked (it is told
    /// to register again and its renewal goes no further). Acks never wait behind replicated writes: the worker fences
    /// itself when acks stop coming, and a loaded cluster made workers stop their agents for
    /// nothing (regression: the fault suite's worker_cut_off scenario).
    fn renew_lease(&self, caller: &Caller, seq: u64) -> bool {
        let worker_id = caller.actor.id.as_str();
        // A connection that outlived this node's leadership, or that was opened in the moment it
        // was lost (regression: a worker_kept_by_a_node_that_no_longer_leads, found by the
        // fault suite's mixed_faults: the leader declared the worker lost, the worker
        // registered again through a node that had just stepped down, and that node kept the
        // connection; no lease of the leader's covered it and its wakes stayed queued).
        if !self.is_leader() {
            let redirect = roost_proto::v1::Redirect {
                leader_grpc_addr: self.leader_elsewhere().unwrap_or_default(),
                message: "this node no longer leads".into(),
            };
            self.registry
                .send(worker_id, server_message::Body::Redirect(redirect));
            return false;
        }
        let refusal = self.api.reader().read(|s| {
            if s.workers
                .get(worker_id)
                .is_some_and(|w| w.status == roost_core::WorkerStatus::Lost)
            {
                return Some("this worker was declared lost; register again");
            }
            // A revoked credential (`roost worker revoke`, or the revoked join token it was
            // exchanged for) ends the connection at its next renewal: unrenewed, the lease runs out and the worker
            // is lost like any other (the worker fences itself first; its runs become `lost`,
            // each retried once), and it cannot register with that credential again (`admit`).
            let credential = caller.actor.credential_id.as_deref();
            credential
                .and_then(|id| s.credentials.get(id))
                .filter(|c| c.revoked)
                .map(|_| "the credential this worker registered with was revoked")
        });
        if let Some(message) = refusal {
            let redirect = roost_proto::v1::Redirect {
                leader_grpc_addr: String::new(),
                message: message.into(),
            };
            self.registry
                .send(worker_id, server_message::Body::Redirect(redirect));
            return false;
        }
        let terms = self.registry.renew_on_terms(worker_id, &self.config);
        let renewed = roost_proto::v1::LeaseRenewed {
            seq,
            renew_interval_ms: terms.renew_interval_ms,
            lease_ttl_ms: terms.lease_ttl_ms,
        };
        self.registry
            .send(worker_id, server_message::Body::LeaseRenewed(renewed));
        true
    }

    /// A worker's connection on the leader, until it ends and what it sent is handled. Renewals
    /// are acked on arrival; every message is then handled in order, one at a time, with at most
    /// [`WAITING`] waiting: past that the stream is not read, which slows a worker that sends
    /// faster than its messages commit. What a connected worker holds is kept small (ten
    /// thousand of them on one leader): one task, which reads and handles; the handling of a
    /// message, a future of several KiB, is boxed while it runs instead of sizing the task for
    /// it; and the span naming the worker, so that what its messages cause (runs started and
    /// finished, their commands' logs) says whose they were, lives only while one is handled.
    async fn serve(
        &self,
        caller: Arc<Caller>,
        mut inbound: Streaming<WorkerMessage>,
        generation: u64,
    ) {
        let worker_id = caller.actor.id.clone();
        // Let go of when the stream ends, or if handling a message panics.
        let mut attached = Some(Attached {
            workers: self.clone(),
            worker_id: worker_id.clone(),
            generation,
        });
        // Boxes: a queue keeps its largest size, and a message is 248 bytes.
        let mut waiting: VecDeque<Box<WorkerMessage>> = VecDeque::new();
        let mut handling: Option<Pin<Box<dyn Future<Output = ()> + Send>>> = None;
        let mut open = true;
        loop {
            if handling.is_none() {
                match waiting.pop_front() {
                    Some(message) => {
                        let (workers, caller) = (self.clone(), caller.clone());
                        let span = tracing::info_span!("worker", worker_id = %worker_id);
                        let handle = async move { workers.handle(&caller, *message).await };
                        handling = Some(Box::pin(tracing::Instrument::instrument(handle, span)));
                    }
                    None if !open => return,
                    None => {}
                }
            }
            let handled = async {
                match handling.as_mut() {
                    Some(handle) => handle.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = handled => handling = None,
                next = inbound.message(), if open && waiting.len() < WAITING => match next {
                    Ok(Some(message)) => {
                        if let Some(worker_message::Body::LeaseRenewal(h)) = &message.body {
                            if !self.renew_lease(&caller, h.seq) {
                                continue;
                            }
                        }
                        waiting.push_back(Box::new(message));
                    }
                    ended => {
                        if let Err(e) = ended {
                            debug!(worker_id, error = %e, "worker stream failed");
                        }
                        open = false;
                        drop(attached.take());
                    }
                },
            }
        }
    }

    async fn handle(&self, caller: &Caller, message: WorkerMessage) {
        let worker_id = caller.actor.id.clone();
        let result = match message.body {
            Some(worker_message::Body::LeaseRenewal(h)) => {
                // Renewed and acked already (`renew_lease`); the replicated part follows here,
                // in order with the worker's other messages.
                self.record_usage(caller, &h.usage).await;
                self.cancel_ended(&worker_id, &h.running_run_ids);
                // A `RunStarted` refused on the way (a leader change) is confirmed now.
                self.confirm_started(caller, &h.running_run_ids).await;
                // An assignment lost on the way (a full outbox) is sent again; a worker
                // ignores one it already runs or ran.
                let owned = owned_runs(&h.running_run_ids, &h.unacknowledged_run_ids);
                self.resend_assigned(&worker_id, &owned).await;
                Ok(())
            }
            Some(worker_message::Body::RunStarted(s)) => self
                .api
                .submit(caller, Command::RunStarted { run_id: s.run_id })
                .await
                .map(|_| ()),
            Some(worker_message::Body::RunLog(log)) => {
                // Only the run's own worker feeds its live log.
                let its_worker = self.api.reader().read(|s| {
                    s.runs
                        .get(&log.run_id)
                        .is_some_and(|r| r.worker_id.as_deref() == Some(worker_id.as_str()))
                });
                if its_worker {
                    self.api
                        .live_logs()
                        .append(&log.run_id, log.offset, &log.data);
                }
                Ok(())
            }
            Some(worker_message::Body::RunFinished(f)) => match RunStatus::from_proto(f.status) {
                Ok(status) if !status.is_live() && status != RunStatus::Lost => {
                    self.api.live_logs().end(&f.run_id);
                    let error = error_text(f.error);
                    let report = RunReport {
                        usage: f.usage.as_ref().map(usage_of).unwrap_or_default(),
                        session_id: (!f.session_id.is_empty()).then_some(f.session_id),
                        session_reset: f.session_reset,
                        log_tail: f.log_tail,
                        log_bytes: f.log_bytes,
                        summary: (!f.summary.is_empty()).then_some(f.summary),
                        workspace_path: (!f.workspace_path.is_empty()).then_some(f.workspace_path),
                    };
                    let command = Command::FinishRun {
                        run_id: f.run_id.clone(),
                        status,
                        error,
                        report,
                    };
                    let result = self.api.submit(caller, command).await;
                    // Acked unless the answer may change: the worker sends the result again
                    // until it is acked.
                    if result.as_ref().map_or_else(|e| !e.is_retryable(), |_| true) {
                        let ack = roost_proto::v1::RunFinishedAck { run_id: f.run_id };
                        self.registry
                            .send(&worker_id, server_message::Body::RunFinishedAck(ack));
                    }
                    result.map(|o| {
                        if let Outcome::Run(r) = o {
                            debug!(run_id = %r.id, status = %r.status, "run finished");
                        }
                    })
                }
                Ok(status) => Err(ApiError::bad_request(format!(
                    "a run cannot finish as `{status}`"
                ))),
                Err(e) => Err(ApiError::bad_request(format!("status: {e}"))),
            },
            Some(worker_message::Body::Register(_)) | None => {
                Err(ApiError::bad_request("unexpected message"))
            }
        };
        if let Err(e) = result {
            warn!(worker_id, code = e.code(), error = %e, "worker message refused");
        }
    }
}

#[tonic::async_trait]
impl WorkerRpc for WorkerService {
    type AttachStream = Outbound;

    async fn attach(
        &self,
        request: Request<Streaming<WorkerMessage>>,
    ) -> Result<Response<Outbound>, Status> {
        let certificates = request.peer_certs();
        let mut inbound = request.into_inner();
        let first = inbound
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("the connection ended before it began"))?;
        let Some(worker_message::Body::Register(register)) = first.body else {
            return Err(ApiError::bad_request("the first message must be Register").into());
        };
        if self.certificates_required {
            let name = certified_worker(certificates.as_deref().map(Vec::as_slice))?;
            debug!(worker_id = %register.worker_id, certificate = %name, "worker certificate");
        }
        let workers = self.workers.clone();
        let admission = workers.admit(&register).await?;
        // Only the leader holds connections: its leases are the ones that expire, its dispatcher
        // the one that assigns. A node that does not lead relays the worker to the leader
        // (`relay.rs`), or sends it on: to the leader when relaying is off, to try again when no
        // leader is known yet (an election). A relayed worker is never relayed again: a relay
        // that reached a node no longer leading passes its redirect on, without an address.
        if !workers.is_leader() {
            let relay_to = workers.api.node().leader_peer_addr();
            if let Some(peer) = relay_to.filter(|_| workers.config.relay && !self.relayed) {
                let relayed = workers.relay(&peer, register, inbound).await?;
                return Ok(Response::new(relayed));
            }
            let redirect = roost_proto::v1::Redirect {
                leader_grpc_addr: workers.leader_elsewhere().unwrap_or_default(),
                message: "dial the leader".into(),
            };
            return Ok(Response::new(one_message(server_message::Body::Redirect(
                redirect,
            ))));
        }
        // A leader that serves its most workers over their own connections sends this one to a
        // follower, which relays it (`spread.rs`): before any commit, so it costs the leader
        // next to nothing. The worker's place here is held from now, before it registers.
        let direct = if self.relayed {
            workers.spread.relayed(&register.worker_id);
            None
        } else if workers.config.relay {
            match workers.place(&register.worker_id) {
                Placement::Here(direct) => Some(direct),
                Placement::Elsewhere(node, addr) => {
                    let redirect = roost_proto::v1::Redirect {
                        leader_grpc_addr: addr,
                        message: format!(
                            "the leader serves {} workers over their own connections; dial \
                             node {node}, which relays to it",
                            workers.config.max_leader_connections
                        ),
                    };
                    return Ok(Response::new(one_message(server_message::Body::Redirect(
                        redirect,
                    ))));
                }
            }
        } else {
            None
        };
        // First start: the join token becomes the worker's credential, once.
        let caller = workers.exchange(admission).await?;
        workers.register(&caller, &register).await?;
        let worker_id = register.worker_id.clone();
        let (outbox, rx) = mpsc::channel(1024);
        let generation = workers.registry.attach(&worker_id, outbox);
        let terms = workers.registry.renew_on_terms(&worker_id, &workers.config);
        let registered = roost_proto::v1::Registered {
            node_id: workers.api.node().id(),
            renew_interval_ms: terms.renew_interval_ms,
            lease_ttl_ms: terms.lease_ttl_ms,
        };
        workers
            .registry
            .send(&worker_id, server_message::Body::Registered(registered));
        workers
            .confirm_started(&caller, &register.running_run_ids)
            .await;
        let owned = owned_runs(&register.running_run_ids, &register.unacknowledged_run_ids);
        workers.fail_forgotten(&caller, &owned).await;
        workers.resend_assigned(&worker_id, &owned).await;
        workers.cancel_ended(&worker_id, &register.running_run_ids);
        info!(worker_id, slots = register.slots, "worker connection open");
        tokio::spawn(async move {
            let _direct = direct;
            workers.serve(Arc::new(caller), inbound, generation).await;
        });
        Ok(Response::new(Box::pin(
            tokio_stream::wrappers::ReceiverStream::new(rx)
                .map(|body| Ok(ServerMessage { body: Some(*body) })),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (huge_agent_usage_left_its_run_live): usage an agent printed beyond the
    /// bounds made apply refuse the run's end; it is capped instead.
    #[test]
    fn huge_agent_usage_is_capped_to_what_apply_accepts() {
        let report = roost_proto::v1::RunUsage {
            input_tokens: u64::MAX,
            cost_micro_usd: u64::MAX,
            ..Default::default()
        };
        let usage = usage_of(&report);
        assert_eq!(usage.input_tokens, roost_core::limits::MAX_TOKENS);
        assert_eq!(usage.cost_micro_usd, roost_core::limits::MAX_MICRO_USD);
        let finish = Command::FinishRun {
            run_id: "r".into(),
            status: RunStatus::Succeeded,
            error: error_text("é".repeat(roost_core::limits::MAX_ERROR_CHARS + 5)),
            report: RunReport {
                usage,
                ..Default::default()
            },
        };
        assert_eq!(roost_core::limits::check(&finish), Ok(()));
        assert_eq!(error_text(String::new()), None);
    }
}
