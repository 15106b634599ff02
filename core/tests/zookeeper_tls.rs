//! `zookeeper+tls://` through the native client against the launcher's TLS ZooKeeper
//! (`test-servers zookeeper --tls`: a throwaway CA, a secure client port asking for, not
//! requiring, a client certificate): a mutex acquired and released over TLS with the CA given
//! either way (client option, the URL's `ca=`) and with a client certificate; a server
//! certificate from another CA (or with no CA given, the system's roots), a certificate for
//! another name than the URL's and a client certificate the server does not trust each refused
//! at once with the error that says so (no hang until the connect timeout, no panic); bad TLS
//! input refused before any connection, never quoting a file; and `rediss://` in the same
//! process (the redis crate's rustls configuration and the ZooKeeper crate's share one crypto
//! provider).
#![cfg(feature = "tokio")]

#[path = "support/test_servers.rs"]
mod test_servers;

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use lockgate_core::native::{Client, ClientOptions};
use lockgate_core::{ErrorKind, LockOptions};
use test_servers::TestServers;

/// Longer than any refusal may take: a refused certificate must not wait for it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(8);

/// A chroot no other test or run uses.
fn unique(tag: &str) -> String {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("/lg-{tag}-{}-{t}", std::process::id())
}

struct TlsServer {
    servers: TestServers,
}

impl TlsServer {
    fn start() -> TlsServer {
        TlsServer { servers: TestServers::start(&["zookeeper", "--tls"]) }
    }

    fn file(&self, key: &str) -> String {
        self.servers.info[key].as_str().unwrap_or_else(|| panic!("test-servers says {key}")).to_string()
    }

    fn secure_port(&self) -> u64 {
        self.servers.info["nodes"][0]["secure_port"].as_u64().expect("a secure port")
    }

    /// `zookeeper+tls://127.0.0.1:<secure port><chroot>` (and `query`, if any).
    fn url(&self, chroot: &str, query: &str) -> String {
        format!("{}{chroot}{query}", self.servers.url())
    }
}

async fn connect(options: ClientOptions) -> Result<Client, lockgate_core::Error> {
    let mut options = options;
    options.connect_timeout = CONNECT_TIMEOUT;
    options.connect().await
}

/// One mutex acquired and released through `client`, the grant fenced.
async fn lock_round(client: &Client, name: &str) {
    let lock = client.lock(name, LockOptions::default()).unwrap();
    let lease = lock.acquire(Duration::from_secs(10)).await.unwrap();
    assert!(lease.fencing_token().expect("a czxid token") > 0);
    assert!(lease.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mutex_over_tls_with_the_ca_given_either_way_and_a_client_certificate() {
    let server = TlsServer::start();
    let ca = server.file("ca_file");
    let chroot = unique("tls");

    // The CA as the client option (as rediss:// takes it).
    let mut options = ClientOptions::new(server.url(&chroot, ""));
    options.tls_ca_pem = Some(std::fs::read(&ca).unwrap());
    let client = connect(options).await.unwrap_or_else(|e| panic!("{e}"));
    lock_round(&client, "m").await;

    // The CA and a client certificate the CA signed, in the URL; contending with the first
    // client on the same lock: the second waits until the first releases.
    let query = format!("?ca={ca}&cert={}&key={}", server.file("client_cert_file"), server.file("client_key_file"));
    let other = connect(ClientOptions::new(server.url(&chroot, &query))).await.unwrap_or_else(|e| panic!("{e}"));
    let held = client.lock("m", LockOptions::default()).unwrap().acquire(Duration::from_secs(10)).await.unwrap();
    let waiter = tokio::spawn(async move {
        let lease = other.lock("m", LockOptions::default()).unwrap().acquire(Duration::from_secs(10)).await.unwrap();
        let token = lease.fencing_token().unwrap();
        assert!(lease.release().await.unwrap());
        (token, other)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "the second client was granted while the first held the lock");
    let first = held.fencing_token().unwrap();
    assert!(held.release().await.unwrap());
    let (second, other) = waiter.await.unwrap();
    assert!(second > first, "tokens increase: {first} then {second}");
    other.close().await;
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_certificates_fail_at_once_with_what_was_refused() {
    let server = TlsServer::start();
    let chroot = unique("refused");
    let stranger = support::TlsFiles::create();
    let ca = server.file("ca_file");

    // A CA that did not sign the server's certificate: CONNECTION, saying so, long before the
    // connect timeout.
    let mut options = ClientOptions::new(server.url(&chroot, ""));
    options.tls_ca_pem = Some(stranger.ca_pem.clone());
    let started = Instant::now();
    let e = connect(options).await.expect_err("a server certificate from another CA is refused");
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    // (BadSignature here: both throwaway CAs carry one name, so the other one is taken for the
    // issuer and its key does not verify the certificate.)
    assert!(e.message().contains("is not trusted"), "{e}");
    assert!(started.elapsed() < CONNECT_TIMEOUT / 2, "took {:?}: {e}", started.elapsed());

    // No CA at all: the system's roots do not know the throwaway CA either.
    let e = connect(ClientOptions::new(server.url(&chroot, ""))).await.expect_err("untrusted without a CA");
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.message().contains("is not trusted"), "{e}");

    // The right CA, but the server named by a name its certificate does not carry (the
    // launcher's ZooKeeper certificate is for IP 127.0.0.1 only).
    let url = format!("zookeeper+tls://localhost:{}{chroot}?ca={ca}", server.secure_port());
    let e = connect(ClientOptions::new(url)).await.expect_err("a certificate for another name is refused");
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.message().contains("NotValidForName"), "{e}");

    // A client certificate the server's CA did not sign: the server refuses the handshake:
    // AUTHENTICATION, at once.
    let query = format!(
        "?ca={ca}&cert={}&key={}",
        stranger.dir.join("server.crt").display(),
        stranger.dir.join("server.key").display()
    );
    let started = Instant::now();
    let e = connect(ClientOptions::new(server.url(&chroot, &query))).await.expect_err("an untrusted client certificate is refused");
    assert_eq!(e.kind(), ErrorKind::Authentication, "{e}");
    assert!(e.message().contains("refused the TLS handshake"), "{e}");
    assert!(started.elapsed() < CONNECT_TIMEOUT / 2, "took {:?}: {e}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tls_input_is_refused_before_connecting_without_quoting_files() {
    // Nothing listens here: each error must come from the input, not from a connection.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = std::env::temp_dir().join(format!("lockgate-zktls-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk: PathBuf = dir.join("junk.pem");
    std::fs::write(&junk, "PRIVATE-secret-bytes, not PEM").unwrap();
    let junk = junk.display().to_string();
    let tls_files = support::TlsFiles::create();
    let (cert, key) = (tls_files.dir.join("server.crt").display().to_string(), tls_files.dir.join("server.key").display().to_string());
    let cases = [
        (format!("?ca={junk}"), "holds no usable PEM CA certificate"),
        (format!("?ca={}/missing.pem", dir.display()), "cannot read the CA file"),
        (format!("?cert={junk}&key={key}"), "holds no PEM certificate"),
        (format!("?cert={cert}&key={junk}"), "holds no PEM private key"),
        // A key that is not the certificate's.
        (format!("?cert={cert}&key={}", tls_files.dir.join("ca.key").display()), "do not make a client identity"),
        ("?cert=/x".to_string(), "cert= without key="),
        ("?pin=abc".to_string(), "not \"pin\""),
    ];
    for (query, says) in cases {
        let url = format!("zookeeper+tls://127.0.0.1:{port}{query}");
        let mut options = ClientOptions::new(url.clone());
        options.tls_ca_pem = if query.contains("ca=") { None } else { Some(tls_files.ca_pem.clone()) };
        let e = connect(options).await.err().unwrap_or_else(|| panic!("{url} connected"));
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{url}: {e}");
        assert!(e.message().contains(says), "{url}: {e}");
        assert!(!e.message().contains("secret-bytes") && !e.message().contains("BEGIN"), "{url}: {e}");
    }
    // The CA given twice, in the URL and as the option.
    let mut options = ClientOptions::new(format!("zookeeper+tls://127.0.0.1:{port}?ca={}", tls_files.dir.join("ca.crt").display()));
    options.tls_ca_pem = Some(tls_files.ca_pem.clone());
    let e = connect(options).await.expect_err("two CAs");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    // A query on a plaintext URL.
    let e = connect(ClientOptions::new(format!("zookeeper://127.0.0.1:{port}?ca={junk}"))).await.expect_err("plain with ca=");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_and_zookeeper_tls_share_one_process() {
    let zk = TlsServer::start();
    let redis_tls = support::TlsFiles::create();
    let redis = support::RedisServer::start_with(redis_tls.server_args(), true);

    // rediss:// first (the redis crate builds its rustls configuration), then zookeeper+tls://,
    // then rediss:// again: no crypto-provider panic either way round.
    let mut options = ClientOptions::new(format!("rediss://127.0.0.1:{}", redis.port));
    options.tls_ca_pem = Some(redis_tls.ca_pem.clone());
    let redis_client = connect(options.clone()).await.unwrap_or_else(|e| panic!("{e}"));
    lock_round(&redis_client, "shared").await;

    let zk_client = connect(ClientOptions::new(zk.url(&unique("mixed"), &format!("?ca={}", zk.file("ca_file")))))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    lock_round(&zk_client, "shared").await;

    let again = connect(options).await.unwrap_or_else(|e| panic!("{e}"));
    lock_round(&again, "shared-2").await;
    lock_round(&zk_client, "shared-2").await;
    zk_client.close().await;
    again.close().await;
    redis_client.close().await;
}
