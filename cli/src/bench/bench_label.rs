//! The holder label's own cost on the core's contended rows (issue 25: "adding the label must
//! not slow the uncontended or contended rows beyond noise"), measured in one run on one Redis:
//! the contended rows of `bench` (4 and 16 worker processes, each holding ~1 ms) with the
//! default label (`<host>:<pid>`, what every client stores) and with none (`label` empty), in
//! interleaved rounds that alternate which goes first. The spread of the per-round ratios is
//! the noise the medians' ratio is read against.

use std::fmt::Write as _;

use crate::bench::{contended, Contended, Spec};
use crate::stats::percentile;

/// `bench-label`'s arguments.
#[derive(clap::Args)]
pub struct BenchLabelArgs {
    /// A Redis server to measure on (`redis://127.0.0.1:PORT`).
    #[arg(long)]
    url: String,
    /// Rounds; each runs every row once with the label and once without.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Seconds of each contended run.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Also write the Markdown to this file.
    #[arg(long)]
    out: Option<String>,
    /// The command line shown in the report.
    #[arg(long)]
    command: Option<String>,
}

/// What one row measured, with and without the label, over the rounds.
#[derive(Default)]
struct Row {
    labelled: Vec<[f64; 3]>,
    bare: Vec<[f64; 3]>,
}

fn figures(c: &Contended) -> [f64; 3] {
    [c.acq_per_s, c.handoff_p50_us, c.handoff_p99_us]
}

/// Runs the rounds and prints the Markdown section.
pub async fn run(args: &BenchLabelArgs) -> i32 {
    let mut rows = [Row::default(), Row::default()];
    for round in 0..args.rounds {
        for (i, workers) in [4u64, 16].into_iter().enumerate() {
            let order: [Option<String>; 2] = if round % 2 == 0 { [None, Some(String::new())] } else { [Some(String::new()), None] };
            for label in order {
                let bare = label.is_some();
                let spec = Spec { plain: false, processes: workers, tasks: 1, seconds: args.seconds, label };
                match contended(&args.url, spec).await {
                    Ok(c) if bare => rows[i].bare.push(figures(&c)),
                    Ok(c) => rows[i].labelled.push(figures(&c)),
                    Err(e) => {
                        eprintln!("bench-label: {e}");
                        return 1;
                    }
                }
            }
        }
        eprintln!("bench-label: round {} of {} done", round + 1, args.rounds);
    }
    let md = report(args, &rows);
    if let Some(path) = &args.out {
        if let Err(e) = std::fs::write(path, &md) {
            eprintln!("bench-label: cannot write {path}: {e}");
            return 1;
        }
    }
    print!("{md}");
    0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 50.0)
}

fn report(args: &BenchLabelArgs, rows: &[Row; 2]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "## Core (Rust): the holder label's cost on the contended rows (issue 25)\n");
    let _ = writeln!(md, "Command: `{}`\n", args.command.clone().unwrap_or_else(|| "cargo run --release -p lockgate-cli --bin lockgate-bench -- bench-label --url redis://…".into()));
    let _ = writeln!(
        md,
        "{} rounds of {} s per row, alternating which goes first; medians over the rounds, and in brackets the lowest and highest per-round ratio (labelled / none: the noise band). The label is slower beyond the noise on a figure only if it was slower in every round.\n",
        args.rounds, args.seconds
    );
    let _ = writeln!(md, "| workers | figure | label `<host>:<pid>` | no label | ratio (per-round range) | slower in every round |");
    let _ = writeln!(md, "|---|---|---:|---:|---|---|");
    for (row, workers) in rows.iter().zip([4, 16]) {
        // Acquisitions per second are slower when lower; hand-over times when higher.
        for (k, name, lower_is_slower) in [(0, "acquisitions/s", true), (1, "handoff p50 µs", false), (2, "handoff p99 µs", false)] {
            let with: Vec<f64> = row.labelled.iter().map(|f| f[k]).collect();
            let without: Vec<f64> = row.bare.iter().map(|f| f[k]).collect();
            let per_round: Vec<f64> = with.iter().zip(&without).map(|(a, b)| a / b).collect();
            let lo = per_round.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = per_round.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let (a, b) = (median(with), median(without));
            let slower = if lower_is_slower { hi < 1.0 } else { lo > 1.0 };
            let _ = writeln!(md, "| {workers} | {name} | {a:.0} | {b:.0} | {:.2} ({lo:.2}–{hi:.2}) | {} |", a / b, if slower { "yes" } else { "no" });
        }
    }
    md
}
