//! No password reaches telemetry, on every backend whose URL can carry one (Redis with an ACL
//! user, ZooKeeper's digest login, etcd with authentication on, PostgreSQL, MariaDB; memcached
//! URLs refuse a password): with a password-bearing URL, a holder, a waiter that times out, a
//! waiter that gets the lock, a release, a failed login with a wrong password and a client of
//! a stopped server. Everything `tracing` saw (spans and events, every field), every metric
//! key and every event a listener received is searched for the password. The search is shown
//! to find something: the events it reads are the ones the scenario must have raised.
//! One test per file: the subscriber and the recorder are process-wide.

#[macro_use]
mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockgate_core::engine::Telemetry;
use lockgate_core::native::Client;
use lockgate_core::{ErrorKind, LockOptions};
use metrics_util::debugging::DebuggingRecorder;
use support::test_servers::TestServers;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Every span and event `tracing` was given, as text (name, target, every field).
#[derive(Default)]
struct Keep {
    next: AtomicU64,
    seen: Mutex<Vec<String>>,
}

struct Text<'a>(&'a mut String);

impl Visit for Text<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={value:?}", field.name()));
    }
}

impl Subscriber for &'static Keep {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut line = format!("span {} {}", span.metadata().target(), span.metadata().name());
        span.record(&mut Text(&mut line));
        self.seen.lock().unwrap().push(line);
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, values: &Record<'_>) {
        let mut line = "record".to_string();
        values.record(&mut Text(&mut line));
        self.seen.lock().unwrap().push(line);
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = format!("event {} {}", event.metadata().target(), event.metadata().level());
        event.record(&mut Text(&mut line));
        self.seen.lock().unwrap().push(line);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

const PASSWORD: &str = "Tel-9q-s3cret-Wx";

fn renewed(ms: u64) -> LockOptions {
    LockOptions::renewed_lease(Duration::from_millis(ms))
}

/// `scheme://user:PASSWORD@rest` from a URL without a login.
fn with_login(url: &str, user: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    format!("{scheme}://{user}:{PASSWORD}@{rest}")
}

/// etcd with user authentication on: `root` (every right) with [`PASSWORD`].
fn etcd_with_auth(servers: &TestServers) -> String {
    let endpoint = format!("http://127.0.0.1:{}", servers.port(0));
    for args in [
        vec!["user", "add", "root", "--new-user-password", PASSWORD],
        vec!["user", "grant-role", "root", "root"],
        vec!["auth", "enable"],
    ] {
        let out = Command::new("etcdctl").arg("--endpoints").arg(&endpoint).args(&args).output().expect("etcdctl (Debian's etcd-client)");
        assert!(out.status.success(), "etcdctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    with_login(&servers.url(), "root")
}

/// The scenario on one backend, through clients of `url`, each with `listener`'s events.
async fn contend(url: &str, seen: &Arc<Mutex<Vec<String>>>) {
    let connect = || async {
        let c = Client::connect(url).await.unwrap_or_else(|e| panic!("connect: {e}"));
        let seen = Arc::clone(seen);
        c.on_telemetry(Arc::new(move |t: &Telemetry| seen.lock().unwrap().push(format!("{t:?} {}", t.what.summary())))).unwrap();
        c.telemetry_lock_names(true).unwrap();
        c
    };
    let (holder, waiter, quitter) = (connect().await, connect().await, connect().await);
    let name = "tel-credentials";
    let a = holder.lock(name, renewed(3000)).unwrap().try_acquire().await.unwrap().expect("free");
    let b_lock = waiter.lock(name, renewed(3000)).unwrap();
    let b = tokio::spawn(async move { b_lock.acquire(Duration::from_secs(20)).await });
    let c = quitter.lock(name, renewed(3000)).unwrap().acquire(Duration::from_millis(300)).await;
    assert_eq!(c.err().map(|e| e.kind()), Some(ErrorKind::Timeout));
    assert!(a.release().await.unwrap());
    let b = b.await.unwrap().unwrap();
    assert!(b.release().await.unwrap());
    for c in [holder, waiter, quitter] {
        c.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_password_reaches_logs_spans_metrics_or_events_on_any_backend() {
    let keep: &'static Keep = Box::leak(Box::default());
    tracing::subscriber::set_global_default(keep).unwrap();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();
    let listened = Arc::new(Mutex::new(Vec::new()));

    let redis = TestServers::start(&["acl", "--password", PASSWORD]);
    let zookeeper = TestServers::start(&["zookeeper"]);
    let etcd = TestServers::start(&["etcd"]);
    let postgres = TestServers::start(&["postgres"]);
    let mariadb = TestServers::start(&["mariadb"]);
    // The SQL servers' own user has the launcher's password: log in as it, with ours swapped in
    // for the search, by giving the servers' URL a user whose password is ours.
    let urls: BTreeMap<&str, String> = [
        ("redis", redis.url()),
        ("zookeeper", with_login(&zookeeper.url(), "app")),
        ("etcd", etcd_with_auth(&etcd)),
        ("postgres", postgres.url()),
        ("mysql", mariadb.url()),
    ]
    .into_iter()
    .collect();
    let mut secrets: Vec<String> = vec![PASSWORD.to_string()];
    for (backend, url) in &urls {
        // The SQL URLs carry the launcher's own password for its user: search for it too.
        if let Some(login) = url.split_once("://").and_then(|(_, rest)| rest.split_once('@')).map(|(login, _)| login) {
            let password = login.split_once(':').map(|(_, p)| p.to_string()).expect("a password in every URL here");
            assert!(password.len() >= 8, "{backend}: a password long enough to search for");
            secrets.push(password);
        }
        contend(url, &listened).await;
        // A wrong password: refused, and said without it.
        let wrong = url.replace(secrets.last().unwrap().as_str(), "Wr0ng-pass-Zz");
        if let Err(e) = Client::connect(&wrong).await {
            assert!(!format!("{e:?} {e}").contains("Wr0ng-pass-Zz"), "{backend}: {e:?}");
        } else if *backend != "zookeeper" {
            // ZooKeeper's digest login is not checked at connect (it only names the identity
            // of nodes' ACLs): any password connects.
            panic!("{backend}: a wrong password was accepted");
        }
    }
    // A client whose server stops under it: its connection errors are logged too.
    let lost = Client::connect(&urls["redis"]).await.unwrap();
    let lease = lost.lock("tel-stopped", renewed(1000)).unwrap().try_acquire().await.unwrap().expect("free");
    drop(redis);
    let _ = tokio::time::timeout(Duration::from_secs(5), lease.lost()).await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    let logged = keep.seen.lock().unwrap().clone();
    let listened = listened.lock().unwrap().clone();
    let mut metric_keys = Vec::new();
    for (key, _, _, _) in snapshotter.snapshot().into_vec() {
        metric_keys.push(format!("{:?}", key.key()));
    }
    // The search reads what the scenario must have raised on every backend.
    for backend in urls.keys() {
        let granted = listened.iter().filter(|l| l.contains("Granted") && l.contains(&format!("backend: \"{backend}\""))).count();
        assert!(granted >= 2, "{backend}: {granted} grants heard in {listened:#?}");
        assert!(metric_keys.iter().any(|k| k.contains(backend)), "{backend}: no metric in {metric_keys:#?}");
    }
    assert!(logged.iter().any(|l| l.contains("acquire.timed_out")), "{logged:#?}");
    assert!(logged.iter().any(|l| l.contains("lease.lost")), "the stopped server's loss: {logged:#?}");
    for secret in &secrets {
        for (what, lines) in [("tracing", &logged), ("listener", &listened), ("metrics", &metric_keys)] {
            let leaked: Vec<&String> = lines.iter().filter(|l| l.contains(secret.as_str())).collect();
            assert!(leaked.is_empty(), "a password in {what}: {leaked:#?}");
        }
    }
}
