//! The conformance orchestrator: runs every scenario in `conformance/scenarios/` on every server
//! variant whose capabilities it needs (Redis single, Redis Cluster, primary + replica with
//! replica acks, Redlock masters), against every binding alone and with actors spread across
//! bindings. It starts each variant's servers once per run.
//!
//! Usage: `conformance [--bindings rust,python,...] [--variants single,...] [--scenarios
//! name,...] [--jobs N] [--table FILE] [--readme README.md]`, or
//! `conformance --demo [--bindings ...] [--per-binding N] [--rounds N]` for `./run demo`
//! (run from the repository root; `./run` does). `--help` prints this; any other argument is
//! an error (exit 2). The servers it starts die with it however it ends (`PR_SET_PDEATHSIG`).

mod actor;
mod check;
mod demo;
mod variant;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use actor::Actor;
use lockgate_conformance::fixture::{Connect, Op};
use variant::Variant;

/// Keys and lock names live under this prefix so runs never touch anything else.
const PREFIX: &str = "lockgate-conf:";
/// Longest any single operation may take before the run fails.
const OP_LIMIT: Duration = Duration::from_secs(60);
/// Capabilities a client reports in its `connect` reply that the orchestrator compares with
/// the variant's: every one the library has (other names are ignored).
fn client_capabilities() -> impl Iterator<Item = &'static str> {
    lockgate_core::Capability::ALL.into_iter().map(|c| c.name())
}

#[derive(Deserialize)]
struct Scenario {
    name: String,
    #[allow(dead_code)]
    description: String,
    actors: Vec<String>,
    steps: Vec<Value>,
    /// Capabilities (and fixture features) a variant must offer to run the scenario.
    #[serde(default)]
    needs: Vec<String>,
}

impl Scenario {
    fn needs(&self, what: &str) -> bool {
        self.needs.iter().any(|n| n == what)
    }
}

#[derive(Deserialize, Clone)]
struct ActorSpec {
    binding: String,
    command: Vec<String>,
}

/// One execution of a scenario with a given binding per actor.
struct RunResult {
    variant: &'static str,
    scenario: String,
    label: String,
    error: Option<String>,
    expected_failure: bool,
    /// A first run's failure that was only a late reply ([`check::LATE`]): the run was
    /// repeated, and `error` is the second run's.
    late: Option<String>,
}

impl RunResult {
    fn verdict(&self) -> &'static str {
        match (self.error.is_some(), self.expected_failure) {
            (false, false) => "pass",
            (true, true) => "expected failure",
            (true, false) => "FAIL",
            (false, true) => "UNEXPECTED PASS (remove it from the failure list)",
        }
    }

    fn ok(&self) -> bool {
        self.error.is_some() == self.expected_failure
    }
}

fn arg(args: &[String], key: &str) -> Option<String> {
    args.iter().position(|a| a == key).and_then(|i| args.get(i + 1).cloned())
}

/// What `--help` prints (and an unknown flag prints to stderr).
const USAGE: &str = "usage: conformance [--bindings rust,python,...] [--variants single,...] [--scenarios name,...]
                   [--jobs N] [--table FILE] [--readme README.md]
       conformance --demo [--bindings rust,python,...] [--per-binding N] [--rounds N]
       conformance --help
Run from the repository root. Without --variants: every default variant; without --bindings:
every registered binding (conformance/actors.json). See conformance/README.md.";

/// Flags that take a value, and flags that stand alone.
const VALUE_FLAGS: [&str; 8] = ["--bindings", "--variants", "--scenarios", "--jobs", "--table", "--readme", "--per-binding", "--rounds"];
const SWITCHES: [&str; 1] = ["--demo"];

/// What the command line asks for: `Ok(true)` for `--help`, an error for anything unknown (a
/// typo must not start the whole matrix).
fn check_args(args: &[String]) -> Result<bool, String> {
    let mut i = 1;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--help" || a == "-h" {
            return Ok(true);
        }
        if VALUE_FLAGS.contains(&a) {
            if args.get(i + 1).is_none_or(|v| v.starts_with("--")) {
                return Err(format!("{a} needs a value"));
            }
            i += 2;
        } else if SWITCHES.contains(&a) {
            i += 1;
        } else {
            return Err(format!("unknown argument {a:?}"));
        }
    }
    Ok(false)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    match check_args(&args) {
        Ok(true) => {
            println!("{USAGE}");
            return;
        }
        Ok(false) => {}
        Err(e) => {
            eprintln!("conformance: {e}\n{USAGE}");
            std::process::exit(2);
        }
    }
    // Every server this run starts dies with it, however the run ends (even SIGKILL).
    lockgate_conformance::spawn::die_with_parent();
    let root = PathBuf::from(".");
    let outcome = tokio::select! {
        r = run(&root, &args) => r,
        signal = interrupted() => {
            // Exiting ends the servers (their parent-death signal); the actors see stdin close.
            eprintln!("conformance: stopped by {signal}; its servers stop with it");
            std::process::exit(130);
        }
    };
    match outcome {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("conformance: {e}");
            std::process::exit(2);
        }
    }
}

/// Resolves when the run is asked to stop from outside (Ctrl-C, SIGTERM, a closed terminal);
/// names the signal. Never resolves if the handlers cannot be installed (the parent-death
/// signal still stops the servers then).
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) =
        (signal(SignalKind::interrupt()), signal(SignalKind::terminate()), signal(SignalKind::hangup()))
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
        _ = hup.recv() => "SIGHUP",
    }
}

async fn run(root: &Path, args: &[String]) -> Result<bool, String> {
    let dir = root.join("conformance");
    let specs: Vec<ActorSpec> = serde_json::from_str(&read(&dir.join("actors.json"))?).map_err(|e| format!("actors.json: {e}"))?;
    let wanted: Vec<String> = match arg(args, "--bindings") {
        Some(list) => list.split(',').map(str::to_string).filter(|s| !s.is_empty()).collect(),
        None => specs.iter().map(|s| s.binding.clone()).collect(),
    };
    let specs: Vec<ActorSpec> = wanted
        .iter()
        .map(|b| specs.iter().find(|s| &s.binding == b).cloned().ok_or(format!("no actor registered for binding {b:?}")))
        .collect::<Result<_, _>>()?;
    if args.iter().any(|a| a == "--demo") {
        let per = arg(args, "--per-binding").and_then(|v| v.parse().ok()).unwrap_or(2);
        let rounds = arg(args, "--rounds").and_then(|v| v.parse().ok()).unwrap_or(3);
        return demo::run(root, &specs, per, rounds).await;
    }
    let failures = load_failure_lists(&dir, &specs)?;
    let mut scenarios = load_scenarios(&dir.join("scenarios"))?;
    if let Some(list) = arg(args, "--scenarios") {
        // A partial run must not rewrite the README's table with only some rows.
        if arg(args, "--readme").is_some() {
            return Err("--readme needs the whole matrix: drop --scenarios".into());
        }
        scenarios = select_scenarios(scenarios, &list)?;
    }
    let names: Vec<String> = match arg(args, "--variants") {
        Some(list) => list.split(',').map(str::to_string).filter(|s| !s.is_empty()).collect(),
        // Without --variants: the default set (a variant marked `default: false` runs only when named).
        None => variant::defaults().iter().map(|v| v.name.to_string()).collect(),
    };
    if arg(args, "--readme").is_some() && arg(args, "--variants").is_some() {
        return Err("--readme needs the whole matrix: drop --variants".into());
    }
    let mut chosen = Vec::new();
    for name in &names {
        let known: Vec<&str> = variant::all().iter().map(|v| v.name).collect();
        let spec = variant::all().into_iter().find(|v| v.name == name).ok_or(format!("no variant {name:?} ({})", known.join(", ")))?;
        chosen.push(spec);
    }
    // Only variants some scenario and some actor can run on are started.
    chosen.retain(|v| scenarios.iter().any(|s| Variant::runs(&v.capabilities, v.subset, &s.name, &s.needs)));
    let mut variants = Vec::new();
    for spec in chosen {
        let started = std::time::Instant::now();
        let v = tokio::task::block_in_place(|| Variant::start(spec, PREFIX))?;
        println!("variant {}: servers up in {} ms", v.name, started.elapsed().as_millis());
        variants.push(v);
    }
    // Variants run side by side, `--jobs` at a time (default 3): each has its own servers, and
    // the scenarios mostly wait. Measured on a 2-core machine, the whole matrix with four
    // bindings: three streams took 12 min (two: 17) at about a third of the CPU, and no variant
    // took longer than it did alone in a stream, so the timing tolerances are not disturbed.
    let jobs: usize = arg(args, "--jobs").map(|j| j.parse().map_err(|_| format!("--jobs needs a number, got {j:?}"))).transpose()?.unwrap_or(3).max(1);
    let order: Vec<&'static str> = variants.iter().map(|v| v.name).collect();
    let plan = Arc::new(Plan { root: root.to_path_buf(), scenarios, specs, failures, pool: actor::Pool::default() });
    // One queue, taken in order by whichever stream is free: a fixed round-robin split left one
    // stream idle for minutes while the other still had three variants to run.
    // The variants with the most scenarios go first, so no long one starts last.
    let mut variants = variants;
    let runnable = |v: &Variant| plan.scenarios.iter().filter(|s| Variant::runs(&v.capabilities, v.subset, &s.name, &s.needs)).count();
    variants.sort_by_key(|v| std::cmp::Reverse(runnable(v)));
    let streams = jobs.min(variants.len().max(1));
    let queue = Arc::new(std::sync::Mutex::new(std::collections::VecDeque::from(variants)));
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..streams {
        let plan = Arc::clone(&plan);
        let queue = Arc::clone(&queue);
        set.spawn(async move {
            let mut done = Vec::new();
            loop {
                let next = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop_front();
                let Some(mut v) = next else { break };
                let started = std::time::Instant::now();
                let results = run_variant(&plan, &mut v).await;
                done.push((v, results, started.elapsed()));
            }
            done
        });
    }
    let mut finished = Vec::new();
    while let Some(done) = set.join_next().await {
        finished.extend(done.map_err(|e| format!("a variant's run panicked: {e}"))?);
    }
    plan.pool.drain().await;
    finished.sort_by_key(|(v, _, _)| order.iter().position(|n| *n == v.name));
    let timings: Vec<(&'static str, Duration)> = finished.iter().map(|(v, _, t)| (v.name, *t)).collect();
    let (variants, results): (Vec<Variant>, Vec<Vec<RunResult>>) = finished.into_iter().map(|(v, r, _)| (v, r)).unzip();
    let results: Vec<RunResult> = results.into_iter().flatten().collect();
    let Plan { scenarios, specs, .. } = &*plan;
    let table = table(scenarios, specs, &variants, &results);
    println!("\n{table}");
    if let Some(path) = arg(args, "--table") {
        std::fs::write(&path, &table).map_err(|e| format!("{path}: {e}"))?;
    }
    if let Some(path) = arg(args, "--readme") {
        update_readme(Path::new(&path), &table)?;
    }
    let passed = results.iter().filter(|r| r.ok() && !r.expected_failure).count();
    let expected = results.iter().filter(|r| r.ok() && r.expected_failure).count();
    let failed = results.iter().filter(|r| !r.ok()).count();
    for (name, took) in &timings {
        println!("variant {name}: {:.1} s", took.as_secs_f64());
    }
    // What did not pass is named last, beside the counts: a CI log shows only its tail, and the
    // table above is long.
    let again: Vec<&RunResult> = results.iter().filter(|r| r.late.is_some()).collect();
    for r in &again {
        let why = r.late.as_deref().and_then(|e| e.lines().next()).unwrap_or("");
        println!("RUN TWICE ({}): {} on {} [{}] first run {why}", if r.ok() { "passed the second time" } else { "failed again" }, r.scenario, r.variant, r.label);
    }
    for r in results.iter().filter(|r| !r.ok()) {
        let why = r.error.as_deref().and_then(|e| e.lines().next()).unwrap_or("");
        println!("{}: {} on {} [{}] {why}", r.verdict(), r.scenario, r.variant, r.label);
    }
    let twice = if again.is_empty() { String::new() } else { format!(" ({} of them run twice after a late reply)", again.iter().filter(|r| r.ok()).count()) };
    println!("conformance: {passed} passed{twice}, {failed} failed, {expected} skipped");
    if expected > 0 {
        println!("(skipped = listed in a binding's failure list and still failing, as listed)");
    }
    Ok(failed == 0)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// `conformance/failures/<binding>.txt`: one scenario name per line, `#` starts the reason.
fn load_failure_lists(dir: &Path, specs: &[ActorSpec]) -> Result<HashMap<String, BTreeMap<String, String>>, String> {
    let mut out = HashMap::new();
    for s in specs {
        let path = dir.join("failures").join(format!("{}.txt", s.binding));
        let mut list = BTreeMap::new();
        if path.exists() {
            for line in read(&path)?.lines() {
                let (name, reason) = line.split_once('#').unwrap_or((line, ""));
                if !name.trim().is_empty() {
                    list.insert(name.trim().to_string(), reason.trim().to_string());
                }
            }
        }
        out.insert(s.binding.clone(), list);
    }
    Ok(out)
}

fn load_scenarios(dir: &Path) -> Result<Vec<Scenario>, String> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| serde_json::from_str::<Scenario>(&read(p)?).map_err(|e| format!("{}: {e}", p.display())))
        .collect()
}

/// Keeps the scenarios named in `list` (comma-separated, in file order); an unknown name is an
/// error, so a typo never turns into an empty, passing run.
fn select_scenarios(all: Vec<Scenario>, list: &str) -> Result<Vec<Scenario>, String> {
    let names: Vec<&str> = list.split(',').map(str::trim).filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        return Err("--scenarios needs at least one scenario name".into());
    }
    if let Some(unknown) = names.iter().find(|n| !all.iter().any(|s| s.name == **n)) {
        let known: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
        return Err(format!("no scenario named {unknown:?} (known: {})", known.join(", ")));
    }
    Ok(all.into_iter().filter(|s| names.contains(&s.name.as_str())).collect())
}

/// What every variant's run shares.
struct Plan {
    root: PathBuf,
    scenarios: Vec<Scenario>,
    specs: Vec<ActorSpec>,
    failures: HashMap<String, BTreeMap<String, String>>,
    /// The actors kept between runs.
    pool: actor::Pool,
}

/// Runs every scenario the variant offers what it needs for, with every assignment of bindings.
async fn run_variant(plan: &Plan, v: &mut Variant) -> Vec<RunResult> {
    tokio::time::sleep_until(v.ready_at.into()).await;
    let mut results = Vec::new();
    for (index, scenario) in plan.scenarios.iter().enumerate() {
        if !Variant::runs(&v.capabilities, v.subset, &scenario.name, &scenario.needs) {
            continue;
        }
        for (label, assignment) in assignments(scenario, &plan.specs) {
            // A failure list names a scenario (every variant) or `scenario@variant`.
            let listed = |b: &String| {
                plan.failures.get(b).is_some_and(|f| f.contains_key(&scenario.name) || f.contains_key(&format!("{}@{}", scenario.name, v.name)))
            };
            let expected_failure = assignment.iter().any(|a| listed(&a.binding));
            let tag = format!("{}.{index}.{}", v.name, results.len());
            let started = std::time::Instant::now();
            let mut error = execute(plan, v, scenario, &assignment, &tag).await.err();
            // A run whose only failure is a late reply (every value right) is run once more on
            // fresh names: a stall of the loaded machine fails one run, a slow library both.
            let mut late = None;
            if !expected_failure && error.as_deref().is_some_and(check::only_late) {
                late = error.take();
                error = execute(plan, v, scenario, &assignment, &format!("{tag}.again")).await.err();
            }
            let r = RunResult { variant: v.name, scenario: scenario.name.clone(), label, error, expected_failure, late };
            println!(
                "{:<8} {:<42} {:<28} {:>5.1} s  {}{}{}",
                r.variant,
                r.scenario,
                r.label,
                started.elapsed().as_secs_f64(),
                r.verdict(),
                r.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default(),
                r.late.as_deref().map(|e| format!(" (run twice; the first: {e})")).unwrap_or_default()
            );
            results.push(r);
        }
    }
    results
}

/// Every binding alone; then, for scenarios with several actors and several bindings, one
/// rotation per binding spreading the actors across them.
fn assignments<'a>(s: &Scenario, specs: &'a [ActorSpec]) -> Vec<(String, Vec<&'a ActorSpec>)> {
    let specs: Vec<&ActorSpec> = specs.iter().collect();
    let mut out: Vec<(String, Vec<&ActorSpec>)> = specs.iter().map(|spec| (spec.binding.clone(), s.actors.iter().map(|_| *spec).collect())).collect();
    if s.actors.len() > 1 && specs.len() > 1 {
        for shift in 0..specs.len() {
            let a: Vec<&ActorSpec> = (0..s.actors.len()).map(|i| specs[(i + shift) % specs.len()]).collect();
            let label = format!("mixed:{}", a.iter().map(|s| s.binding.as_str()).collect::<Vec<_>>().join("+"));
            if a.iter().any(|x| x.binding != a[0].binding) {
                out.push((label, a));
            }
        }
    }
    out
}

/// Connects actor `a` as `c` says and checks the capabilities it reports, if it reports any.
async fn connect(a: &mut Actor, c: &Connect, variant: &str, capabilities: &[&str]) -> Result<Value, String> {
    let id = a.send(serde_json::json!({"op": "connect", "url": c.url, "options": c.options})).await?;
    let r = a.wait(id, OP_LIMIT).await?;
    if let Some(caps) = r.value.get("capabilities").and_then(Value::as_array) {
        let reported: Vec<String> = caps.iter().filter_map(Value::as_str).map(|c| c.to_ascii_lowercase().replace('-', "_")).collect();
        for name in client_capabilities() {
            if reported.iter().any(|r| r == name) != capabilities.contains(&name) {
                let expected: Vec<&&str> = capabilities.iter().filter(|c| client_capabilities().any(|n| n == **c)).collect();
                return Err(format!("the client reports capabilities {reported:?}; the {variant} variant has {expected:?}"));
            }
        }
    }
    Ok(r.value)
}

/// Runs one scenario with one assignment of bindings to actors on one variant.
async fn execute(plan: &Plan, v: &mut Variant, s: &Scenario, assignment: &[&ActorSpec], tag: &str) -> Result<(), String> {
    let proxied = s.needs("proxy");
    let conn = tokio::task::block_in_place(|| v.fixture.connect(proxied))?;
    let capabilities = v.capabilities.clone();
    let mut actors: HashMap<String, Actor> = HashMap::new();
    for (name, spec) in s.actors.iter().zip(assignment) {
        let mut a = plan.pool.take(&spec.binding, &spec.command, &plan.root)?;
        let r = connect(&mut a, &conn, v.name, &capabilities).await?;
        if r["ok"] != true {
            return Err(format!("{name} ({}) could not connect: {r}", spec.binding));
        }
        actors.insert(name.clone(), a);
    }
    let mut ctx = check::Context::new(&format!("{}.{tag}", s.name), &capabilities);
    let mut pending: HashMap<String, (String, u64)> = HashMap::new();
    // Actors frozen by a `pause` step and not thawed yet (a failed step): thawed before they exit.
    let mut paused: Vec<String> = Vec::new();
    let result = async {
        for (i, step) in s.steps.iter().enumerate() {
            let at = |e: String| format!("step {}: {e}", i + 1);
            if let Some(ms) = step.get("sleep_ms").and_then(Value::as_u64) {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            } else if step.get("fixture").is_some() {
                let op = Op::parse(step, |l| ctx.lock_name(l)).map_err(at)?;
                tokio::task::block_in_place(|| match &op {
                    Op::ExpectLabels { lock, structure, labels } => {
                        lockgate_conformance::fixture::expect_labels(v.fixture.as_mut(), lock, *structure, labels)
                    }
                    _ => v.fixture.apply(&op),
                })
                .map_err(at)?;
            } else if let Some(who) = step.get("crash").and_then(Value::as_str) {
                actors.get_mut(who).ok_or_else(|| at(format!("unknown actor {who}")))?.crash().await;
            } else if let Some(who) = step.get("pause").and_then(Value::as_str) {
                actors.get(who).ok_or_else(|| at(format!("unknown actor {who}")))?.signal(libc::SIGSTOP).map_err(at)?;
                paused.push(who.to_string());
            } else if let Some(who) = step.get("resume").and_then(Value::as_str) {
                actors.get(who).ok_or_else(|| at(format!("unknown actor {who}")))?.signal(libc::SIGCONT).map_err(at)?;
                paused.retain(|p| p != who);
            } else if let Some(labels) = step.get("check_hammer").and_then(Value::as_array) {
                let permits = step.get("permits").and_then(Value::as_u64).unwrap_or(1);
                ctx.check_hammer(labels, permits).map_err(at)?;
            } else if let Some(label) = step.get("await").and_then(Value::as_str) {
                let (who, id) = pending.remove(label).ok_or_else(|| at(format!("nothing pending as {label}")))?;
                let actor = actors.get_mut(&who).expect("pending actor exists");
                let reply = actor.wait(id, OP_LIMIT).await.map_err(at)?;
                ctx.expect(step, &reply, label).map_err(|e| at(format!("{who} ({}): {e}", actor.binding)))?;
            } else if let Some(who) = step.get("actor").and_then(Value::as_str) {
                let actor = actors.get_mut(who).ok_or_else(|| at(format!("unknown actor {who}")))?;
                // The permit count actors give a semaphore: a fixture whose backend stores none
                // (etcd) needs it to tell the semaphore's holders from its waiters.
                let get = |k: &str| step.get(k).and_then(Value::as_str);
                let permits = step.get("permits").and_then(Value::as_u64).and_then(|p| u32::try_from(p).ok()).filter(|p| *p > 0);
                if let (Some("semaphore"), Some(lock), Some(permits)) = (get("kind"), get("lock"), permits) {
                    v.fixture.note_permits(&ctx.lock_name(lock), permits);
                }
                let op = ctx.operation(step);
                if let (Some("connect"), None, Some(given)) = (get("op"), get("url"), op.get("options").and_then(Value::as_object)) {
                    // `connect` to the variant again with some options changed (`null`: the
                    // library's default), e.g. the default session instead of the variant's.
                    let mut c = tokio::task::block_in_place(|| v.fixture.connect(proxied)).map_err(at)?;
                    for (k, value) in given {
                        match value {
                            Value::Null => c.options.remove(k),
                            _ => c.options.insert(k.clone(), value.clone()),
                        };
                    }
                    let reply = connect(actor, &c, v.name, &capabilities).await.map_err(at)?;
                    let timed = actor::Timed { value: reply, elapsed: Duration::ZERO };
                    ctx.expect(step, &timed, who).map_err(|e| at(format!("{who} ({}): {e}", actor.binding)))?;
                    continue;
                }
                if let Some(picked) = op.get("masters").and_then(Value::as_array).cloned() {
                    // `connect` over some of the masters, by index.
                    let picked = picked.iter().map(|i| i.as_u64().map(|i| i as usize)).collect::<Option<Vec<_>>>().ok_or_else(|| at(format!("bad master indices {picked:?}")))?;
                    let c = v.fixture.connect_masters(&picked).map_err(at)?;
                    let reply = connect(actor, &c, v.name, &capabilities).await.map_err(at)?;
                    let timed = actor::Timed { value: reply, elapsed: Duration::ZERO };
                    ctx.expect(step, &timed, who).map_err(|e| at(format!("{who} ({}): {e}", actor.binding)))?;
                    continue;
                }
                let id = actor.send(op).await.map_err(at)?;
                match step.get("async").and_then(Value::as_str) {
                    Some(label) => {
                        pending.insert(label.to_string(), (who.to_string(), id));
                    }
                    None => {
                        let reply = actor.wait(id, OP_LIMIT).await.map_err(at)?;
                        let label = step.get("save").and_then(Value::as_str).unwrap_or(who);
                        ctx.expect(step, &reply, label).map_err(|e| at(format!("{who} ({}): {e}", actor.binding)))?;
                    }
                }
            } else {
                return Err(at(format!("unknown step {step}")));
            }
        }
        Ok(())
    }
    .await;
    // A spell or a pause still running (a failed step) ends before the actors exit, so their
    // releases land.
    let settled = tokio::task::block_in_place(|| v.fixture.settle());
    for who in &paused {
        if let Some(a) = actors.get(who) {
            let _ = a.signal(libc::SIGCONT);
        }
    }
    // A clean run's actors serve the next run; any other run's (a failed step, a frozen or
    // crashed actor) exit, as every run's did before actors were kept.
    let clean = result.is_ok() && settled.is_ok() && paused.is_empty();
    for (_, a) in actors {
        if clean {
            plan.pool.give_back(a).await;
        } else {
            a.finish().await;
        }
    }
    v.fixture.finish();
    result.and(settled)
}

/// The scenario × variant table in Markdown. A cell is ✅ when every run of the scenario on
/// that variant passed (each binding alone and every mixed rotation), else lists the failed
/// runs, and is – where the variant lacks a capability the scenario needs.
fn table(scenarios: &[Scenario], specs: &[ActorSpec], variants: &[Variant], results: &[RunResult]) -> String {
    let bindings: Vec<&str> = specs.iter().map(|s| s.binding.as_str()).collect();
    let runs = results.len();
    let passed = results.iter().filter(|r| r.ok()).count();
    let mut t = format!(
        "Each cell: the scenario on that server variant with every binding ({}) alone and in every mixed rotation; {passed} of {runs} runs as expected.\n\n| scenario | needs |",
        bindings.join(", ")
    );
    for v in variants {
        t.push_str(&format!(" {} |", v.name));
    }
    t.push_str("\n|---|---|");
    for _ in variants {
        t.push_str("---|");
    }
    t.push('\n');
    for sc in scenarios {
        let needs = if sc.needs.is_empty() { "–".to_string() } else { sc.needs.join(", ") };
        t.push_str(&format!("| {} | {needs} |", sc.name));
        for v in variants {
            let rs: Vec<&RunResult> = results.iter().filter(|r| r.scenario == sc.name && r.variant == v.name).collect();
            let cell = if rs.is_empty() {
                "–".to_string()
            } else {
                let failed: Vec<&str> = rs.iter().filter(|r| !r.ok()).map(|r| r.label.as_str()).collect();
                let expected = rs.iter().any(|r| r.expected_failure);
                let cell = if !failed.is_empty() {
                    format!("❌ {}", failed.join(", "))
                } else if expected {
                    "expected failure".to_string()
                } else {
                    "✅".to_string()
                };
                cell
            };
            t.push_str(&format!(" {cell} |"));
        }
        t.push('\n');
    }
    t
}

fn update_readme(path: &Path, table: &str) -> Result<(), String> {
    const START: &str = "<!-- conformance:start -->";
    const END: &str = "<!-- conformance:end -->";
    let text = read(path)?;
    let (Some(a), Some(b)) = (text.find(START), text.find(END)) else {
        return Err(format!("{} has no {START} … {END} markers", path.display()));
    };
    let updated = format!("{}{START}\n{table}{}", &text[..a], &text[b..]);
    std::fs::write(path, updated).map_err(|e| format!("{}: {e}", path.display()))
}
