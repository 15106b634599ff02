//! A loopback TCP proxy in front of a real server that can make its connections go silent:
//! [`SilentProxy::silence`] stops forwarding on every connection open at that moment while
//! keeping its sockets open (a hung proxy, a half-open connection); connections opened afterwards
//! pass normally. [`SilentProxy::freeze`] also leaves every later connection silent (a frozen
//! host: TCP connects, nothing answers). Runs on the test's tokio runtime and stops with it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A proxy from `127.0.0.1:port` to an upstream port.
pub struct SilentProxy {
    pub port: u16,
    /// Connections opened before the current value of this counter are silent.
    epoch: watch::Sender<u64>,
    /// Set by `freeze`: new connections are accepted and held open, never forwarded.
    frozen: Arc<AtomicBool>,
}

impl SilentProxy {
    /// Listens on a free loopback port and forwards to `127.0.0.1:upstream`.
    pub async fn start(upstream: u16) -> SilentProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (epoch, _) = watch::channel(0u64);
        let rx = epoch.subscribe();
        let to: SocketAddr = ([127, 0, 0, 1], upstream).into();
        let frozen = Arc::new(AtomicBool::new(false));
        let is_frozen = frozen.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let rx = rx.clone();
                if is_frozen.load(Ordering::SeqCst) {
                    tokio::spawn(async move {
                        let _keep_open = client;
                        std::future::pending::<()>().await;
                    });
                    continue;
                }
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(to).await else { return };
                    let mine = *rx.borrow();
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::spawn(pump(cr, sw, mine, rx.clone()));
                    tokio::spawn(pump(sr, cw, mine, rx));
                });
            }
        });
        SilentProxy { port, epoch, frozen }
    }

    /// The proxy's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Every connection open now stops forwarding, in both directions, and stays open.
    pub fn silence(&self) {
        self.epoch.send_modify(|e| *e += 1);
    }

    /// Every connection, open now or opened later, stays open and forwards nothing.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
        self.silence();
    }
}

/// Copies `from` → `to` while the proxy's epoch is the connection's own; then holds both
/// halves open, forwarding nothing, until the runtime stops.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mine: u64,
    mut epoch: watch::Receiver<u64>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if *epoch.borrow_and_update() != mine {
            break;
        }
        tokio::select! {
            r = from.read(&mut buf) => match r {
                Ok(0) | Err(_) => {
                    let _ = to.shutdown().await;
                    return;
                }
                Ok(n) => {
                    if *epoch.borrow() != mine {
                        break; // silenced meanwhile: these bytes are swallowed
                    }
                    if to.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            },
            _ = epoch.changed() => {}
        }
    }
    let _keep_open = (from, to);
    std::future::pending::<()>().await;
}
