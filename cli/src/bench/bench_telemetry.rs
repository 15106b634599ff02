//! Telemetry's cost (issue 27): uncontended acquire+release pairs with telemetry off (no
//! subscriber, no recorder: what a service that set up nothing pays) against fully on (a
//! `tracing` subscriber at DEBUG formatting every event, and a Prometheus recorder recording
//! every metric), interleaved rounds on one client, best of each side.
//!
//! The recorder is installed once for the process (the `metrics` facade has no uninstall), so a
//! switch in front of it turns it off between rounds; the subscriber is this thread's default
//! only during the "on" rounds (the runtime is single-threaded, so the client's driver runs
//! here too).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use lockgate_core::native::Client;
use lockgate_core::LockOptions;
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};

/// The Prometheus recorder while `ON`, else nothing (the facade's no-op handles).
struct Switch {
    inner: PrometheusRecorder,
}

static ON: AtomicBool = AtomicBool::new(false);

impl Recorder for Switch {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_counter(key, unit, description)
    }
    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_gauge(key, unit, description)
    }
    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.inner.describe_histogram(key, unit, description)
    }
    fn register_counter(&self, key: &Key, metadata: &Metadata<'_>) -> Counter {
        if ON.load(Ordering::Relaxed) { self.inner.register_counter(key, metadata) } else { Counter::noop() }
    }
    fn register_gauge(&self, key: &Key, metadata: &Metadata<'_>) -> Gauge {
        if ON.load(Ordering::Relaxed) { self.inner.register_gauge(key, metadata) } else { Gauge::noop() }
    }
    fn register_histogram(&self, key: &Key, metadata: &Metadata<'_>) -> Histogram {
        if ON.load(Ordering::Relaxed) { self.inner.register_histogram(key, metadata) } else { Histogram::noop() }
    }
}

/// Rounds of each side.
const ROUNDS: usize = 20;

/// The section for BENCHMARKS.md: pairs/s off and on, and the overhead.
pub async fn run(url: &str, pairs: u64) -> Result<String, String> {
    let recorder = Switch { inner: PrometheusBuilder::new().build_recorder() };
    let handle = recorder.inner.handle();
    metrics::set_global_recorder(recorder).map_err(|e| e.to_string())?;
    let subscriber = tracing_subscriber::fmt().with_max_level(tracing::Level::DEBUG).with_writer(std::io::sink).finish();
    let dispatch = tracing::Dispatch::new(subscriber);
    let client = Client::connect(url).await.map_err(|e| e.to_string())?;
    let lock = client.lock("bench-telemetry", LockOptions::default()).map_err(|e| e.to_string())?;
    let (mut best_off, mut best_on) = (0f64, 0f64);
    // Each round's cost (its "on" side against its "off" side, run back to back): their median
    // is the figure, as a shared machine's drift moves both sides of a round alike and a round
    // disturbed by a neighbour is an outlier, not the best.
    let mut costs = Vec::new();
    // Alternate which side goes first, so neither always runs on a warmer connection.
    for round in 0..ROUNDS {
        let mut rates = [0f64; 2];
        for on in if round % 2 == 0 { [false, true] } else { [true, false] } {
            ON.store(on, Ordering::Relaxed);
            let _guard = on.then(|| tracing::dispatcher::set_default(&dispatch));
            let t = Instant::now();
            for _ in 0..pairs {
                let lease = lock.try_acquire().await.map_err(|e| e.to_string())?.ok_or("the lock was held")?;
                lease.release().await.map_err(|e| e.to_string())?;
            }
            let rate = pairs as f64 / t.elapsed().as_secs_f64();
            rates[usize::from(on)] = rate;
            if on {
                best_on = best_on.max(rate);
            } else {
                best_off = best_off.max(rate);
            }
        }
        costs.push((rates[0] / rates[1] - 1.0) * 100.0);
    }
    costs.sort_by(f64::total_cmp);
    let median = (costs[(costs.len() - 1) / 2] + costs[costs.len() / 2]) / 2.0;
    ON.store(false, Ordering::Relaxed);
    client.close().await;
    // Proof the "on" rounds recorded: the acquisitions counter is in the exposition.
    let exposition = handle.render();
    if !exposition.contains("lockgate_lock_acquisitions") {
        return Err("the telemetry-on rounds recorded no metric".into());
    }
    let overhead = (best_off / best_on - 1.0) * 100.0;
    let (low, high) = (costs[0], costs[costs.len() - 1]);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n### Telemetry off vs fully on (issue 27): uncontended acquire+release ({ROUNDS} rounds of {pairs} pairs a side, interleaved, alternating which goes first)\n"
    );
    let _ = writeln!(md, "| telemetry | pairs/s, best | cost per pair, best against best | cost per pair, median of the rounds (range) |");
    let _ = writeln!(md, "|---|---|---|---|");
    let _ = writeln!(md, "| off (no subscriber, no recorder) | {best_off:.0} | | |");
    let _ = writeln!(
        md,
        "| on: `tracing_subscriber::fmt` at DEBUG (every event formatted) + a Prometheus recorder (every metric recorded) | {best_on:.0} | {overhead:+.1} % | {median:+.1} % ({low:+.1} to {high:+.1}) |"
    );
    let _ = writeln!(md, "\nTarget: at most 3 % on the uncontended pair rate (the median): {}.", if median <= 3.0 { "met" } else { "not met" });
    Ok(md)
}
