//! The network's connections to a peer: one that stops answering is replaced.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use crate::append_stream_tests::{delayed, start_peer};
use crate::faults::NetworkFaults;
use crate::network::{GrpcNetworkFactory, REDIAL_AFTER};

/// Forwards each connection to a target. [`WedgeProxy::wedge`] stops every connection open at
/// that moment from passing another byte, without closing it, as a link whose packets were
/// dropped until TCP backed off far; connections opened later pass.
struct WedgeProxy {
    addr: SocketAddr,
    generation: Arc<AtomicU64>,
    /// Connections accepted so far.
    accepted: Arc<AtomicU64>,
}

impl WedgeProxy {
    async fn start(target: SocketAddr) -> WedgeProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let proxy = WedgeProxy {
            addr: listener.local_addr().expect("local addr"),
            generation: Arc::default(),
            accepted: Arc::default(),
        };
        let (generation, accepted) = (proxy.generation.clone(), proxy.accepted.clone());
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                let Ok(outbound) = TcpStream::connect(target).await else {
                    continue;
                };
                // Nagle's delay on either side would hold each small message for 40 ms.
                let _ = (inbound.set_nodelay(true), outbound.set_nodelay(true));
                let born = generation.load(Ordering::SeqCst);
                let (in_read, in_write) = inbound.into_split();
                let (out_read, out_write) = outbound.into_split();
                tokio::spawn(pass(in_read, out_write, generation.clone(), born));
                tokio::spawn(pass(out_read, in_write, generation.clone(), born));
            }
        });
        proxy
    }

    fn wedge(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Copies `from` to `to` until the proxy's generation moves past `born`, then holds both
/// halves open and passes nothing more.
async fn pass(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    generation: Arc<AtomicU64>,
    born: u64,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let Ok(n) = from.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        if generation.load(Ordering::SeqCst) != born {
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Regression: after a partition healed, the leader's connection to a member still waited on
/// TCP's retransmission timer (doubled with each dropped packet) and every AppendEntries on it
/// timed out, while a new connection would have worked at once; HTTP/2's keepalive gave the
/// connection up only after 10 s. An exchange now dials anew once the connection has answered
/// nothing for a second (`network.rs`, `REDIAL_AFTER`).
#[tokio::test]
async fn a_connection_that_stops_answering_is_replaced_by_a_new_one() {
    let proxy = WedgeProxy::start(start_peer(true).await).await;
    let addr = proxy.addr.to_string();
    let network = GrpcNetworkFactory::new(NetworkFaults::default());
    let mut stream = None;
    let first = network
        .exchange_streamed(2, &addr, &mut stream, delayed(0), Duration::from_secs(5))
        .await;
    assert!(matches!(first, Ok(Some(_))), "{first:?}");
    assert!(
        network.peers.last_answer(2).is_some(),
        "an answered AppendEntries shows the member hears this node"
    );
    // Quiet for longer than the limit, but nothing went unanswered: the same connection.
    tokio::time::sleep(REDIAL_AFTER + Duration::from_millis(200)).await;
    let quiet = network
        .exchange_streamed(2, &addr, &mut stream, delayed(0), Duration::from_secs(5))
        .await;
    assert!(matches!(quiet, Ok(Some(_))), "{quiet:?}");
    assert_eq!(proxy.accepted(), 1, "a quiet connection was dialled anew");

    proxy.wedge();
    // As openraft does: one AppendEntries after another, each given a heartbeat interval.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut tries = 0;
    loop {
        tries += 1;
        let reply = network
            .exchange_streamed(2, &addr, &mut stream, delayed(0), Duration::from_millis(30))
            .await;
        if matches!(reply, Ok(Some(_))) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no answer within 5 s of the wedge ({tries} tries; HTTP/2's keepalive alone takes 10 s)"
        );
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    assert_eq!(proxy.accepted(), 2, "one new connection, not one per try");
}
