//! `etcds://` on the native client against a real etcd serving TLS (the launcher's `etcd
//! --tls`: a throwaway CA's certificate for 127.0.0.1): with the CA as the client's TLS CA
//! option a mutex is acquired, contended and released; a server the client cannot verify (the
//! system's roots do not know the CA) is a `CONNECTION` error at connect; a TLS CA option that
//! is no PEM certificate is `INVALID_ARGUMENT`, and one given for a plain `etcd://` URL too.
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

use std::time::Duration;

use lockgate_core::native::ClientOptions;
use lockgate_core::{ErrorKind, LockOptions};
use test_servers::TestServers;

const WAIT: Duration = Duration::from_secs(10);

fn unique(tag: &str) -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("lg-{tag}-{}-{t}", std::process::id())
}

fn ca(server: &TestServers) -> Vec<u8> {
    std::fs::read(server.info["ca_file"].as_str().expect("ca_file")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutex_over_tls_with_the_ca_and_refusals_without_it() {
    let server = TestServers::start(&["etcd", "--tls"]);
    let url = server.url();
    assert!(url.starts_with("etcds://"), "{url}");

    let with_ca = || {
        let mut o = ClientOptions::new(&url);
        o.tls_ca_pem = Some(ca(&server));
        o
    };
    let (a, b) = (with_ca().connect().await.unwrap(), with_ca().connect().await.unwrap());
    let name = unique("tls");
    let (la, lb) = (a.lock(&name, LockOptions::default()).unwrap(), b.lock(&name, LockOptions::default()).unwrap());
    let held = la.acquire(WAIT).await.unwrap();
    assert!(lb.try_acquire().await.unwrap().is_none(), "a holds");
    let waiter = tokio::spawn(async move { lb.acquire(WAIT).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(held.release().await.unwrap());
    let next = waiter.await.unwrap().unwrap();
    assert!(next.fencing_token().unwrap() > held.fencing_token().unwrap());
    assert!(next.release().await.unwrap());
    a.close().await;
    b.close().await;

    // Without the CA the server's certificate is checked against the system's roots: refused.
    let mut o = ClientOptions::new(&url);
    o.connect_timeout = Duration::from_secs(2);
    let e = o.connect().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");

    // A CA option that is not a PEM certificate, or one for a plain URL: refused at once.
    let mut o = ClientOptions::new(&url);
    o.tls_ca_pem = Some(b"not a certificate".to_vec());
    assert_eq!(o.connect().await.unwrap_err().kind(), ErrorKind::InvalidArgument);
    let mut o = ClientOptions::new(server.info["plain_url"].as_str().unwrap());
    o.tls_ca_pem = Some(ca(&server));
    assert_eq!(o.connect().await.unwrap_err().kind(), ErrorKind::InvalidArgument);
}
