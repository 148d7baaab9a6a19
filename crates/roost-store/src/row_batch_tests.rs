//! The batched writes leave the file exactly as writing each change in order would.

use roost_core::entity::{Company, CostEvent};
use roost_core::idempotency::Remembered;
use roost_core::{Change, Outcome, Timestamp};
use sqlx::{Connection, Row, SqliteConnection};

use super::RowBatch;
use crate::rows::SCHEMA;

async fn db() -> SqliteConnection {
    let mut conn = SqliteConnection::connect("sqlite::memory:")
        .await
        .expect("in-memory sqlite");
    sqlx::raw_sql(SCHEMA)
        .execute(&mut conn)
        .await
        .expect("schema");
    conn
}

fn company(id: &str, name: &str) -> Company {
    Company {
        id: id.into(),
        name: name.into(),
        issue_prefix: "T".into(),
        issue_counter: 0,
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
    }
}

fn remembered(key: &str, company_name: &str) -> Change {
    Change::Remembered(Remembered {
        key: key.into(),
        at: Timestamp(7),
        index: 1,
        outcome: Ok(Outcome::Company(company("c", company_name))),
    })
}

fn cost(id: &str, cents: u64) -> Change {
    Change::CostEvent(CostEvent {
        id: id.into(),
        company_id: "c".into(),
        agent_id: "a".into(),
        issue_id: None,
        heartbeat_run_id: None,
        provider: "p".into(),
        model: "m".into(),
        input_tokens: 0,
        cached_input_tokens: 0,
        output_tokens: 0,
        cost_cents: cents,
        occurred_at: Timestamp(1),
        created_at: Timestamp(1),
        source: "agent".into(),
    })
}

async fn strings(conn: &mut SqliteConnection, sql: &str) -> Vec<String> {
    sqlx::query(sql)
        .fetch_all(conn)
        .await
        .expect("query")
        .iter()
        .map(|r| r.get::<String, _>(0))
        .collect()
}

#[tokio::test]
async fn a_hundred_rows_and_rewrites_of_one_row_land_as_the_last_write() {
    let mut conn = db().await;
    let mut batch = RowBatch::default();
    for i in 0..100 {
        batch
            .add(&Change::Company(company(&format!("c{i:03}"), "first")))
            .expect("add");
    }
    batch
        .add(&Change::Company(company("c007", "second")))
        .expect("add");
    batch.write(&mut conn).await.expect("write");
    let names = strings(
        &mut conn,
        "SELECT json_extract(data, '$.name') FROM companies",
    )
    .await;
    assert_eq!(names.len(), 100, "100 rows across 64/16/4/1-row statements");
    let c7 = strings(
        &mut conn,
        "SELECT json_extract(data, '$.name') FROM companies WHERE id = 'c007'",
    )
    .await;
    assert_eq!(c7, ["second"]);
}

#[tokio::test]
async fn a_forgotten_key_is_deleted_and_a_key_remembered_after_it_survives() {
    let mut conn = db().await;
    let mut first = RowBatch::default();
    for key in ["k1", "k2", "k3"] {
        first.add(&remembered(key, "old")).expect("add");
    }
    first.write(&mut conn).await.expect("write");

    let mut batch = RowBatch::default();
    batch.add(&Change::Forgotten("k1".into())).expect("add");
    batch.add(&remembered("k2", "new")).expect("add");
    batch.add(&Change::Forgotten("k2".into())).expect("add");
    batch.add(&Change::Forgotten("k3".into())).expect("add");
    batch.add(&remembered("k3", "again")).expect("add");
    batch.add(&remembered("k4", "fresh")).expect("add");
    batch.write(&mut conn).await.expect("write");

    let keys = strings(&mut conn, "SELECT key FROM idempotency ORDER BY key").await;
    assert_eq!(keys, ["k3", "k4"]);
}

#[tokio::test]
async fn a_cost_event_written_twice_keeps_its_first_version() {
    let mut conn = db().await;
    let mut first = RowBatch::default();
    first.add(&cost("e1", 5)).expect("add");
    first.write(&mut conn).await.expect("write");
    let mut batch = RowBatch::default();
    batch.add(&cost("e1", 9)).expect("add");
    batch.add(&cost("e2", 3)).expect("add");
    batch.add(&cost("e2", 4)).expect("add");
    batch.write(&mut conn).await.expect("write");
    let cents = strings(
        &mut conn,
        "SELECT id || ':' || json_extract(data, '$.costCents') FROM cost_events ORDER BY id",
    )
    .await;
    assert_eq!(cents, ["e1:5", "e2:3"]);
}

#[tokio::test]
async fn a_row_already_in_the_file_is_rewritten_by_a_later_apply() {
    let mut conn = db().await;
    let mut first = RowBatch::default();
    first
        .add(&Change::Company(company("c1", "first")))
        .expect("add");
    first
        .add(&Change::Company(company("c2", "other")))
        .expect("add");
    first.add(&remembered("k", "first")).expect("add");
    first.write(&mut conn).await.expect("write");
    let mut later = RowBatch::default();
    later
        .add(&Change::Company(company("c1", "second")))
        .expect("add");
    later.add(&remembered("k", "second")).expect("add");
    later.write(&mut conn).await.expect("write");
    let names = strings(
        &mut conn,
        "SELECT id || '=' || json_extract(data, '$.name') FROM companies ORDER BY id",
    )
    .await;
    assert_eq!(names, ["c1=second", "c2=other"]);
    let kept = strings(&mut conn, "SELECT data FROM idempotency").await;
    assert_eq!(kept.len(), 1, "one row per key");
    assert!(kept[0].contains("\"second\""), "{}", kept[0]);
}
