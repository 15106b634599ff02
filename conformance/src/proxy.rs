//! A loopback TCP proxy in front of the test server, for scenarios with `"proxy": true`: it can
//! make every connection it already carries go silent (a hung proxy, a frozen host, a half-open
//! TCP connection after a failover) while new connections work normally.
//!
//! A silenced connection forwards nothing until it is restored, and restoring closes it (both
//! sockets) with whatever it held back: delivering those bytes late would replay requests the
//! client has long given up on (an ACQUIRE granting a lock to a token nobody holds any more).
//!
//! A deafened connection still forwards requests to the server but holds back its replies: the
//! server applies what it is sent and the client never learns the outcome (a reply lost on the
//! way back). Restoring closes it the same way.
//!
//! A cut proxy is a server gone (a killed process): every connection is closed and the port
//! refuses new ones (the proxy stops listening), until restored. Cut behind, it is a load
//! balancer or TCP proxy whose server is gone: every connection is closed, and new ones are
//! accepted and closed at once.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

/// What a fixture step does to the proxies of a variant (scenarios that need `proxy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `silence`: see [`Proxy::silence`].
    Silence,
    /// `cut`: see [`Proxy::cut`].
    Cut,
    /// `cut_behind`: see [`Proxy::cut_behind`].
    CutBehind,
    /// `restore`: see [`Proxy::restore`].
    Restore,
}

#[derive(Default)]
struct State {
    /// Connections are numbered in accept order; those up to this number are silenced.
    silenced_upto: Option<u64>,
    /// Those up to this number forward requests but hold back replies.
    deaf_upto: Option<u64>,
    /// Connections up to this number were closed by a restore.
    closed_upto: u64,
    accepted: u64,
    /// Cut: the port does not listen.
    down: bool,
    /// Cut behind: new connections are closed as soon as they are accepted.
    empty: bool,
    closed: bool,
    /// Both sockets of every connection with its number, to shut them down on restore or drop.
    sockets: Vec<(u64, TcpStream)>,
}

type Shared = Arc<(Mutex<State>, Condvar)>;

/// The running proxy; dropping it closes every connection it carries.
pub struct Proxy {
    addr: SocketAddr,
    shared: Shared,
}

impl Proxy {
    /// Listens on a free loopback port and forwards each accepted connection to `upstream`.
    pub fn start(upstream: SocketAddr) -> Result<Proxy, String> {
        let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("proxy: {e}"))?;
        let addr = listener.local_addr().map_err(|e| format!("proxy: {e}"))?;
        let shared: Shared = Arc::default();
        let s = Arc::clone(&shared);
        thread::spawn(move || accept_loop(listener, upstream, s));
        Ok(Proxy { addr, shared })
    }

    /// `redis://` URL of the proxy.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// The proxy's loopback address (for URLs of other schemes, e.g. `zookeeper://`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every connection accepted so far stops forwarding in both directions (sockets stay open).
    pub fn silence(&self) {
        let mut st = self.shared.0.lock().expect("proxy state");
        st.silenced_upto = Some(st.accepted);
    }

    /// Every connection accepted so far keeps forwarding requests but holds back the server's
    /// replies (sockets stay open): the server applies them, the client hears nothing.
    pub fn deafen(&self) {
        let mut st = self.shared.0.lock().expect("proxy state");
        st.deaf_upto = Some(st.accepted);
    }

    /// Closes every connection and refuses new ones (stops listening on its port) until restored.
    pub fn cut(&self) {
        self.close_all(|st| st.down = true);
    }

    /// Closes every connection and closes new ones as soon as they are accepted, until
    /// restored: the server behind a load balancer is gone.
    pub fn cut_behind(&self) {
        self.close_all(|st| st.empty = true);
    }

    fn close_all(&self, mark: impl FnOnce(&mut State)) {
        let sockets = {
            let mut st = self.shared.0.lock().expect("proxy state");
            mark(&mut st);
            st.closed_upto = st.accepted;
            std::mem::take(&mut st.sockets)
        };
        self.shared.1.notify_all();
        for (_, s) in sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Applies `fault` (a fixture step).
    pub fn apply(&self, fault: Fault) {
        match fault {
            Fault::Silence => self.silence(),
            Fault::Cut => self.cut(),
            Fault::CutBehind => self.cut_behind(),
            Fault::Restore => self.restore(),
        }
    }

    /// Ends the silence (or deafness, or cut): the silenced connections are closed (dropping
    /// what they held back), as a hung proxy finally gives up on them; later connections are
    /// unaffected, and new ones are accepted again.
    pub fn restore(&self) {
        let sockets = {
            let mut st = self.shared.0.lock().expect("proxy state");
            st.down = false;
            st.empty = false;
            let Some(upto) = st.silenced_upto.take().into_iter().chain(st.deaf_upto.take()).max() else { return };
            st.closed_upto = upto;
            let (dead, live): (Vec<_>, Vec<_>) = std::mem::take(&mut st.sockets).into_iter().partition(|(id, _)| *id <= upto);
            st.sockets = live;
            dead
        };
        self.shared.1.notify_all();
        for (_, s) in sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let sockets = {
            let mut st = self.shared.0.lock().expect("proxy state");
            st.closed = true;
            std::mem::take(&mut st.sockets)
        };
        self.shared.1.notify_all();
        for (_, s) in sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
        // The accept loop polls: it sees `closed` within milliseconds and exits.
    }
}

/// Accepts connections until the proxy is dropped. While cut, the listening socket is closed
/// (connects are refused, as by a killed server) and bound again on the same port at restore.
fn accept_loop(listener: TcpListener, upstream: SocketAddr, shared: Shared) {
    let addr = listener.local_addr().expect("a bound listener has an address");
    let mut listening = Some(listener);
    loop {
        let (closed, down) = {
            let st = shared.0.lock().expect("proxy state");
            (st.closed, st.down)
        };
        if closed {
            return;
        }
        match (&listening, down) {
            (Some(_), true) => {
                listening = None;
                continue;
            }
            (None, false) => match TcpListener::bind(addr) {
                Ok(l) => listening = Some(l),
                Err(_) => {
                    thread::sleep(std::time::Duration::from_millis(5));
                    continue;
                }
            },
            (None, true) => {
                let st = shared.0.lock().expect("proxy state");
                let _ = shared.1.wait_timeout(st, std::time::Duration::from_millis(20));
                continue;
            }
            (Some(_), false) => {}
        }
        let l = listening.as_ref().expect("listening");
        // Non-blocking with a short sleep, so a cut closes the port within milliseconds.
        if l.set_nonblocking(true).is_err() {
            continue;
        }
        let client = match l.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(std::time::Duration::from_millis(2));
                continue;
            }
            Err(_) => continue,
        };
        let _ = client.set_nonblocking(false);
        if shared.0.lock().expect("proxy state").empty {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let Ok(server) = TcpStream::connect(upstream) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let id = {
            let mut st = shared.0.lock().expect("proxy state");
            st.accepted += 1;
            let id = st.accepted;
            for s in [&client, &server] {
                if let Ok(c) = s.try_clone() {
                    st.sockets.push((id, c));
                }
            }
            id
        };
        for (from, to, reply) in [(&client, &server, false), (&server, &client, true)] {
            let (Ok(from), Ok(to)) = (from.try_clone(), to.try_clone()) else { continue };
            let s = Arc::clone(&shared);
            thread::spawn(move || pump(id, from, to, reply, s));
        }
    }
}

/// Copies `from` to `to`, holding each chunk while connection `id` is silenced (or, for the
/// server's `reply` direction, deafened).
fn pump(id: u64, mut from: TcpStream, mut to: TcpStream, reply: bool, shared: Shared) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        {
            let (lock, cv) = &*shared;
            let mut st = lock.lock().expect("proxy state");
            let held = |st: &State| st.silenced_upto.is_some_and(|upto| id <= upto) || (reply && st.deaf_upto.is_some_and(|upto| id <= upto));
            while !st.closed && held(&st) {
                st = cv.wait(st).expect("proxy state");
            }
            if st.closed || id <= st.closed_upto {
                break;
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
