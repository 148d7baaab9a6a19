"""Drives a Roost node over gRPC from Python, with stubs generated from proto/ by grpcio-tools.

Run by crates/roost/tests/e2e/grpc_python.rs:

    python drive_roost.py STUBS_DIR HOST:PORT COMPANY_ID

with the admin token in ROOST_ADMIN_TOKEN. As the administrator it creates an agent, a key for
it, an issue and a run; as the agent, in that run (`x-roost-run-id`), it checks the issue out
and comments on it; as the administrator it reads both back, and follows the company's event
stream (Watch) from before the checkout, so the checkout and the comment arrive on it live.
It also asks grpc.health.v1 and
lists the services through server reflection (v1alpha, grpcio-reflection's client), and prints
one JSON object for the Rust test to assert on. Any gRPC error ends it non-zero.
"""

import json
import os
import queue
import sys
import threading
import time

STUBS, TARGET, COMPANY = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, STUBS)

import grpc  # noqa: E402
from google.protobuf import descriptor_pool  # noqa: E402
from grpc_health.v1 import health_pb2, health_pb2_grpc  # noqa: E402
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (  # noqa: E402
    ProtoReflectionDescriptorDatabase,
)
from roost.v1 import cluster_pb2, cluster_pb2_grpc  # noqa: E402
from roost.v1 import control_pb2, control_pb2_grpc  # noqa: E402
from roost.v1 import enums_pb2  # noqa: E402

ADMIN = os.environ["ROOST_ADMIN_TOKEN"]


def as_(token, run=None):
    """The call metadata of a caller: its bearer token and, for an agent's run, the run id."""
    metadata = [("authorization", "Bearer " + token)]
    if run is not None:
        metadata.append(("x-roost-run-id", run))
    return metadata


def health(channel, service):
    stub = health_pb2_grpc.HealthStub(channel)
    reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
    return health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)


def wait_serving(channel, deadline_s=30.0):
    """The health service checks readiness once a second: a node just started may not yet say."""
    until = time.monotonic() + deadline_s
    while True:
        status = health(channel, "")
        if status == "SERVING" or time.monotonic() > until:
            return status
        time.sleep(0.2)


def main():
    out = {}
    with grpc.insecure_channel(TARGET) as channel:
        out["health"] = wait_serving(channel)
        out["health_services"] = {
            name: health(channel, name)
            for name in ["roost.v1.Control", "roost.v1.Cluster", "roost.v1.Worker"]
        }
        try:
            health(channel, "roost.v1.Raft")
            out["health_raft"] = "answered"
        except grpc.RpcError as err:
            out["health_raft"] = err.code().name

        reflection = ProtoReflectionDescriptorDatabase(channel)
        out["services"] = sorted(reflection.get_services())
        pool = descriptor_pool.DescriptorPool(reflection)
        control = pool.FindServiceByName("roost.v1.Control")
        out["control_methods"] = sorted(m.name for m in control.methods)
        out["checkout_input"] = control.methods_by_name["Checkout"].input_type.full_name

        ctl = control_pb2_grpc.ControlStub(channel)
        agent = ctl.CreateAgent(
            control_pb2.CreateAgentRequest(company_id=COMPANY, name="py-agent"),
            metadata=as_(ADMIN),
            timeout=10,
        )
        key = ctl.CreateAgentKey(
            control_pb2.CreateAgentKeyRequest(agent_id=agent.id, name="py"),
            metadata=as_(ADMIN),
            timeout=10,
        ).token
        issue = ctl.CreateIssue(
            control_pb2.CreateIssueRequest(
                company_id=COMPANY, title="from python", status=enums_pb2.ISSUE_STATUS_TODO
            ),
            metadata=as_(ADMIN),
            timeout=10,
        )
        run = ctl.StartRun(
            control_pb2.StartRunRequest(agent_id=agent.id, issue_id=issue.id),
            metadata=as_(ADMIN),
            timeout=10,
        )
        # Follow the company's events from here on, in a thread: the checkout and the
        # comment below must arrive on the open stream.
        backlog = list(
            ctl.Watch(
                control_pb2.WatchRequest(company_id=COMPANY, follow=False),
                metadata=as_(ADMIN),
                timeout=10,
            )
        )
        after = backlog[-1].seq if backlog else 0
        events = queue.Queue()
        stream = ctl.Watch(
            control_pb2.WatchRequest(company_id=COMPANY, after_seq=after),
            metadata=as_(ADMIN),
            timeout=30,
        )

        def follow():
            try:
                for event in stream:
                    events.put((event.seq, event.action, event.entity_id))
            except grpc.RpcError:
                pass

        threading.Thread(target=follow, daemon=True).start()
        checked_out = ctl.Checkout(
            control_pb2.CheckoutRequest(
                issue_id=issue.id,
                agent_id=agent.id,
                expected_statuses=[enums_pb2.ISSUE_STATUS_TODO],
            ),
            metadata=as_(key, run.id),
            timeout=10,
        )
        comment = ctl.AddComment(
            control_pb2.AddCommentRequest(issue_id=issue.id, body="hello from python"),
            metadata=as_(key, run.id),
            timeout=10,
        )
        read = ctl.GetIssue(
            control_pb2.GetIssueRequest(issue_id=issue.id),
            metadata=as_(ADMIN),
            timeout=10,
        )
        comments = ctl.ListComments(
            control_pb2.ListCommentsRequest(issue_id=issue.id),
            metadata=as_(ADMIN),
            timeout=10,
        ).comments
        watched = []
        until = time.monotonic() + 20
        while time.monotonic() < until and "issue.comment_added" not in [a for _, a, _ in watched]:
            try:
                watched.append(events.get(timeout=1))
            except queue.Empty:
                pass
        stream.cancel()
        out["backlog_seqs"] = [e.seq for e in backlog]
        out["watched"] = [{"seq": s, "action": a, "entity_id": e} for s, a, e in watched]
        try:
            ctl.GetIssue(control_pb2.GetIssueRequest(issue_id=issue.id), timeout=10)
            out["unauthenticated"] = "answered"
        except grpc.RpcError as err:
            out["unauthenticated"] = err.code().name

        status = cluster_pb2_grpc.ClusterStub(channel).Status(
            cluster_pb2.ClusterStatusRequest(), metadata=as_(ADMIN), timeout=10
        )

        out.update(
            agent_id=agent.id,
            issue_id=issue.id,
            identifier=issue.identifier,
            run_id=run.id,
            checkout_status=enums_pb2.IssueStatus.Name(checked_out.status),
            checkout_token=checked_out.checkout.token,
            holder={
                "agent_id": read.checkout.agent_id,
                "run_id": read.checkout.run_id,
                "token": read.checkout.token,
            },
            comment={
                "id": comment.id,
                "body": comment.body,
                "author_agent_id": comment.author_agent_id,
                "created_by_run_id": comment.created_by_run_id,
            },
            comments_read=[
                {"id": c.id, "body": c.body, "author_agent_id": c.author_agent_id}
                for c in comments
            ],
            cluster_leader=status.leader_id if status.HasField("leader_id") else None,
        )
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
