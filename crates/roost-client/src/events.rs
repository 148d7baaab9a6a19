//! A company's event stream (`GET /api/companies/{cid}/events`, Server-Sent Events): each
//! accepted write as it is applied. A broken stream is resumed on the next server from the
//! last `seq` received, so nothing is missed or repeated across a node's loss.

use std::time::Duration;

pub use roost_core::views::Event;

use crate::{Error, Result, RoostClient, API};

/// Waits this long before reconnecting after a stream broke.
const RECONNECT_PAUSE: Duration = Duration::from_millis(300);

/// Complete SSE frames (ending in a blank line) taken off the front of `buffer`: each event's
/// `data` parsed; comments (keep-alives) and `id` lines skipped (`seq` is in the data).
fn take_events(buffer: &mut String, url: &str) -> Result<Vec<Event>> {
    let mut events = Vec::new();
    while let Some(end) = buffer.find("\n\n") {
        let frame: String = buffer.drain(..end + 2).collect();
        for line in frame.lines() {
            if let Some(data) = line.strip_prefix("data:") {
                let event: Event =
                    serde_json::from_str(data.trim()).map_err(|e| Error::Decode {
                        url: url.to_string(),
                        reason: format!("an event that is not JSON: {e}"),
                    })?;
                events.push(event);
            }
        }
    }
    Ok(events)
}

impl RoostClient {
    /// Hands `sink` every event of `company_id` after `after`, in order. With `follow`, keeps
    /// going, reconnecting to the next server when a stream breaks; without, ends after the
    /// events there are now. Returns the last `seq` handed over.
    pub async fn follow_events(
        &self,
        company_id: &str,
        mut after: u64,
        follow: bool,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<u64> {
        loop {
            match self
                .stream_events(company_id, &mut after, follow, sink)
                .await
            {
                Ok(()) if !follow => return Ok(after),
                // The server ended a following stream: it is stopping. Another goes on.
                Ok(()) | Err(Error::Transport(_)) => self.prefer_next_server(),
                // No leader yet (an election after a node's loss): the same server, shortly.
                Err(e) if e.status() == Some(503) => {}
                Err(e) => return Err(e),
            }
            tokio::time::sleep(RECONNECT_PAUSE).await;
        }
    }

    /// One stream from the preferred server, moving `last` to each `seq` handed to `sink`.
    async fn stream_events(
        &self,
        company_id: &str,
        last: &mut u64,
        follow: bool,
        sink: &mut (dyn FnMut(Event) + Send),
    ) -> Result<()> {
        let url = self.url(&[API, "companies", company_id, "events"])?;
        let shown = url.to_string();
        let mut response = self
            .open_stream(
                url,
                &[("after", last.to_string()), ("follow", follow.to_string())],
            )
            .await?;
        let mut buffer = String::new();
        while let Some(chunk) = response.chunk().await.map_err(Error::Transport)? {
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            for event in take_events(&mut buffer, &shown)? {
                // A server never sends an event at or before `after`; skip one if it did.
                if event.seq > *last {
                    *last = event.seq;
                    sink(event);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_taken_whole_and_keep_alives_skipped() {
        let mut buffer = String::from(
            ": keep-alive\n\nid: 7\ndata: {\"seq\":7,\"index\":3,\"at\":\"2026-11-27T10:00:00Z\",\
             \"companyId\":\"c\",\"action\":\"issue.created\",\"entityType\":\"issue\",\
             \"entityId\":\"i\",\"actorType\":\"user\",\"actorId\":\"admin\",\"runId\":null,\
             \"details\":{}}\n\nid: 8\ndata: {\"seq\"",
        );
        let events = take_events(&mut buffer, "test").expect("frames");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].seq, 7);
        assert_eq!(
            buffer, "id: 8\ndata: {\"seq\"",
            "a partial frame waits for the rest"
        );
    }
}
