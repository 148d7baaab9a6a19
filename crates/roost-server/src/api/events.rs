//! The event stream (`GET /api/companies/{cid}/events` as Server-Sent Events, gRPC `Watch`):
//! every accepted write of a company, as the activity log records it, after a `seq` the client
//! names, then live. Read from this node's `state.db` whenever its applied index moves, so any
//! node serves it; `seq` is decided in apply and so the same on every node, which is what lets
//! a client that saw `seq` on one node resume on another with nothing missed or repeated. The
//! activity log is never compacted, so any `seq` can be resumed from.

use std::time::Duration;

use roost_core::activity::ActivityEntry;
use tokio::sync::mpsc;

use super::Api;
use crate::auth::Caller;
use crate::error::ApiError;

/// Events read per query; a client far behind gets them in pages of this many.
const PAGE: u32 = 256;
/// An idle stream says it is alive this often (an SSE comment), so proxies keep it open.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// What an event stream yields: an event (its activity entry; REST shows it as
/// `roost_core::views::Event`), or a sign of life while nothing happens.
#[derive(Debug)]
pub enum StreamItem {
    Event(Box<ActivityEntry>),
    KeepAlive,
}

pub type EventStream = tokio_stream::wrappers::ReceiverStream<Result<StreamItem, ApiError>>;

impl Api {
    /// The company's events after `after` (0: from the first); with `follow`, then every new
    /// one as this node applies it, until the client goes or the node stops.
    pub async fn events(
        &self,
        caller: &Caller,
        company_id: &str,
        after: u64,
        follow: bool,
    ) -> Result<EventStream, ApiError> {
        let company = self.get_company(caller, company_id).await?;
        let (tx, rx) = mpsc::channel(PAGE as usize);
        let api = self.clone();
        tokio::spawn(async move {
            let mut applied = api.reader().applied_watch();
            let mut stopping = api.stopping();
            let mut cursor = after;
            loop {
                applied.borrow_and_update();
                let page = match api
                    .reader()
                    .activity_after(Some(&company.id), cursor, PAGE)
                    .await
                {
                    Ok(page) => page,
                    Err(e) => {
                        let _ = tx.send(Err(ApiError::from(e))).await;
                        return;
                    }
                };
                let full = page.len() == PAGE as usize;
                for entry in page {
                    cursor = entry.seq;
                    let event = StreamItem::Event(Box::new(entry));
                    if tx.send(Ok(event)).await.is_err() {
                        return;
                    }
                }
                if full {
                    continue;
                }
                if !follow {
                    return;
                }
                let woke = tokio::select! {
                    changed = applied.changed() => changed.is_ok(),
                    // Stopping, or the server gone: either way the stream ends.
                    _ = stopping.wait_for(|stop| *stop) => false,
                    _ = tokio::time::sleep(KEEP_ALIVE) => {
                        // Nothing new for a while: a sign of life, then wait again.
                        match tx.try_send(Ok(StreamItem::KeepAlive)) {
                            Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => true,
                            Err(mpsc::error::TrySendError::Closed(_)) => false,
                        }
                    }
                    _ = tx.closed() => false,
                };
                if !woke {
                    return;
                }
            }
        });
        Ok(tokio_stream::wrappers::ReceiverStream::new(rx))
    }
}
