//! The conformance orchestrator: runs every scenario in `conformance/scenarios/` against every
//! binding alone, then with actors spread across bindings, against a real redis-server it starts.
//!
//! Usage: `conformance [--bindings rust,python,...] [--scenarios name,...] [--table FILE]
//! [--readme README.md]`, or
//! `conformance --demo [--bindings ...] [--per-binding N] [--rounds N]` for `./run demo`
//! (run from the repository root; `./run` does).

mod actor;
mod busy;
mod check;
mod demo;
mod ports;
mod proxy;
mod server;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use actor::Actor;
use server::RedisServer;

/// Keys and lock names live under this prefix so runs never touch anything else.
const PREFIX: &str = "lockgate-conf:";
/// Longest any single operation may take before the run fails.
const OP_LIMIT: Duration = Duration::from_secs(60);
/// Independent masters started for the Redlock scenarios.
const REDLOCK_MASTERS: usize = 3;
/// The Redlock deployment's max lease: every actor is told it, and a fresh master grants
/// nothing until it has been up this long plus a second (PROTOCOL.md §8).
const REDLOCK_MAX_LEASE_MS: u64 = 5000;

#[derive(Deserialize)]
struct Scenario {
    name: String,
    #[allow(dead_code)]
    description: String,
    actors: Vec<String>,
    steps: Vec<Value>,
    /// Connect every actor's Redlock client to the independent masters too.
    #[serde(default)]
    redlock: bool,
    /// Actors reach the server through the orchestrator's loopback proxy (`{"proxy": ...}` steps).
    #[serde(default)]
    proxy: bool,
}

#[derive(Deserialize, Clone)]
struct ActorSpec {
    binding: String,
    command: Vec<String>,
}

/// One execution of a scenario with a given binding per actor.
struct RunResult {
    scenario: String,
    label: String,
    mixed: bool,
    bindings: Vec<String>,
    error: Option<String>,
    expected_failure: bool,
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

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = PathBuf::from(".");
    match run(&root, &args).await {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("conformance: {e}");
            std::process::exit(2);
        }
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
    let server = RedisServer::start()?;
    let masters = if scenarios.iter().any(|s| s.redlock) {
        (0..REDLOCK_MASTERS).map(|_| RedisServer::start()).collect::<Result<Vec<_>, _>>()?
    } else {
        Vec::new()
    };
    let masters_started = std::time::Instant::now();
    let mut results = Vec::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        if scenario.redlock {
            // The delayed-restart rule: fresh masters refuse grants for max_lease + 1 s.
            let ready = masters_started + Duration::from_millis(REDLOCK_MAX_LEASE_MS + 2000);
            tokio::time::sleep_until(ready.into()).await;
        }
        for (label, assignment, mixed) in assignments(scenario, &specs) {
            let bindings: Vec<String> = assignment.iter().map(|s| s.binding.clone()).collect();
            let expected_failure = bindings.iter().any(|b| failures.get(b).is_some_and(|f| f.contains_key(&scenario.name)));
            let tag = format!("{index}.{}", results.len());
            let error = execute(root, &server, &masters, scenario, &assignment, &tag).await.err();
            let r = RunResult { scenario: scenario.name.clone(), label, mixed, bindings, error, expected_failure };
            println!("{:<40} {:<28} {}{}", r.scenario, r.label, r.verdict(), r.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default());
            results.push(r);
        }
    }
    let table = table(&scenarios, &specs, &results);
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
    println!("conformance: {passed} passed, {failed} failed, {expected} skipped");
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

/// Every binding alone; then, for scenarios with several actors and several bindings, one
/// rotation per binding spreading the actors across bindings.
fn assignments<'a>(s: &Scenario, specs: &'a [ActorSpec]) -> Vec<(String, Vec<&'a ActorSpec>, bool)> {
    let mut out: Vec<(String, Vec<&ActorSpec>, bool)> =
        specs.iter().map(|spec| (spec.binding.clone(), s.actors.iter().map(|_| spec).collect(), false)).collect();
    if s.actors.len() > 1 && specs.len() > 1 {
        for shift in 0..specs.len() {
            let a: Vec<&ActorSpec> = (0..s.actors.len()).map(|i| &specs[(i + shift) % specs.len()]).collect();
            let label = format!("mixed:{}", a.iter().map(|s| s.binding.as_str()).collect::<Vec<_>>().join("+"));
            if a.iter().any(|x| x.binding != a[0].binding) {
                out.push((label, a, true));
            }
        }
    }
    out
}

/// Runs one scenario with one assignment of bindings to actors.
async fn execute(root: &Path, server: &RedisServer, masters: &[RedisServer], s: &Scenario, assignment: &[&ActorSpec], tag: &str) -> Result<(), String> {
    let proxy = if s.proxy {
        Some(proxy::Proxy::start(std::net::SocketAddr::from(([127, 0, 0, 1], server.port)))?)
    } else {
        None
    };
    let actor_url = proxy.as_ref().map_or_else(|| server.url(), proxy::Proxy::url);
    let mut actors: HashMap<String, Actor> = HashMap::new();
    for (name, spec) in s.actors.iter().zip(assignment) {
        let mut a = Actor::spawn(&spec.binding, &spec.command, root)?;
        let id = a.send(serde_json::json!({"op": "connect", "url": actor_url, "prefix": PREFIX})).await?;
        let r = a.wait(id, OP_LIMIT).await?;
        if r.value["ok"] != true {
            return Err(format!("{name} ({}) could not connect: {}", spec.binding, r.value));
        }
        if s.redlock {
            let urls: Vec<String> = masters.iter().map(RedisServer::url).collect();
            let op = serde_json::json!({"op": "connect_redlock", "urls": urls, "prefix": PREFIX, "max_lease_ms": REDLOCK_MAX_LEASE_MS});
            let id = a.send(op).await?;
            let r = a.wait(id, OP_LIMIT).await?;
            if r.value["ok"] != true {
                return Err(format!("{name} ({}) could not connect to the Redlock masters: {}", spec.binding, r.value));
            }
        }
        actors.insert(name.clone(), a);
    }
    let connect = |url: String| {
        redis::Client::open(url).and_then(|c| c.get_connection()).map_err(|e| format!("orchestrator cannot reach redis: {e}"))
    };
    let mut redis = connect(server.url())?;
    let mut master_conns = masters.iter().map(|m| connect(m.url())).collect::<Result<Vec<_>, _>>()?;
    let mut ctx = check::Context::new(PREFIX, &format!("{}.{tag}", s.name));
    let mut pending: HashMap<String, (String, u64)> = HashMap::new();
    let mut spell: Option<busy::BusySpell> = None;
    let result = async {
        for (i, step) in s.steps.iter().enumerate() {
            let at = |e: String| format!("step {}: {e}", i + 1);
            if let Some(ms) = step.get("sleep_ms").and_then(Value::as_u64) {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            } else if let Some(ms) = step.get("busy_ms").and_then(Value::as_u64) {
                if spell.is_some() {
                    return Err(at("a busy spell is already running".into()));
                }
                let url = server.url();
                spell = Some(tokio::task::block_in_place(|| busy::BusySpell::start(&url, ms)).map_err(at)?);
            } else if step.get("busy_end").is_some() {
                let mut sp = spell.take().ok_or_else(|| at("no busy spell is running".into()))?;
                tokio::task::block_in_place(|| sp.finish()).map_err(at)?;
            } else if let Some(what) = step.get("proxy").and_then(Value::as_str) {
                let p = proxy.as_ref().ok_or_else(|| at("the scenario has no \"proxy\": true".into()))?;
                match what {
                    "silence" => p.silence(),
                    "restore" => p.restore(),
                    other => return Err(at(format!("unknown proxy action {other:?}"))),
                }
            } else if let Some(who) = step.get("crash").and_then(Value::as_str) {
                actors.get_mut(who).ok_or_else(|| at(format!("unknown actor {who}")))?.crash().await;
            } else if let Some(cmd) = step.get("redis").and_then(Value::as_array) {
                let conn = match step.get("master").and_then(Value::as_u64) {
                    Some(i) => master_conns.get_mut(i as usize).ok_or_else(|| at(format!("no master {i}")))?,
                    None => &mut redis,
                };
                ctx.redis(conn, cmd, step.get("expect")).map_err(at)?;
            } else if let Some(lock) = step.get("expect_keys_absent").and_then(Value::as_str) {
                ctx.keys_absent(&mut redis, lock).map_err(at)?;
                for (i, m) in master_conns.iter_mut().enumerate() {
                    ctx.keys_absent(m, lock).map_err(|e| at(format!("master {i}: {e}")))?;
                }
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
                let mut op = ctx.operation(step);
                if let Some(picked) = op.get("masters").and_then(Value::as_array).cloned() {
                    // `connect_redlock` over a subset of the masters, by index.
                    let urls = picked
                        .iter()
                        .map(|i| i.as_u64().and_then(|i| masters.get(i as usize)).map(RedisServer::url))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| at(format!("bad master indices {picked:?}")))?;
                    op["urls"] = Value::from(urls);
                    op["prefix"] = Value::from(PREFIX);
                    op["max_lease_ms"] = Value::from(REDLOCK_MAX_LEASE_MS);
                    op.as_object_mut().expect("an operation is an object").remove("masters");
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
    // A spell still running (a failed step) ends before the actors exit, so their releases land.
    let spell_end = match spell.take() {
        Some(mut sp) => tokio::task::block_in_place(|| sp.finish()),
        None => Ok(()),
    };
    if let Some(p) = &proxy {
        p.restore();
    }
    for (_, a) in actors {
        a.finish().await;
    }
    drop(proxy);
    result.and(spell_end)
}

/// The scenario × binding table in Markdown (the "mixed" column covers every rotation).
fn table(scenarios: &[Scenario], specs: &[ActorSpec], results: &[RunResult]) -> String {
    let mut t = String::from("| scenario |");
    for s in specs {
        t.push_str(&format!(" {} |", s.binding));
    }
    t.push_str(" mixed |\n|---|");
    for _ in specs {
        t.push_str("---|");
    }
    t.push_str("---|\n");
    let mark = |rs: Vec<&RunResult>| -> String {
        if rs.is_empty() {
            "–".into()
        } else if rs.iter().all(|r| r.ok() && !r.expected_failure) {
            "✅".into()
        } else if rs.iter().all(|r| r.ok()) {
            "expected failure".into()
        } else {
            "❌".into()
        }
    };
    for sc in scenarios {
        t.push_str(&format!("| {} |", sc.name));
        for spec in specs {
            let rs = results.iter().filter(|r| r.scenario == sc.name && !r.mixed && r.bindings[0] == spec.binding).collect();
            t.push_str(&format!(" {} |", mark(rs)));
        }
        let rs = results.iter().filter(|r| r.scenario == sc.name && r.mixed).collect();
        t.push_str(&format!(" {} |\n", mark(rs)));
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
