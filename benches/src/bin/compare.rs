//! The comparison binary: runs every pool through S1–S7 and writes
//! `compare.json`, `compare.md` and the SVG plots.
//!
//! ```text
//! cargo run --release -p pool-benches --bin compare -- [--quick] [--only S1,S2,…] [--out DIR] [--db URL]
//! ```
//!
//! Full run: about 5 minutes; `--quick`: under one. Results go to
//! `benches/results/` (`benches/results/quick/` with `--quick`) unless `--out`
//! says otherwise. The database is `--db`, else `DATABASE_URL`, else
//! `postgres://postgres@127.0.0.1:5432/test`; S5 and S7 are skipped (with a
//! note) when it does not answer, S7 also when `wrk` is missing.

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pool_benches::report::{Meta, Report};
use pool_benches::scenarios::contended::{self, LoadSettings};
use pool_benches::scenarios::db::{self, DbKind, DbSettings};
use pool_benches::scenarios::http::{self, HttpSettings};
use pool_benches::scenarios::options::{self, OptionSettings};
use pool_benches::scenarios::spike::{self, SpikeSettings};
use pool_benches::scenarios::uncontended::{self, S1Settings};
use pool_benches::{plot, Kind};

struct Args {
    quick: bool,
    only: Option<Vec<String>>,
    out: PathBuf,
    db: String,
}

fn parse_args() -> Result<Args, String> {
    let mut quick = false;
    let mut only = None;
    let mut out = None;
    let mut db = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--only" => {
                let v = args.next().ok_or("--only needs a list, e.g. S1,S2")?;
                only = Some(v.split(',').map(|s| s.trim().to_uppercase()).collect());
            }
            "--out" => out = Some(PathBuf::from(args.next().ok_or("--out needs a directory")?)),
            "--db" => db = args.next().ok_or("--db needs a URL")?,
            "-h" | "--help" => {
                return Err(
                    "usage: compare [--quick] [--only S1,S2,…] [--out DIR] [--db URL]".to_owned(),
                )
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let default_out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results");
    let out = out.unwrap_or(if quick {
        default_out.join("quick")
    } else {
        default_out
    });
    Ok(Args {
        quick,
        only,
        out,
        db,
    })
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!("{cpu}, {cores} logical cores")
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let wants = |s: &str| args.only.as_ref().is_none_or(|o| o.iter().any(|x| x == s));
    let q = args.quick;
    let secs = |full: f64, quick: f64| Duration::from_secs_f64(if q { quick } else { full });
    let repeats = if q { 1 } else { 3 };
    let started = Instant::now();
    let mut report = Report {
        meta: Meta {
            mode: if q { "quick" } else { "full" }.to_owned(),
            started_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            cpu: machine(),
            load_before: load(),
            ..Meta::default()
        },
        ..Report::default()
    };

    if wants("S1") {
        eprintln!("S1 uncontended …");
        let s = S1Settings {
            pool_size: 16,
            iters: if q { 100_000 } else { 2_000_000 },
            time_limit: secs(0.5, 0.1),
            repeats: if q { 1 } else { 9 },
        };
        report.s1 = Kind::ALL.iter().map(|&k| uncontended::run(k, &s)).collect();
        report.s1_atomics = Some(uncontended::atomics_floor(&s));
    }
    if wants("S2") {
        eprintln!("S2 contended …");
        let s = LoadSettings {
            pool_sizes: vec![4, 16],
            tasks: vec![4, 16, 64, 256, 1024],
            duration: secs(0.3, 0.1),
            grace: secs(1.0, 0.5),
            repeats,
            record: false,
        };
        report.s2 = contended::run(&Kind::ALL, &s);
    }
    if wants("S3") {
        eprintln!("S3 handoff under exhaustion …");
        let s = LoadSettings {
            pool_sizes: vec![1, 2, 4],
            tasks: vec![256],
            duration: secs(0.4, 0.1),
            grace: secs(1.0, 0.5),
            repeats,
            record: true,
        };
        report.s3 = contended::run(&Kind::ALL, &s);
    }
    if wants("S4") {
        eprintln!("S4 spike demand …");
        let s = SpikeSettings {
            connect: Duration::from_millis(150),
            query: Duration::from_millis(2),
            max_size: 50,
            min_size: 5,
            requests: 50,
            watchdog: Duration::from_secs(10),
            repeats,
        };
        let kinds = Kind::ALL.iter().filter(|k| **k != Kind::Floor);
        report.s4 = kinds.map(|&k| spike::run(k, &s)).collect();
    }
    if wants("S6") {
        eprintln!("S6 hot-path options …");
        let s = OptionSettings {
            iters: if q { 100_000 } else { 2_000_000 },
            time_limit: secs(0.5, 0.1),
            pool_size: 16,
            tasks: 64,
            duration: secs(0.4, 0.1),
            repeats,
        };
        report.s6 = options::run(&s);
    }
    let db_ok = if wants("S5") || wants("S7") {
        match db::reachable(&args.db) {
            Ok(()) => true,
            Err(e) => {
                report
                    .notes
                    .push(format!("S5/S7 skipped: the database did not answer ({e})"));
                false
            }
        }
    } else {
        false
    };
    if db_ok && wants("S5") {
        eprintln!("S5 PostgreSQL …");
        let s = DbSettings {
            url: args.db.clone(),
            pool_size: 16,
            tasks: vec![16, 256],
            validate: vec![false, true],
            duration: secs(1.0, 0.3),
            grace: Duration::from_secs(3),
            repeats,
        };
        report.s5 = db::run(&DbKind::ALL, &s);
    }
    if db_ok && wants("S7") {
        if http::wrk_available() {
            eprintln!("S7 HTTP under wrk …");
            let s = HttpSettings {
                url: args.db.clone(),
                pool_size: 16,
                connections: if q { vec![16] } else { vec![16, 128] },
                seconds: if q { 1 } else { 2 },
                repeats: if q { 1 } else { 3 },
            };
            report.s7 = http::run(&DbKind::ALL, &s);
        } else {
            report
                .notes
                .push("S7 skipped: `wrk` is not installed (apt-get install wrk)".to_owned());
        }
    }
    report.meta.load_after = load();
    report.meta.seconds = started.elapsed().as_secs_f64();

    if let Err(e) = write(&args.out, &report) {
        eprintln!("writing results to {}: {e}", args.out.display());
        std::process::exit(1);
    }
    println!("{}", report.markdown());
    eprintln!(
        "done in {:.0} s; results in {}",
        report.meta.seconds,
        args.out.display()
    );
}

fn write(dir: &std::path::Path, report: &Report) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(
        dir.join("compare.json"),
        serde_json::to_string_pretty(report)?,
    )?;
    std::fs::write(dir.join("compare.md"), report.markdown())?;
    plot::s2_throughput(report, &dir.join("s2_throughput.svg"))?;
    plot::s3_waits(report, &dir.join("s3_waits.svg"))?;
    Ok(())
}
