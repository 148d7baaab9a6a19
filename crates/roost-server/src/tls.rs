//! TLS on the node's listeners (rustls through `roost-tls`): an accept loop that does each
//! handshake in its own task under a deadline, and hands the finished streams to axum (as a
//! `Listener`) or to tonic (as an incoming stream). A client that speaks plaintext to a TLS port
//! fails its handshake and never reaches a service. The peer listener requires a certificate
//! from the cluster CA that names a node (`roost_tls::node_id`); anything else is dropped after
//! the handshake, before a byte of gRPC is read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use roost_tls::tokio_rustls::server::TlsStream;
use roost_tls::tokio_rustls::TlsAcceptor;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use crate::config::TlsConfig;

/// How long a client has to finish its handshake; a silent connection is dropped after it.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepted connections waiting to be served; the accept loop stops accepting while full.
const READY_QUEUE: usize = 64;

/// Handshakes in progress at once; past it the accept loop waits (connections queue in the
/// kernel's backlog), so clients that connect and stay silent hold at most this many sockets,
/// each for at most `HANDSHAKE_TIMEOUT`.
const MAX_HANDSHAKES: usize = 1024;

/// The rustls configs of a node's listeners and of its connections to peers.
#[derive(Clone)]
pub(crate) struct NodeTls {
    pub rest: Arc<roost_tls::rustls::ServerConfig>,
    pub grpc: Arc<roost_tls::rustls::ServerConfig>,
    /// The peer listener's: a client certificate signed by the cluster CA is required.
    pub peer_server: Arc<roost_tls::rustls::ServerConfig>,
    /// For connecting to peers (Raft, forwarding, a run's live log): the cluster CA and this
    /// node's certificate as its client certificate.
    pub peer: tonic::transport::ClientTlsConfig,
}

impl NodeTls {
    /// Reads `[tls]`; `None` when the node serves plaintext.
    pub fn load(config: &TlsConfig) -> Result<Option<NodeTls>, roost_tls::Error> {
        let (Some(cert_file), Some(key_file)) = (&config.cert_file, &config.key_file) else {
            return Ok(None);
        };
        let identity = roost_tls::Identity {
            cert_file,
            cert_setting: "tls.cert_file",
            key_file,
            key_setting: "tls.key_file",
        };
        let ca = config.ca_file.as_deref().map(|p| (p, "tls.ca_file"));
        // gRPC is HTTP/2 only, and tonic's client refuses a TLS connection that did not
        // negotiate h2; the REST server speaks HTTP/1.1 (axum's `http1` feature, Cargo.toml).
        let optional = roost_tls::ClientCerts::Optional;
        let grpc = roost_tls::server_config(&identity, ca, optional, &[b"h2"])?;
        let rest = roost_tls::server_config(&identity, ca, optional, &[b"http/1.1"])?;
        let required = roost_tls::ClientCerts::Required;
        let peer_server = roost_tls::server_config(&identity, ca, required, &[b"h2"])?;
        let mut peer = tonic::transport::ClientTlsConfig::new().identity(
            tonic::transport::Identity::from_pem(
                roost_tls::read_checked_pem(
                    cert_file,
                    "tls.cert_file",
                    roost_tls::PemKind::Certificates,
                )?,
                roost_tls::read_checked_pem(
                    key_file,
                    "tls.key_file",
                    roost_tls::PemKind::PrivateKey,
                )?,
            ),
        );
        // `TlsConfig::validate` requires the CA with TLS on: peers check each other against it.
        if let Some(ca) = &config.ca_file {
            peer = peer.ca_certificate(tonic::transport::Certificate::from_pem(
                roost_tls::read_checked_pem(ca, "tls.ca_file", roost_tls::PemKind::Certificates)?,
            ));
        }
        Ok(Some(NodeTls {
            rest: Arc::new(rest),
            grpc: Arc::new(grpc),
            peer_server: Arc::new(peer_server),
            peer,
        }))
    }
}

/// Who a listener serves once the handshake is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Anyone who finished the handshake (requests then carry bearer tokens).
    Anyone,
    /// Only a client certificate that names a node (the peer listener).
    Nodes,
}

/// The node id the client certificate of `stream` names, if any.
fn peer_node(stream: &TlsStream<TcpStream>) -> Option<u64> {
    let (_, session) = stream.get_ref();
    roost_tls::node_id(session.peer_certificates()?.first()?.as_ref())
}

/// Accepts TCP connections on `listener` until `stop`, does each TLS handshake in its own task
/// (so a slow client delays no one else) and yields the finished streams `admit` lets in.
pub(crate) fn accept(
    listener: TcpListener,
    config: Arc<roost_tls::rustls::ServerConfig>,
    admit: Admit,
    stop: watch::Receiver<bool>,
) -> mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)> {
    let (ready, rx) = mpsc::channel(READY_QUEUE);
    let acceptor = TlsAcceptor::from(config);
    let handshakes = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
    tokio::spawn(async move {
        let mut stopping = std::pin::pin!(crate::stopped(stop));
        loop {
            let permit = tokio::select! {
                permit = handshakes.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => return,
                },
                () = &mut stopping => return,
            };
            let (tcp, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(conn) => conn,
                    Err(error) => {
                        // Out of file descriptors, or a connection reset before accept: retrying
                        // at once would spin (see raise_open_file_limit in crates/roost/src/main.rs).
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut stopping => return,
                () = ready.closed() => return,
            };
            // gRPC answers in several small frames: without TCP_NODELAY, Nagle's algorithm and
            // delayed ACKs hold each reply ~40 ms (limits.rs sets it for plaintext).
            let _ = tcp.set_nodelay(true);
            let (acceptor, ready) = (acceptor.clone(), ready.clone());
            tokio::spawn(async move {
                let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await;
                drop(permit);
                match handshake {
                    Ok(Ok(stream)) if admit == Admit::Nodes && peer_node(&stream).is_none() => {
                        // Signed by the cluster CA, but a worker's or a client's certificate.
                        tracing::warn!(%peer, "peer listener: refused a certificate that names no node");
                    }
                    Ok(Ok(stream)) => {
                        let _ = ready.send((stream, peer)).await;
                    }
                    Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                }
            });
        }
    });
    rx
}

/// Finished TLS connections as an axum listener.
pub(crate) struct TlsListener {
    pub incoming: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    pub local_addr: SocketAddr,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.incoming.recv().await {
            Some(conn) => conn,
            // The accept loop stopped with the node: graceful shutdown ends the server.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}

/// Finished TLS connections as tonic's incoming stream.
pub(crate) fn incoming(
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
) -> impl futures::Stream<Item = Result<TlsStream<TcpStream>, std::io::Error>> {
    futures::StreamExt::map(tokio_stream::wrappers::ReceiverStream::new(rx), |(s, _)| {
        Ok(s)
    })
}
