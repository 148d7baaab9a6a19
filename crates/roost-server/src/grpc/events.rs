//! `Watch`: the company's event stream over gRPC, the same stream as REST's SSE
//! (`api/events.rs`), each event an `ActivityEntry`.

use futures::stream::BoxStream;
use futures::StreamExt;
use roost_proto::v1 as pb;
use tonic::Status;

use super::convert;
use crate::api::{Api, StreamItem};
use crate::auth::Caller;
use crate::error::ApiError;

pub(super) async fn watch(
    api: &Api,
    caller: &Caller,
    body: pb::WatchRequest,
) -> Result<BoxStream<'static, Result<pb::ActivityEntry, Status>>, ApiError> {
    let stream = api
        .events(
            caller,
            &body.company_id,
            body.after_seq,
            body.follow.unwrap_or(true),
        )
        .await?;
    // HTTP/2 keeps an idle stream open by itself: the keep-alives are REST's.
    Ok(stream
        .filter_map(|item| async move {
            match item {
                Ok(StreamItem::Event(entry)) => Some(Ok(convert::activity_to_proto(*entry))),
                Ok(StreamItem::KeepAlive) => None,
                Err(e) => Some(Err(Status::from(e))),
            }
        })
        .boxed())
}
