//! The ZooKeeper transport against real ZooKeeper servers from the project's test-server
//! launcher: every operation's reply and failure, watches as pushes, chroot and digest login,
//! session state changes (a paused server: disconnected, reconnected, expired), a reply held
//! back (a connection loss, though applied; a new connection in the same session) and a client
//! leaving a paused ensemble member for another within its session.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Mutex, OnceLock};

use super::*;

#[path = "../../../../tests/support/test_servers.rs"]
mod test_servers;
use test_servers::TestServers;

/// The session asked for where the test does not pause servers.
const SESSION: Duration = Duration::from_secs(10);

/// One standalone server shared by the tests that never pause it (each under its own chroot).
/// Never dropped: the launcher stops it when this process exits (its stdin closes).
fn shared_url() -> String {
    static SERVER: OnceLock<Mutex<TestServers>> = OnceLock::new();
    SERVER.get_or_init(|| Mutex::new(TestServers::start(&["zookeeper"]))).lock().unwrap().url()
}

/// A chroot no other test or run uses.
fn unique(tag: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("/lg-{tag}-{}-{n}-{t}", std::process::id())
}

fn config(url: &str, session: Duration, response: Duration) -> Config {
    let rest = url.strip_prefix("zookeeper://").expect("a zookeeper:// URL");
    let address = ZkAddress::parse(rest, false).unwrap();
    let hosts: Vec<String> = address.hosts.iter().map(|(h, p)| format!("{h}:{p}")).collect();
    Config {
        hosts: hosts.join(","),
        chroot: address.chroot.clone(),
        digest: address.digest.clone(),
        shown: address.shown(),
        members: address.hosts.clone(),
        tls: None,
        session_timeout: session,
        connect_timeout: Duration::from_secs(10),
        response_timeout: response,
    }
}

async fn connect(url: &str, session: Duration, response: Duration) -> (ZkTransport, mpsc::UnboundedReceiver<ZkNotice>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let zk = ZkTransport::connect(config(url, session, response), tx).await.unwrap_or_else(|e| panic!("{url}: {e}"));
    (zk, rx)
}

fn create(path: &str, data: &[u8], mode: CreateMode) -> ZkOp {
    ZkOp::Create { path: path.into(), data: data.to_vec(), mode }
}

async fn open(zk: &ZkTransport) -> (i64, Duration) {
    match zk.perform_op(ZkOp::OpenSession).await {
        Ok(ZkReply::Session { id, timeout }) => (id, timeout),
        other => panic!("OpenSession: {other:?}"),
    }
}

async fn exists(zk: &ZkTransport, path: &str) -> Option<Stat> {
    match zk.perform_op(ZkOp::Exists { path: path.into(), watch: false }).await {
        Ok(ZkReply::Exists(s)) => s,
        other => panic!("exists {path}: {other:?}"),
    }
}

/// The next notice within `within`.
async fn next(rx: &mut mpsc::UnboundedReceiver<ZkNotice>, within: Duration) -> Option<ZkNotice> {
    tokio::time::timeout(within, rx.recv()).await.ok().flatten()
}

/// Waits for session event `want`, skipping other session events; panics on a watch event.
async fn session_event(rx: &mut mpsc::UnboundedReceiver<ZkNotice>, want: SessionEvent, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(ZkNotice::Session(e))) if e == want => return,
            Ok(Some(ZkNotice::Session(_))) => {}
            other => panic!("waiting for {want:?}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_op_round_trips() {
    let url = shared_url();
    let chroot = unique("ops");
    let (zk, mut notices) = connect(&format!("{url}{chroot}"), SESSION, Duration::from_secs(5)).await;
    let (id, timeout) = open(&zk).await;
    assert_ne!(id, 0);
    assert_eq!(timeout, SESSION, "the ensemble grants what it allows (1 s to 60 s)");
    assert_eq!(open(&zk).await, (id, timeout), "OpenSession on a live session answers that session");

    // A create whose parents (and chroot) are missing makes them as containers.
    let Ok(ZkReply::Created { path, stat: n }) = zk.perform_op(create("/locks/a/n", b"v1", CreateMode::Persistent)).await else {
        panic!("create /locks/a/n")
    };
    assert_eq!(path, "/locks/a/n");
    assert!(n.czxid > 0 && n.version == 0 && n.ephemeral_owner == 0, "{n:?}");
    let (root, _) = connect(&url, SESSION, Duration::from_secs(5)).await;
    // (ZooKeeper reports no owner for a container, so a client cannot tell one from a
    // persistent node: the parents are checked to exist, under the chroot, owned by no session.)
    for parent in [chroot.clone(), format!("{chroot}/locks"), format!("{chroot}/locks/a")] {
        let s = exists(&root, &parent).await.unwrap_or_else(|| panic!("{parent} missing"));
        assert_eq!(s.ephemeral_owner, 0, "{parent}");
    }
    assert_eq!(exists(&root, &format!("{chroot}/locks/a/n")).await.map(|s| s.czxid), Some(n.czxid), "paths live under the chroot");

    // Sequential names come back whole, with their stat (czxid: the fencing token).
    let mut made = Vec::new();
    for _ in 0..2 {
        match zk.perform_op(create("/locks/a/q-", b"", CreateMode::EphemeralSequential)).await {
            Ok(ZkReply::Created { path, stat }) => made.push((path, stat)),
            other => panic!("sequential create: {other:?}"),
        }
    }
    let seq = |p: &str| -> u64 {
        let digits = p.strip_prefix("/locks/a/q-").unwrap_or_else(|| panic!("{p}"));
        assert_eq!(digits.len(), 10, "{p}");
        digits.parse().unwrap()
    };
    assert_eq!(seq(&made[1].0), seq(&made[0].0) + 1);
    assert!(made[0].1.czxid > n.czxid && made[1].1.czxid > made[0].1.czxid);
    assert!(made.iter().all(|(_, s)| s.ephemeral_owner == id));
    assert_eq!(zk.perform_op(create("/locks/a/n", b"", CreateMode::Persistent)).await, Err(ZkFailure::NodeExists));

    let Ok(ZkReply::Children(mut children)) = zk.perform_op(ZkOp::Children { path: "/locks/a".into(), watch: false }).await else {
        panic!("children")
    };
    children.sort();
    let names: Vec<String> = made.iter().map(|(p, _)| p["/locks/a/".len()..].to_string()).collect();
    assert_eq!(children, [vec!["n".to_string()], names].concat());
    assert_eq!(exists(&zk, "/locks/a/n").await.map(|s| s.czxid), Some(n.czxid));
    assert_eq!(exists(&zk, "/locks/a/none").await, None);
    assert_eq!(zk.perform_op(ZkOp::GetData { path: "/locks/a/n".into(), watch: false }).await, Ok(ZkReply::Data(b"v1".to_vec(), n)));

    let check = |path: &str, version| zk.perform_op(ZkOp::Check { path: path.into(), version });
    assert_eq!(check("/locks/a/n", Some(0)).await, Ok(ZkReply::Checked));
    assert_eq!(check("/locks/a/n", None).await, Ok(ZkReply::Checked));
    assert_eq!(check("/locks/a/n", Some(5)).await, Err(ZkFailure::BadVersion));
    assert_eq!(check("/locks/a/none", None).await, Err(ZkFailure::NoNode));

    let delete = |path: &str, version| zk.perform_op(ZkOp::Delete { path: path.into(), version });
    assert_eq!(delete("/locks/a", None).await, Err(ZkFailure::NotEmpty));
    assert_eq!(delete("/locks/a/n", Some(3)).await, Err(ZkFailure::BadVersion));
    assert_eq!(delete("/locks/a/n", Some(0)).await, Ok(ZkReply::Deleted));
    assert_eq!(delete("/locks/a/n", None).await, Err(ZkFailure::NoNode));
    assert_eq!(zk.perform_op(ZkOp::GetData { path: "/locks/a/n".into(), watch: false }).await, Err(ZkFailure::NoNode));
    assert_eq!(zk.perform_op(ZkOp::Children { path: "/nope".into(), watch: false }).await, Err(ZkFailure::NoNode));
    for (p, _) in &made {
        assert_eq!(delete(p, None).await, Ok(ZkReply::Deleted));
    }
    assert_eq!(next(&mut notices, Duration::from_millis(200)).await, None, "no watch was set, the session stayed up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_fire_once_as_pushes_without_the_chroot() {
    let url = format!("{}{}", shared_url(), unique("watch"));
    let (zk, mut notices) = connect(&url, SESSION, Duration::from_secs(5)).await;
    let (other, _) = connect(&url, SESSION, Duration::from_secs(5)).await;
    assert_eq!(zk.perform_op(ZkOp::Exists { path: "/w/n".into(), watch: true }).await, Ok(ZkReply::Exists(None)));
    assert!(matches!(other.perform_op(create("/w/n", b"", CreateMode::Persistent)).await, Ok(ZkReply::Created { .. })));
    let created = ZkNotice::Watch { path: "/w/n".into(), event: WatchEvent::Created };
    assert_eq!(next(&mut notices, Duration::from_secs(5)).await, Some(created));

    assert!(matches!(zk.perform_op(ZkOp::GetData { path: "/w/n".into(), watch: true }).await, Ok(ZkReply::Data(..))));
    assert_eq!(zk.perform_op(ZkOp::Children { path: "/w".into(), watch: true }).await, Ok(ZkReply::Children(vec!["n".into()])));
    assert_eq!(other.perform_op(ZkOp::Delete { path: "/w/n".into(), version: None }).await, Ok(ZkReply::Deleted));
    let mut fired = vec![next(&mut notices, Duration::from_secs(5)).await, next(&mut notices, Duration::from_secs(5)).await];
    fired.sort_by_key(|n| format!("{n:?}"));
    let deleted = ZkNotice::Watch { path: "/w/n".into(), event: WatchEvent::Deleted };
    let children = ZkNotice::Watch { path: "/w".into(), event: WatchEvent::ChildrenChanged };
    assert_eq!(fired, [Some(children), Some(deleted)]);

    // One-shot: the watches are spent.
    assert!(matches!(other.perform_op(create("/w/n", b"", CreateMode::Persistent)).await, Ok(ZkReply::Created { .. })));
    assert_eq!(next(&mut notices, Duration::from_millis(500)).await, None);
    assert_eq!(other.perform_op(ZkOp::Delete { path: "/w/n".into(), version: None }).await, Ok(ZkReply::Deleted));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digest_login_reaches_what_its_acl_allows_and_nothing_else() {
    let url = shared_url();
    let host = url.strip_prefix("zookeeper://").unwrap().to_string();
    let secured = unique("acl");
    // The node only `app` (with its password) may use, made by an ordinary ZooKeeper client.
    let admin = zk::Client::connector().with_auth("digest", b"app:s3cret").connect(&host).await.unwrap();
    admin.create(&secured, b"", &zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all())).await.unwrap();

    let (app, _) = connect(&format!("zookeeper://app:s3cret@{host}{secured}"), SESSION, Duration::from_secs(5)).await;
    for path in ["/x", "/locks/x"] {
        let made = app.perform_op(create(path, b"", CreateMode::Ephemeral)).await;
        assert!(matches!(made, Ok(ZkReply::Created { .. })), "{path}: {made:?}");
    }
    for (login, what) in [("app:wrong-pw@", "a wrong password"), ("", "no login")] {
        let (zk, _) = connect(&format!("zookeeper://{login}{host}{secured}"), SESSION, Duration::from_secs(5)).await;
        // The chroot node's ACL is `app`'s alone: no create in it, no read of it.
        match zk.perform_op(create("/y", b"", CreateMode::Ephemeral)).await {
            Err(ZkFailure::Other(e)) => {
                assert_eq!(e.kind(), ErrorKind::Authentication, "{what}: {e}");
                assert!(!e.message().contains("wrong-pw") && !e.message().contains("s3cret"), "{e}");
            }
            other => panic!("{what}: {other:?}"),
        }
        let read = zk.perform_op(ZkOp::GetData { path: "/".into(), watch: false }).await;
        assert!(matches!(&read, Err(ZkFailure::Other(e)) if e.kind() == ErrorKind::Authentication), "{what}: {read:?}");
    }
    for path in ["/x", "/locks/x"] {
        assert_eq!(app.perform_op(ZkOp::Delete { path: path.into(), version: None }).await, Ok(ZkReply::Deleted));
    }
    admin.delete(&format!("{secured}/locks"), None).await.unwrap();
    admin.delete(&secured, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_gives_up_within_the_connect_timeout() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut c = config(&format!("zookeeper://127.0.0.1:{port}"), SESSION, Duration::from_secs(1));
    c.connect_timeout = Duration::from_millis(800);
    let (tx, _rx) = mpsc::unbounded_channel();
    let started = std::time::Instant::now();
    let e = into_error(ZkTransport::connect(c, tx).await.err().expect("nobody listens there"));
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_server_disconnects_reconnects_within_the_session_then_expires_it() {
    let mut server = TestServers::start(&["zookeeper"]);
    let session = Duration::from_secs(4);
    let (zk, mut notices) = connect(&format!("{}/expiry", server.url()), session, Duration::from_secs(1)).await;
    let (id, _) = open(&zk).await;
    assert!(matches!(zk.perform_op(create("/e/n", b"", CreateMode::Ephemeral)).await, Ok(ZkReply::Created { .. })));

    // Paused shorter than the session: disconnected, then back in the same session, with its
    // ephemeral node. A request meanwhile is a connection loss after the response timeout.
    server.command("pause 0");
    session_event(&mut notices, SessionEvent::Disconnected, Duration::from_secs(3)).await;
    let started = std::time::Instant::now();
    let r = zk.perform_op(ZkOp::Exists { path: "/e/n".into(), watch: false }).await;
    assert!(matches!(r, Err(ZkFailure::ConnectionLoss(_))), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    server.command("resume 0");
    session_event(&mut notices, SessionEvent::Reconnected, Duration::from_secs(5)).await;
    assert_eq!(exists(&zk, "/e/n").await.map(|s| s.ephemeral_owner), Some(id));
    assert_eq!(open(&zk).await.0, id);

    // Paused past the session: the client gives the session up (Expired), requests say so, and
    // OpenSession makes a new session; the old one's ephemeral node goes with it.
    server.command("pause 0");
    session_event(&mut notices, SessionEvent::Disconnected, Duration::from_secs(3)).await;
    session_event(&mut notices, SessionEvent::Expired, Duration::from_secs(10)).await;
    server.command("resume 0");
    assert_eq!(zk.perform_op(ZkOp::Exists { path: "/e/n".into(), watch: false }).await, Err(ZkFailure::SessionExpired));
    let (new_id, _) = open(&zk).await;
    assert_ne!(new_id, id);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while exists(&zk, "/e/n").await.is_some() {
        assert!(std::time::Instant::now() < deadline, "the expired session's ephemeral node stays");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(next(&mut notices, Duration::from_millis(200)).await, None, "nothing from the old session");
}

/// The member (index) serving session `id`, from each member's `cons` four-letter word.
fn member_of(servers: &TestServers, id: i64) -> Option<usize> {
    let sid = format!("sid=0x{id:x}");
    (0..servers.node_count()).find(|&i| {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", servers.port(i))) else { return false };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let mut out = String::new();
        s.write_all(b"cons").is_ok() && s.read_to_string(&mut out).is_ok() && out.contains(&sid)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaves_a_paused_member_for_another_within_its_session() {
    let mut ensemble = TestServers::start(&["zookeeper", "--members", "3"]);
    let (zk, mut notices) = connect(&ensemble.url(), Duration::from_secs(10), Duration::from_secs(1)).await;
    let (id, _) = open(&zk).await;
    assert!(matches!(zk.perform_op(create("/m/n", b"", CreateMode::Ephemeral)).await, Ok(ZkReply::Created { .. })));
    let member = member_of(&ensemble, id).expect("some member serves the session");
    ensemble.command(&format!("pause {member}"));
    session_event(&mut notices, SessionEvent::Disconnected, Duration::from_secs(3)).await;
    session_event(&mut notices, SessionEvent::Reconnected, Duration::from_secs(9)).await;
    assert_eq!(exists(&zk, "/m/n").await.map(|s| s.ephemeral_owner), Some(id), "same session, node kept");
    assert_eq!(open(&zk).await.0, id);
    let now = member_of(&ensemble, id);
    assert!(now.is_some() && now != Some(member), "served by {now:?}, paused {member}");
    ensemble.command(&format!("resume {member}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_held_back_is_a_connection_loss_and_the_session_moves_to_a_new_connection() {
    let mut proxied = TestServers::start(&["zookeeper", "--proxied"]);
    let (zk, mut notices) = connect(&format!("{}/deaf", proxied.url()), SESSION, Duration::from_secs(1)).await;
    let (id, _) = open(&zk).await;
    assert!(matches!(zk.perform_op(create("/d/first", b"", CreateMode::Ephemeral)).await, Ok(ZkReply::Created { .. })));

    // The server applies the create but its reply never comes back: ConnectionLoss after the
    // response timeout, which is what it says (maybe applied).
    proxied.command("deafen");
    let started = std::time::Instant::now();
    let r = zk.perform_op(create("/d/n", b"", CreateMode::Ephemeral)).await;
    assert!(matches!(r, Err(ZkFailure::ConnectionLoss(_))), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    // The silent connection is left for a new one (new connections are heard) within the session.
    session_event(&mut notices, SessionEvent::Disconnected, Duration::from_secs(3)).await;
    session_event(&mut notices, SessionEvent::Reconnected, Duration::from_secs(5)).await;
    assert_eq!(open(&zk).await.0, id);
    assert_eq!(exists(&zk, "/d/n").await.map(|s| s.ephemeral_owner), Some(id), "the create was applied");
    assert_eq!(exists(&zk, "/d/first").await.map(|s| s.ephemeral_owner), Some(id));
    proxied.command("restore");
}

#[test]
fn the_crates_errors_map_to_what_a_recipe_decides_on() {
    use zk::Error as E;
    let cases = [
        (E::NoNode, ZkFailure::NoNode),
        (E::NodeExists, ZkFailure::NodeExists),
        (E::BadVersion, ZkFailure::BadVersion),
        (E::NotEmpty, ZkFailure::NotEmpty),
        (E::SessionExpired, ZkFailure::SessionExpired),
        (E::ClientClosed, ZkFailure::SessionExpired),
    ];
    for (e, want) in cases {
        assert_eq!(failure(e.clone(), "op"), want, "{e:?}");
    }
    // Maybe applied, or no member reached: retryable within the session.
    for e in [E::ConnectionLoss, E::Timeout, E::NoHosts, E::SessionMoved, E::Throttled, E::NotReadOnly] {
        assert!(matches!(failure(e.clone(), "op"), ZkFailure::ConnectionLoss(_)), "{e:?}");
    }
    for (e, kind) in [
        (E::NoAuth, ErrorKind::Authentication),
        (E::AuthFailed, ErrorKind::Authentication),
        (E::BadArguments(&"bad path"), ErrorKind::InvalidArgument),
        (E::InvalidAcl, ErrorKind::Protocol),
        (E::NoChildrenForEphemerals, ErrorKind::Protocol),
        (E::UnexpectedErrorCode(-999), ErrorKind::Protocol),
    ] {
        match failure(e.clone(), "create /a") {
            ZkFailure::Other(err) => {
                assert_eq!(err.kind(), kind, "{e:?}: {err}");
                assert!(err.message().starts_with("create /a: "), "{err}");
            }
            other => panic!("{e:?}: {other:?}"),
        }
    }
    assert_eq!(into_error(ZkFailure::ConnectionLoss("x".into())).kind(), ErrorKind::Connection);
}
