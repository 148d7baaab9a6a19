//! A TCP proxy that a test can cut, freeze and heal. Cutting drops every open connection and
//! refuses new ones, as a partition whose hosts answer with resets would. Freezing passes no
//! more bytes and closes nothing, as a partition that drops packets looks: open connections
//! go silent and new ones connect but never reach the target. Used to cut a worker (and its
//! agents' API calls) off from the cluster while the cluster keeps running.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A cheap `Clone` handle; the proxy runs until the runtime stops.
#[derive(Clone)]
pub struct CutProxy {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    /// Bumped on every cut, so open connections drop.
    cuts: Arc<watch::Sender<u64>>,
    /// While true, no byte passes in either direction.
    frozen: Arc<watch::Sender<bool>>,
}

impl CutProxy {
    /// Listens on a free loopback port and forwards every connection to `target`.
    pub async fn start(target: &str) -> anyhow::Result<CutProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let proxy = CutProxy {
            addr: listener.local_addr()?,
            cut: Arc::default(),
            cuts: Arc::new(watch::channel(0).0),
            frozen: Arc::new(watch::channel(false).0),
        };
        let (handle, target) = (proxy.clone(), target.to_string());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if handle.cut.load(Ordering::SeqCst) {
                    continue; // dropped: the connection is refused in effect
                }
                tokio::spawn(handle.clone().forward(client, target.clone()));
            }
        });
        Ok(proxy)
    }

    async fn forward(self, mut client: TcpStream, target: String) {
        let mut cuts = self.cuts.subscribe();
        let mut frozen = self.frozen.subscribe();
        let frozen_now = *frozen.borrow_and_update();
        if frozen_now {
            // Connected, and then nothing: held open until a cut.
            let _ = cuts.changed().await;
            return;
        }
        let Ok(mut server) = TcpStream::connect(&target).await else {
            return;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let froze = tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => false,
            _ = cuts.changed() => false,
            f = frozen.wait_for(|f| *f) => f.is_ok(),
        };
        if froze {
            // Silent from now on, both sockets open, until a cut.
            let _ = cuts.changed().await;
        }
    }

    /// `host:port` to dial instead of the target.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.cuts.send_modify(|n| *n += 1);
    }

    /// Stops every byte, closing nothing (a partition that drops packets). A connection open
    /// now stays silent for good; after [`CutProxy::heal`] new connections work.
    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
        self.frozen.send_replace(false);
    }
}
