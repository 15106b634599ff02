//! A dead server must not look like a held lock (issue 23 item 7): holding a lock, the
//! redis-server is killed; a new acquire with a timeout fails with `CONNECTION` naming the
//! server's (redacted) address, not `TIMEOUT` "timed out waiting for the lock", and the held
//! lease is lost with a reason that names the unreachable server. Real server from the
//! project's launcher, stopped by its pid (`stop 0`).
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::time::Duration;

use lockgate_core::native::ClientOptions;
use lockgate_core::{ErrorKind, LockOptions};
use test_servers::TestServers;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_server_is_a_connection_error_not_a_timeout() {
    let mut server = TestServers::start(&["single"]);
    let port = server.port(0);
    let mut o = ClientOptions::new(server.url());
    o.connect_timeout = Duration::from_secs(1);
    o.response_timeout = Duration::from_millis(500);
    let client = o.connect().await.unwrap();
    let held = client
        .lock("dead", LockOptions::renewed_lease(Duration::from_millis(1500)))
        .unwrap()
        .acquire(Duration::from_secs(2))
        .await
        .unwrap();

    server.command("stop 0");

    let e = client
        .lock("other", LockOptions::default())
        .unwrap()
        .acquire(Duration::from_secs(2))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.retryable(), "{e}");
    assert!(e.message().contains(&format!("127.0.0.1:{port}")), "the error names the server: {e}");
    assert!(!e.message().contains("timed out waiting for the lock"), "{e}");

    let lost = tokio::time::timeout(Duration::from_secs(5), held.lost()).await.expect("the lease is lost");
    assert_eq!(lost.kind(), ErrorKind::NotHeld, "{lost}");
    assert!(lost.message().contains(&format!("127.0.0.1:{port}")), "the loss names the unreachable server: {lost}");
}
