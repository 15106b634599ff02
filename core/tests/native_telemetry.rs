//! The native client's telemetry on a real Redis (from the test-server launcher), read through
//! the ecosystems' own test tooling: a `tracing` subscriber that keeps every span and event,
//! and `metrics-util`'s debugging recorder. A contended lock with a waiter that gets it, a
//! waiter that times out and a loss forced by deleting the lock: the exact log events (levels,
//! names, attributes, the span they belong to) and metric values. One test per file: both the
//! subscriber and the recorder are process-wide.

#[macro_use]
mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use lockgate_core::native::telemetry::{ACQUISITIONS, HELD, HOLD_DURATION, LOSSES, WAITING, WAIT_DURATION};
use lockgate_core::native::Client;
use lockgate_core::{ErrorKind, LockOptions};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use redis::Commands;
use support::RedisServer;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One `tracing` event as the test reads it.
#[derive(Clone, Debug)]
struct Logged {
    level: Level,
    target: String,
    /// Its span's name, if it has one.
    span: Option<String>,
    fields: BTreeMap<String, String>,
}

/// Keeps every span's name and every event.
#[derive(Default)]
struct Keep {
    next: AtomicU64,
    spans: Mutex<BTreeMap<u64, String>>,
    events: Mutex<Vec<Logged>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

impl Subscriber for &'static Keep {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.spans.lock().unwrap().insert(id, span.metadata().name().to_string());
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let span = event.parent().and_then(|id| self.spans.lock().unwrap().get(&id.into_u64()).cloned());
        let meta = event.metadata();
        self.events.lock().unwrap().push(Logged { level: *meta.level(), target: meta.target().to_string(), span, fields });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

fn renewed(ms: u64) -> LockOptions {
    LockOptions::renewed_lease(Duration::from_millis(ms))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contended_lock_is_logged_and_measured_exactly() {
    let keep: &'static Keep = Box::leak(Box::default());
    tracing::subscriber::set_global_default(keep).unwrap();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install().unwrap();

    let server = RedisServer::start();
    let url = server.url();
    let holder = Client::connect(&url).await.unwrap();
    holder.telemetry_lock_names(true).unwrap();
    let waiter = Client::connect(&url).await.unwrap();
    waiter.telemetry_lock_names(true).unwrap();
    let quitter = Client::connect(&url).await.unwrap();

    let a = holder.lock("orders", renewed(3000)).unwrap().try_acquire().await.unwrap().expect("free");
    let b_lock = waiter.lock("orders", renewed(3000)).unwrap();
    let b = tokio::spawn(async move { b_lock.acquire(Duration::from_secs(10)).await });
    let c = quitter.lock("orders", renewed(3000)).unwrap().acquire(Duration::from_millis(300)).await;
    assert_eq!(c.err().map(|e| e.kind()), Some(ErrorKind::Timeout));
    assert!(a.release().await.unwrap());
    let b = b.await.unwrap().unwrap();

    // The lock is deleted behind b's back: its next renewal is refused, the lease lost.
    let _: () = server.raw().del("lockgate:{orders}").unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(5), b.lost()).await.expect("lost within a renewal");
    assert_eq!(lost.kind(), ErrorKind::NotHeld);
    // The driver records the loss once it has told the lease and has nothing else ready
    // (telemetry is deferred to idle moments): a moment later; nothing else is pending.
    tokio::time::sleep(Duration::from_millis(50)).await;

    let events: Vec<Logged> = keep.events.lock().unwrap().iter().filter(|e| e.target == "lockgate").cloned().collect();
    let said = |event: &str| -> Vec<&Logged> { events.iter().filter(|e| e.fields.get("event").map(String::as_str) == Some(event)).collect() };
    let seen: Vec<(Level, &str, Option<&str>)> = events
        .iter()
        .map(|e| (e.level, e.fields["event"].as_str(), e.fields.get("lock").map(String::as_str)))
        .collect();
    // Three acquires started (the quitter's without the name, not opted in), two granted, one
    // timed out, one released, one lost at WARN; everything else at DEBUG.
    let count = |name: &str| seen.iter().filter(|s| s.1 == name).count();
    assert_eq!(
        (count("acquire.started"), count("acquire.granted"), count("acquire.timed_out"), count("lease.released"), count("lease.lost")),
        (3, 2, 1, 1, 1),
        "{seen:#?}"
    );
    assert_eq!(seen.len(), 8, "nothing else (at risk, renewal failed) for a refused renewal: {seen:#?}");
    for e in &events {
        let warn = e.fields["event"] == "lease.lost";
        assert_eq!(e.level, if warn { Level::WARN } else { Level::DEBUG }, "{e:?}");
        assert_eq!(e.fields["backend"], "redis");
        assert_eq!(e.fields["primitive"], "mutex");
        assert!(!format!("{e:?}").contains("127.0.0.1"), "no address in telemetry: {e:?}");
    }
    // The acquires' events are in their span; the lease's are not.
    for name in ["acquire.started", "acquire.granted", "acquire.timed_out"] {
        assert!(said(name).iter().all(|e| e.span.as_deref() == Some("lockgate.acquire")), "{name}: {events:#?}");
    }
    assert!(said("lease.lost").iter().all(|e| e.span.is_none()));
    let timed_out = said("acquire.timed_out")[0];
    assert_eq!(timed_out.fields.get("lock"), None);
    let lost = said("lease.lost")[0];
    assert_eq!((lost.fields["reason"].as_str(), lost.fields["lock"].as_str()), ("refused", "orders"));
    let granted: Vec<&str> = said("acquire.granted").iter().map(|e| e.fields["queued"].as_str()).collect();
    assert_eq!(granted, ["false", "true"]);

    // The metrics, by name and attributes.
    let mut metrics: BTreeMap<String, DebugValue> = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let mut labels: Vec<String> = key.key().labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
        labels.sort();
        metrics.insert(format!("{} {}", key.key().name(), labels.join(",")), value);
    }
    let named = "lockgate.backend=redis,lockgate.lock.name=orders,lockgate.primitive=mutex";
    let anonymous = "lockgate.backend=redis,lockgate.primitive=mutex";
    // A metric's key as the snapshot above writes it: the name, then the attributes sorted.
    let at = |name: &str, labels: &str, extra: &[&str]| {
        let mut all: Vec<&str> = labels.split(',').chain(extra.iter().copied()).collect();
        all.sort();
        format!("{name} {}", all.join(","))
    };
    let counter = |k: String| match metrics.get(&k) {
        Some(DebugValue::Counter(n)) => *n,
        other => panic!("{k}: {other:?} in {metrics:#?}"),
    };
    let gauge = |k: String| match metrics.get(&k) {
        Some(DebugValue::Gauge(v)) => v.into_inner(),
        other => panic!("{k}: {other:?} in {metrics:#?}"),
    };
    let samples = |k: String| match metrics.get(&k) {
        Some(DebugValue::Histogram(v)) => v.iter().map(|x| x.into_inner()).collect::<Vec<f64>>(),
        other => panic!("{k}: {other:?} in {metrics:#?}"),
    };
    assert_eq!(counter(at(ACQUISITIONS, named, &["lockgate.outcome=granted"])), 2);
    assert_eq!(counter(at(ACQUISITIONS, anonymous, &["lockgate.outcome=timed_out"])), 1);
    assert_eq!(counter(at(LOSSES, named, &["lockgate.loss.reason=refused"])), 1);
    assert_eq!(gauge(at(HELD, named, &[])), 0.0);
    assert_eq!(gauge(at(WAITING, named, &[])), 0.0);
    assert_eq!(gauge(at(WAITING, anonymous, &[])), 0.0);
    let waits = samples(at(WAIT_DURATION, named, &["lockgate.outcome=granted"]));
    assert_eq!(waits.len(), 2);
    assert!(waits[1] >= 0.29, "b waited at least the quitter's 300 ms wait: {waits:?}");
    let timed = samples(at(WAIT_DURATION, anonymous, &["lockgate.outcome=timed_out"]));
    assert!(timed.len() == 1 && timed[0] >= 0.3 && timed[0] < 2.0, "{timed:?}");
    assert_eq!(samples(at(HOLD_DURATION, named, &["lockgate.outcome=released"])).len(), 1);
    assert_eq!(samples(at(HOLD_DURATION, named, &["lockgate.outcome=lost"])).len(), 1);
    assert_eq!(metrics.keys().filter(|k| k.contains("127.0.0.1")).count(), 0);
}
