//! The comparison binary: runs every pool through S1–S7 and writes
//! `compare.json`, `compare.md` and the SVG plots.
//!
//! ```text
//! cargo run --release -p pool-benches --features peers --bin compare -- [--quick] [--only S1,S2,…] [--out DIR] [--db URL]
//!     [--workers 1,2,4,8,16] [--pools ours,qp,…] [--points 16x16,16x256] [--repeats N]
//!     [--wrk-cpus LIST]
//! ```
//!
//! Full run: about 5 minutes; `--quick`: under one. Results go to
//! `benches/out/` (`benches/out/quick/` with `--quick`), a folder git
//! ignores, unless `--out` says otherwise; with `--workers`, to
//! `workers_1_2_4_8_16/` under it. The results BENCH.md cites are copied
//! into `benches/results/` by hand, so a run never rewrites them.
//!
//! `--workers` runs S1–S3 once per worker count on a multi-thread runtime of
//! that many workers (S1: its one task on a worker) and adds the table by
//! workers to the report; without it S1 runs on the current-thread runtime
//! and S2/S3 on 2 workers, as always. `--pools` picks the contestants of
//! S1–S4 (default: all), `--points` replaces S2's (pool size x tasks) grid,
//! `--repeats` every scenario's repeats. The results are written after every
//! scenario (and every worker count), so a run cut short keeps what it
//! finished. The database is `--db`, else `DATABASE_URL`, else
//! `postgres://postgres@127.0.0.1:5432/test`; S5 and S7 are skipped (with a
//! note) when it does not answer, S7 also when `wrk` is missing.
//! `--wrk-cpus` runs S7's `wrk` under `taskset -c LIST`, for runs that keep
//! the service and the database off those cores
//! (`scripts/s7_wrk_own_core.sh`).

use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pool_benches::report::{Meta, Report};
use pool_benches::runner::{check_core_list, parse_workers, runtime_label};
use pool_benches::scenarios::contended::{self, LoadSettings, DEFAULT_WORKERS};
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
    workers: Option<Vec<usize>>,
    pools: Option<Vec<Kind>>,
    points: Option<Vec<(u32, usize)>>,
    repeats: Option<usize>,
    wrk_cpus: Option<String>,
}

const USAGE: &str = "usage: compare [--quick] [--only S1,S2,…] [--out DIR] [--db URL] \
     [--workers 1,2,4,8,16] [--pools ours,qp,…] [--points 16x16,16x256] [--repeats N] \
     [--wrk-cpus LIST]";

fn parse_args() -> Result<Args, String> {
    let mut quick = false;
    let mut only = None;
    let mut out = None;
    let (mut workers, mut pools, mut points, mut repeats) = (None, None, None, None);
    let mut wrk_cpus = None;
    let mut db = pool_benches::scenarios::db::database_url();
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
            "--workers" => {
                workers = Some(parse_workers(
                    &args.next().ok_or("--workers needs a list")?,
                )?);
            }
            "--pools" => {
                let v = args
                    .next()
                    .ok_or("--pools needs a list, e.g. ours,qp,floor")?;
                let kinds = v
                    .split(',')
                    .map(|name| {
                        Kind::from_label(name.trim()).ok_or(format!("unknown pool {name:?}"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                pools = Some(kinds);
            }
            "--points" => {
                let v = args
                    .next()
                    .ok_or("--points needs a list, e.g. 16x16,16x256")?;
                points = Some(contended::parse_points(&v)?);
            }
            "--repeats" => {
                let v = args.next().ok_or("--repeats needs a number")?;
                match v.parse::<usize>() {
                    Ok(n @ 1..=100) => repeats = Some(n),
                    _ => return Err(format!("--repeats {v:?}: a number in 1..=100")),
                }
            }
            "--wrk-cpus" => {
                let v = args.next().ok_or("--wrk-cpus needs a core list, e.g. 1")?;
                check_core_list("--wrk-cpus", &v)?;
                wrk_cpus = Some(v);
            }
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let default_out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("out");
    let default_out = if quick {
        default_out.join("quick")
    } else {
        default_out
    };
    // A run by workers names its worker counts in its folder and never
    // overwrites the default run's files.
    let default_out = match &workers {
        Some(w) => default_out.join(format!(
            "workers_{}",
            w.iter().map(usize::to_string).collect::<Vec<_>>().join("_")
        )),
        None => default_out,
    };
    Ok(Args {
        quick,
        only,
        out: out.unwrap_or(default_out),
        db,
        workers,
        pools,
        points,
        repeats,
        wrk_cpus,
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
    let repeats = args.repeats.unwrap_or(if q { 1 } else { 3 });
    let kinds: Vec<Kind> = args.pools.clone().unwrap_or(Kind::ALL.to_vec());
    // S1's runtimes and S2/S3's worker counts: the defaults unless
    // `--workers` names them.
    let s1_runtimes: Vec<Option<usize>> = match &args.workers {
        None => vec![None],
        Some(w) => w.iter().map(|&n| Some(n)).collect(),
    };
    let load_workers = args.workers.clone().unwrap_or(vec![DEFAULT_WORKERS]);
    let started = Instant::now();
    let mut report = Report {
        meta: Meta {
            mode: if q { "quick" } else { "full" }.to_owned(),
            started_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            cpu: machine(),
            load_before: load(),
            workers: args.workers.clone().unwrap_or_default(),
            ..Meta::default()
        },
        ..Report::default()
    };

    // Written after every part, so a run cut short keeps what it finished.
    let checkpoint = |report: &mut Report| {
        report.meta.load_after = load();
        report.meta.seconds = started.elapsed().as_secs_f64();
        if let Err(e) = write(&args.out, report) {
            eprintln!("writing results to {}: {e}", args.out.display());
            std::process::exit(1);
        }
    };
    let progress = |what: &str| {
        eprintln!("[{:>4.0} s] {what} …", started.elapsed().as_secs_f64());
    };

    if wants("S1") {
        for &workers in &s1_runtimes {
            progress(&format!("S1 uncontended, {}", runtime_label(workers)));
            let s = S1Settings {
                pool_size: 16,
                iters: if q { 100_000 } else { 2_000_000 },
                time_limit: secs(0.5, 0.1),
                repeats: args.repeats.unwrap_or(if q { 1 } else { 9 }),
                workers,
            };
            report
                .s1
                .extend(kinds.iter().map(|&k| uncontended::run(k, &s)));
            report.s1_atomics = Some(uncontended::atomics_floor(&s));
            checkpoint(&mut report);
        }
    }
    if wants("S2") {
        for &workers in &load_workers {
            progress(&format!("S2 contended, {}", runtime_label(Some(workers))));
            let s = LoadSettings {
                points: args
                    .points
                    .clone()
                    .unwrap_or_else(|| contended::grid(&[4, 16], &[4, 16, 64, 256, 1024])),
                workers,
                duration: secs(0.3, 0.1),
                grace: secs(1.0, 0.5),
                repeats,
                record: false,
            };
            report.s2.extend(contended::run(&kinds, &s));
            checkpoint(&mut report);
        }
    }
    if wants("S3") {
        for &workers in &load_workers {
            progress(&format!(
                "S3 handoff under exhaustion, {}",
                runtime_label(Some(workers))
            ));
            let s = LoadSettings {
                points: contended::grid(&[1, 2, 4], &[256]),
                workers,
                duration: secs(0.4, 0.1),
                grace: secs(1.0, 0.5),
                repeats,
                record: true,
            };
            report.s3.extend(contended::run(&kinds, &s));
            checkpoint(&mut report);
        }
    }
    if wants("S4") {
        progress("S4 spike demand");
        let s = SpikeSettings {
            connect: Duration::from_millis(150),
            query: Duration::from_millis(2),
            max_size: 50,
            min_size: 5,
            requests: 50,
            watchdog: Duration::from_secs(10),
            repeats,
        };
        let spiked = kinds.iter().filter(|k| **k != Kind::Floor);
        report.s4 = spiked.map(|&k| spike::run(k, &s)).collect();
        checkpoint(&mut report);
    }
    if wants("S6") {
        progress("S6 hot-path options");
        let s = OptionSettings {
            iters: if q { 100_000 } else { 2_000_000 },
            time_limit: secs(0.5, 0.1),
            pool_size: 16,
            tasks: 64,
            duration: secs(0.4, 0.1),
            repeats,
        };
        report.s6 = options::run(&s);
        checkpoint(&mut report);
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
        progress("S5 PostgreSQL");
        let s = DbSettings {
            url: args.db.clone(),
            pool_size: 16,
            tasks: vec![16, 256],
            validate: vec![false, true],
            duration: secs(1.0, 0.3),
            grace: Duration::from_secs(3),
            repeats,
            rate: None,
        };
        report.s5 = db::run(DbKind::ALL, &s);
        checkpoint(&mut report);
    }
    if db_ok && wants("S7") {
        if http::wrk_available() {
            progress("S7 HTTP under wrk");
            let s = HttpSettings {
                url: args.db.clone(),
                pool_size: 16,
                connections: if q { vec![16] } else { vec![16, 128] },
                seconds: if q { 1 } else { 2 },
                repeats,
                wrk_cpus: args.wrk_cpus.clone(),
            };
            report.s7 = http::run(DbKind::ALL, &s);
        } else {
            report
                .notes
                .push("S7 skipped: `wrk` is not installed (apt-get install wrk)".to_owned());
        }
    }
    checkpoint(&mut report);
    println!("{}", report.markdown());
    eprintln!(
        "done in {:.0} s; results in {}",
        report.meta.seconds,
        args.out.display()
    );
}

fn write(dir: &std::path::Path, report: &Report) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    // Each file is written aside and renamed into place, so a run stopped
    // mid-write leaves the previous checkpoint whole.
    let put = |name: &str, text: String| -> std::io::Result<()> {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, dir.join(name))
    };
    put("compare.json", serde_json::to_string_pretty(report)?)?;
    put("compare.md", report.markdown())?;
    plot::s2_throughput(report, &dir.join("s2_throughput.svg"))?;
    plot::s3_waits(report, &dir.join("s3_waits.svg"))?;
    Ok(())
}
