//! The agent memory calls of `roost.v1.Control`: conversions and the calls into [`Api`], with
//! the same rules as REST's `/api/agents/{id}/memory...` and
//! `/api/companies/{cid}/memory/...` (`api/memory.rs`).

use roost_core::memory::{
    CompanyLive, CurrentTask, LiveParts, MemoryDocument, MemoryEntry, MemoryLive, NewMemoryEntry,
};
use roost_core::views::{MemorySearchHit, MemorySummary};
use roost_core::Timestamp;
use roost_proto::v1 as pb;
use roost_proto::ProtoEnum;

use super::convert::parse_json;
use crate::api::{Api, MemoryScope};
use crate::auth::Caller;
use crate::error::ApiError;

fn summary_to_proto(s: MemorySummary) -> pb::MemorySummary {
    let live = s.live.as_ref();
    pb::MemorySummary {
        door: s.recovery.door.as_str().into(),
        confidence: s.recovery.confidence,
        why: s.recovery.why.clone(),
        live_age_secs: s.recovery.age_secs,
        entry_count: s.entry_count as u64,
        bytes_used: s.bytes_used,
        documents: s
            .documents
            .iter()
            .map(|d| pb::MemoryDocumentInfo {
                name: d.name.clone(),
                version: d.version,
                bytes: d.bytes,
                updated_at_ms: d.updated_at.millis(),
            })
            .collect(),
        current_task: live
            .and_then(|l| l.parts.current_task.clone())
            .map(task_to_proto),
        coordinates_json: coordinates_json(live.and_then(|l| l.parts.coordinates.as_ref())),
        agent_id: s.agent_id,
        company_id: s.company_id,
    }
}

fn task_to_proto(t: CurrentTask) -> pb::CurrentTask {
    pb::CurrentTask {
        doing: t.doing,
        last: t.last,
        next: t.next,
    }
}

/// Live coordinates as JSON text; empty when never saved.
fn coordinates_json(coordinates: Option<&serde_json::Value>) -> String {
    coordinates.map(|c| c.to_string()).unwrap_or_default()
}

fn live_to_proto(l: MemoryLive) -> pb::MemoryLive {
    pb::MemoryLive {
        agent_id: l.agent_id,
        run_id: l.run_id,
        ..parts_to_proto(l.company_id, l.parts)
    }
}

fn company_live_to_proto(l: CompanyLive) -> pb::MemoryLive {
    pb::MemoryLive {
        run_id: l.run_id,
        updated_by_type: l.updated_by_type,
        updated_by_id: l.updated_by_id,
        ..parts_to_proto(l.company_id, l.parts)
    }
}

/// The live parts an agent's and a company's live state share, the rest left empty.
fn parts_to_proto(company_id: String, p: LiveParts) -> pb::MemoryLive {
    pb::MemoryLive {
        coordinates_json: coordinates_json(p.coordinates.as_ref()),
        company_id,
        current_task: p.current_task.map(task_to_proto),
        current_task_updated_at_ms: p.current_task_updated_at.map(Timestamp::millis),
        coordinates_updated_at_ms: p.coordinates_updated_at.map(Timestamp::millis),
        ..Default::default()
    }
}

fn entry_to_proto(e: MemoryEntry) -> pb::MemoryEntry {
    pb::MemoryEntry {
        id: e.id,
        agent_id: e.agent_id,
        seq: e.seq,
        run_id: e.run_id,
        wake_reason: e.wake_reason.map(|r| r.to_proto()).unwrap_or_default(),
        issue_id: e.issue_id,
        what: e.what,
        did: e.did,
        next: e.next,
        errors: e.errors,
        created_at_ms: e.created_at.millis(),
        shared: e.shared,
    }
}

fn document_to_proto(d: MemoryDocument) -> pb::MemoryDocument {
    pb::MemoryDocument {
        company_id: d.company_id,
        agent_id: d.agent_id,
        name: d.name,
        version: d.version,
        content: d.content,
        updated_at_ms: d.updated_at.millis(),
        updated_by_type: d.updated_by_type,
        updated_by_id: d.updated_by_id,
        run_id: d.run_id,
    }
}

fn hit_to_proto(h: MemorySearchHit) -> pb::MemoryHit {
    pb::MemoryHit {
        kind: h.kind.to_proto(),
        id: h.id,
        issue_id: h.issue_id,
        snippet: h.snippet,
        score: h.score,
        created_at_ms: h.created_at.millis(),
    }
}

/// An agent's document with `agent_id`, the company's shared one with only `company_id`.
fn scope(agent_id: String, company_id: String) -> Result<MemoryScope, ApiError> {
    match (agent_id.is_empty(), company_id.is_empty()) {
        (false, _) => Ok(MemoryScope::Agent(agent_id)),
        (true, false) => Ok(MemoryScope::Company(company_id)),
        (true, true) => Err(ApiError::bad_request(
            "name the document's agent (agent_id, or `me`) or, for a company document, company_id",
        )),
    }
}

pub(super) async fn summary(
    api: Api,
    caller: Caller,
    r: pb::GetMemorySummaryRequest,
) -> Result<pb::MemorySummary, ApiError> {
    Ok(summary_to_proto(
        api.memory_summary(&caller, &r.agent_id).await?,
    ))
}

pub(super) async fn entries(
    api: Api,
    caller: Caller,
    r: pb::ListMemoryEntriesRequest,
) -> Result<pb::ListMemoryEntriesResponse, ApiError> {
    let limit = r.limit.map(|l| l as usize);
    if r.agent_id.is_empty() && r.company_id.is_empty() {
        return Err(ApiError::bad_request(
            "name the log: agent_id (or `me`) for an agent's, company_id for its company's shared log",
        ));
    }
    let entries = match scope(r.agent_id, r.company_id)? {
        MemoryScope::Agent(agent) => api.memory_entries(&caller, &agent, limit).await?,
        MemoryScope::Company(company) => {
            api.shared_memory_entries(&caller, &company, limit).await?
        }
    };
    Ok(pb::ListMemoryEntriesResponse {
        entries: entries.into_iter().map(entry_to_proto).collect(),
    })
}

pub(super) async fn append(
    api: Api,
    caller: Caller,
    r: pb::AppendMemoryEntryRequest,
) -> Result<pb::MemoryEntry, ApiError> {
    let entry = NewMemoryEntry {
        issue_id: r.issue_id,
        what: r.what,
        did: r.did,
        next: r.next,
        errors: r.errors,
    };
    let shared = Some(r.company_id.as_str()).filter(|c| !c.is_empty());
    Ok(entry_to_proto(
        api.append_memory_entry(&caller, entry, shared).await?,
    ))
}

pub(super) async fn document(
    api: Api,
    caller: Caller,
    r: pb::GetMemoryDocumentRequest,
) -> Result<pb::MemoryDocument, ApiError> {
    let scope = scope(r.agent_id, r.company_id)?;
    Ok(document_to_proto(
        api.memory_document(&caller, &scope, &r.name).await?,
    ))
}

pub(super) async fn put_document(
    api: Api,
    caller: Caller,
    r: pb::PutMemoryDocumentRequest,
) -> Result<pb::MemoryDocument, ApiError> {
    let scope = scope(r.agent_id, r.company_id)?;
    let saved = api
        .put_memory_document(&caller, &scope, &r.name, r.content, r.expected_version)
        .await?;
    Ok(document_to_proto(saved))
}

pub(super) async fn search(
    api: Api,
    caller: Caller,
    r: pb::SearchMemoryRequest,
) -> Result<pb::SearchMemoryResponse, ApiError> {
    let hits = api
        .memory_search(&caller, &r.agent_id, Some(&r.q), r.limit, r.any_word)
        .await?;
    Ok(pb::SearchMemoryResponse {
        hits: hits.into_iter().map(hit_to_proto).collect(),
    })
}

/// `PUT /api/agents/me/memory/live`: the parts present are saved.
pub(super) async fn set_live(
    api: Api,
    caller: Caller,
    r: pb::SetMemoryLiveRequest,
) -> Result<pb::MemoryLive, ApiError> {
    let task = r.current_task.map(|t| CurrentTask {
        doing: t.doing,
        last: t.last,
        next: t.next,
    });
    let coordinates = r
        .coordinates_json
        .map(|c| parse_json("coordinates_json", &c))
        .transpose()?;
    if !r.company_id.is_empty() {
        let saved = api
            .set_company_memory_live(&caller, &r.company_id, task, coordinates)
            .await?;
        return Ok(company_live_to_proto(saved));
    }
    Ok(live_to_proto(
        api.set_memory_live(&caller, task, coordinates).await?,
    ))
}

pub(super) async fn company_live(
    api: Api,
    caller: Caller,
    r: pb::GetCompanyMemoryLiveRequest,
) -> Result<pb::MemoryLive, ApiError> {
    Ok(company_live_to_proto(
        api.company_memory_live(&caller, &r.company_id).await?,
    ))
}

pub(super) async fn document_versions(
    api: Api,
    caller: Caller,
    r: pb::ListMemoryDocumentVersionsRequest,
) -> Result<pb::ListMemoryDocumentVersionsResponse, ApiError> {
    let scope = scope(r.agent_id, r.company_id)?;
    let versions = api.memory_history(&caller, &scope, &r.name).await?;
    Ok(pb::ListMemoryDocumentVersionsResponse {
        versions: versions.into_iter().map(document_to_proto).collect(),
    })
}
