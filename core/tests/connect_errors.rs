//! Every failed connect names the server (its address, the password redacted) and what it
//! answered, with a code and retryable flag that fit: nothing listening or nothing answering
//! (`CONNECTION`, retryable), a server of another kind or a TLS scheme at a plain port
//! (`PROTOCOL`), a refused or missing login (`AUTHENTICATION`) and a database that does not
//! exist (`INVALID_ARGUMENT`), none of them retryable. The same words on Redis, SQL, ZooKeeper
//! and etcd. Real servers from the project's launcher; the "HTTP server" is a plain TCP
//! listener here that answers like one, the "silent server" one that never answers.
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use lockgate_core::native::ClientOptions;
use lockgate_core::{Error, ErrorKind};
use test_servers::TestServers;

const SECRET: &str = "n0t-in-errors";

/// Connects to `url` (1 s connect timeout) and returns the error it must fail with.
async fn connect_error(url: &str) -> Error {
    let mut o = ClientOptions::new(url.to_string());
    o.connect_timeout = Duration::from_secs(1);
    match o.connect().await {
        Ok(_) => panic!("{url}: connected"),
        Err(e) => e,
    }
}

/// The checks every connect error passes: its code, its retryable flag, the address named,
/// no password.
fn check(e: &Error, kind: ErrorKind, retryable: bool, address: &str, says: &str) {
    assert_eq!(e.kind(), kind, "{e}: {}", e.message());
    assert_eq!(e.retryable(), retryable, "{e}");
    assert!(e.message().contains(address), "the message names {address}: {e}");
    assert!(e.message().contains(says), "the message says {says:?}: {e}");
    for secret in [SECRET, "lockgate-test-pw"] {
        assert!(!e.message().contains(secret), "the password leaked: {e}");
    }
}

/// A loopback port nobody listens on.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A listener that answers every connection as an HTTP server answers a request it cannot
/// read (`400 Bad Request`), then closes it.
fn http_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
                let mut buf = [0u8; 512];
                let _ = conn.read(&mut buf);
                let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            });
        }
    });
    port
}

/// A listener that accepts every connection and never answers (a frozen server).
fn silent_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            held.push(conn);
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_refused_port_names_the_address() {
    let port = closed_port();
    let e = connect_error(&format!("redis://:{SECRET}@127.0.0.1:{port}")).await;
    check(&e, ErrorKind::Connection, true, &format!("127.0.0.1:{port}"), "refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_at_an_http_port_says_what_answered() {
    let port = http_server();
    let e = connect_error(&format!("redis://:{SECRET}@127.0.0.1:{port}")).await;
    check(&e, ErrorKind::Protocol, false, &format!("127.0.0.1:{port}"), "HTTP/1.1 400");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_connect_failures() {
    let pg = TestServers::start(&["postgres"]);
    let port = pg.port(0);
    let at = format!("127.0.0.1:{port}");

    // Redis pointed at PostgreSQL: the wrong kind of server, not a "broken pipe".
    let e = connect_error(&format!("redis://:{SECRET}@{at}")).await;
    check(&e, ErrorKind::Protocol, false, &at, "not a Redis server");

    // No password where the server asks for one: a refused login, not "invalid configuration".
    let e = connect_error(&format!("postgres://lockgate@{at}/lockgate")).await;
    check(&e, ErrorKind::Authentication, false, &at, "password");

    // A database that does not exist: no retry can make it appear.
    let e = connect_error(&format!("postgres://lockgate:lockgate-test-pw@{at}/no_such_db")).await;
    check(&e, ErrorKind::InvalidArgument, false, &at, "does not exist");

    // Nothing listening.
    let closed = closed_port();
    let e = connect_error(&format!("postgres://lockgate:lockgate-test-pw@127.0.0.1:{closed}/lockgate")).await;
    check(&e, ErrorKind::Connection, true, &format!("127.0.0.1:{closed}"), "could not connect");

    let my = TestServers::start(&["mariadb"]);
    let at = format!("127.0.0.1:{}", my.port(0));
    // MariaDB does not tell a user without rights on it whether a database exists: it refuses
    // the user (1044), never retryable either.
    let e = connect_error(&format!("mysql://lockgate:lockgate-test-pw@{at}/no_such_db")).await;
    check(&e, ErrorKind::Authentication, false, &at, "no_such_db");
}

/// The connect failures every backend says alike, for the scheme `scheme` with the login
/// `login@` (its password [`SECRET`]): a refused port, a silent server, an HTTP server and a
/// Redis server where `scheme`'s server was expected (`kind` its name in the message).
async fn foreign_and_absent_servers(scheme: &str, login: &str, kind: &str) {
    let port = closed_port();
    let e = connect_error(&format!("{scheme}://{login}@127.0.0.1:{port}")).await;
    check(&e, ErrorKind::Connection, true, &format!("127.0.0.1:{port}"), "refused");
    assert!(e.message().starts_with("could not connect to "), "{e}");

    let port = silent_server();
    let e = connect_error(&format!("{scheme}://{login}@127.0.0.1:{port}")).await;
    check(&e, ErrorKind::Connection, true, &format!("127.0.0.1:{port}"), "no answer");

    let port = http_server();
    let e = connect_error(&format!("{scheme}://{login}@127.0.0.1:{port}")).await;
    check(&e, ErrorKind::Protocol, false, &format!("127.0.0.1:{port}"), "HTTP/1.1 400");

    let redis = TestServers::start(&["single"]);
    let at = format!("127.0.0.1:{}", redis.port(0));
    let e = connect_error(&format!("{scheme}://{login}@{at}")).await;
    check(&e, ErrorKind::Protocol, false, &at, "handshake reply");
    assert!(e.message().contains(&format!("not a {kind} server")) || e.message().contains(&format!("not an {kind} server")), "{e}");
    assert!(e.message().contains("-ERR") || e.message().contains("+PONG"), "what Redis answered: {e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_connect_failures() {
    foreign_and_absent_servers("zookeeper", &format!("lockgate:{SECRET}"), "ZooKeeper").await;
    // The TLS scheme at a plain port: the member answers plain ZooKeeper.
    let zk = TestServers::start(&["zookeeper"]);
    let at = format!("127.0.0.1:{}", zk.port(0));
    let e = connect_error(&format!("zookeeper+tls://lockgate:{SECRET}@{at}")).await;
    check(&e, ErrorKind::Protocol, false, &at, "without TLS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_connect_failures() {
    foreign_and_absent_servers("etcd", &format!("lockgate:{SECRET}"), "etcd").await;
    let etcd = TestServers::start(&["etcd"]);
    let at = format!("127.0.0.1:{}", etcd.port(0));
    let e = connect_error(&format!("etcds://lockgate:{SECRET}@{at}")).await;
    check(&e, ErrorKind::Protocol, false, &at, "without TLS");
}
