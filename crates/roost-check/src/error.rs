//! The one error type: a history or snapshot that cannot be read.

/// Why a history or a snapshot could not be read. `line` is 1-based: the line of the JSON lines
/// file, or an operation's position in an in-memory history (the line it would be written on).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("line {line}: cannot read: {source}")]
    Io {
        line: usize,
        #[source]
        source: std::io::Error,
    },
    #[error("line {line}: malformed operation: {source}")]
    Json {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("line {line}: operation id {id} was already used on line {first}")]
    DuplicateId { line: usize, id: u64, first: usize },
    #[error("line {line}: operation {id} returns ({return_ns}) before it is called ({call_ns})")]
    ReturnBeforeCall {
        line: usize,
        id: u64,
        call_ns: i64,
        return_ns: i64,
    },
    #[error("malformed replica snapshot: {0}")]
    Snapshot(#[source] serde_json::Error),
}
