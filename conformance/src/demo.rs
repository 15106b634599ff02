//! `./run demo`: actors in every available language contend for one lock on a Redis started
//! here; prints who held it, in which language, with which fencing token, and a tally.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use crate::actor::Actor;
use lockgate_conformance::server::RedisServer;
use crate::{ActorSpec, OP_LIMIT, PREFIX};

pub async fn run(root: &Path, specs: &[ActorSpec], per_binding: usize, rounds: u64) -> Result<bool, String> {
    let server = RedisServer::start()?;
    let langs: Vec<&str> = specs.iter().map(|s| s.binding.as_str()).collect();
    println!(
        "lockgate demo: {} processes ({}) contend for one lock on {}, {rounds} holdings each\n",
        per_binding * specs.len(),
        langs.join(", "),
        server.url()
    );
    let mut actors = Vec::new();
    for spec in specs {
        for i in 1..=per_binding {
            let mut a = Actor::spawn(&spec.binding, &spec.command, root)?;
            let id = a.send(json!({"op": "connect", "url": server.url(), "options": {"prefix": PREFIX}})).await?;
            let r = a.wait(id, OP_LIMIT).await?;
            if r.value["ok"] != true {
                return Err(format!("{} actor could not connect: {}", spec.binding, r.value));
            }
            actors.push((format!("{}-{i}", spec.binding), a));
        }
    }
    let mut ids = Vec::new();
    for (_, a) in actors.iter_mut() {
        ids.push(a.send(json!({"op": "hammer", "lock": "demo", "times": rounds, "hold_ms": 40})).await?);
    }
    // (enter_ns, exit_ns, token, who, language)
    let mut holdings: Vec<(u128, u128, u128, String, String)> = Vec::new();
    for ((who, a), id) in actors.iter_mut().zip(ids) {
        let r = a.wait(id, OP_LIMIT).await?;
        let records = r.value["records"].as_array().ok_or_else(|| format!("{who} failed: {}", r.value))?;
        for rec in records {
            let f = |i: usize| rec[i].as_str().and_then(|s| s.parse::<u128>().ok()).unwrap_or(0);
            holdings.push((f(1), f(2), f(0), who.clone(), a.binding.clone()));
        }
    }
    for (_, a) in actors {
        a.finish().await;
    }
    holdings.sort();
    let t0 = holdings.first().map(|h| h.0).unwrap_or(0);
    for (enter, exit, token, who, lang) in &holdings {
        println!(
            "  {:>7.1} ms  {who:<10} ({lang:<6}) held \"demo\" with fencing token {token}  for {:.0} ms",
            (*enter - t0) as f64 / 1e6,
            (*exit - *enter) as f64 / 1e6
        );
    }
    let overlaps = holdings.windows(2).filter(|w| w[1].0 < w[0].1).count();
    let increasing = holdings.windows(2).all(|w| w[1].2 > w[0].2);
    let mut per_lang: BTreeMap<&str, usize> = BTreeMap::new();
    for h in &holdings {
        *per_lang.entry(h.4.as_str()).or_default() += 1;
    }
    let expected = per_binding * specs.len() * rounds as usize;
    println!("\ntally: {} holdings (expected {expected})", holdings.len());
    for (lang, n) in &per_lang {
        println!("  {lang:<8} {n}");
    }
    println!("  overlapping holdings:      {overlaps}");
    println!("  fencing tokens increasing: {}", if increasing { "yes" } else { "NO" });
    let ok = overlaps == 0 && increasing && holdings.len() == expected;
    println!("\n{}", if ok { "demo OK: never two holders at once, across languages" } else { "demo FAILED" });
    Ok(ok)
}
