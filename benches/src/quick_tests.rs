//! The harness builds and every scenario runs with tiny counts. No timing is
//! asserted: these are benchmarks, checked here only for running to the end
//! and reporting. The database scenarios run only when `DATABASE_URL` is set
//! (S7 also needs `wrk`).

use std::time::Duration;

#[cfg(feature = "peers")]
use crate::plot;
use crate::report::Report;
use crate::scenarios::contended::{self, LoadSettings};
use crate::scenarios::db::{self, DbKind, DbSettings};
use crate::scenarios::http::{self, HttpSettings};
use crate::scenarios::options::{self, OptionSettings};
use crate::scenarios::spike::{self, SpikeSettings};
use crate::scenarios::uncontended::{self, S1Settings};
use crate::Kind;

fn tiny_load(pool_sizes: &[u32], tasks: &[usize], record: bool) -> LoadSettings {
    LoadSettings {
        points: contended::grid(pool_sizes, tasks),
        workers: contended::DEFAULT_WORKERS,
        duration: Duration::from_millis(20),
        grace: Duration::from_millis(500),
        repeats: 1,
        record,
    }
}

#[test]
fn quick_scenarios_run_and_report() {
    let mut report = Report::default();
    let s1 = S1Settings {
        pool_size: 4,
        iters: 2_048,
        time_limit: Duration::from_millis(50),
        repeats: 1,
        workers: None,
    };
    report.s1 = Kind::ALL
        .iter()
        .map(|&k| uncontended::run(k, &s1))
        .collect();
    report.s1_atomics = Some(uncontended::atomics_floor(&s1));
    assert!(report.s1.iter().all(|r| r.valid && r.ns_per_cycle > 0.0));

    report.s2 = contended::run(Kind::ALL, &tiny_load(&[2], &[2, 8], false));
    assert_eq!(report.s2.len(), 2 * Kind::ALL.len());
    let ours = report.s2.iter().filter(|r| r.pool == "ours");
    assert!(
        ours.clone().all(|r| !r.stuck && r.errors == 0),
        "{:?}",
        report.s2
    );
    assert!(ours.clone().all(|r| r.max_task > 0));

    report.s3 = contended::run(Kind::ALL, &tiny_load(&[1], &[8], true));
    let ours = report
        .s3
        .iter()
        .find(|r| r.pool == "ours")
        .expect("ours ran");
    assert!(ours.wait_us.is_some() && !ours.stuck);

    let spike = SpikeSettings {
        connect: Duration::from_millis(20),
        query: Duration::from_millis(1),
        max_size: 10,
        min_size: 2,
        requests: 10,
        watchdog: Duration::from_secs(5),
        repeats: 1,
    };
    report.s4 = [
        Kind::Ours,
        #[cfg(feature = "peers")]
        Kind::Deadpool,
    ]
    .iter()
    .map(|&k| spike::run(k, &spike))
    .collect();
    assert!(report.s4.iter().all(|r| r.valid));

    report.s6 = options::run(&OptionSettings {
        iters: 2_048,
        time_limit: Duration::from_millis(50),
        pool_size: 4,
        tasks: 8,
        duration: Duration::from_millis(20),
        repeats: 1,
    });
    assert_eq!(report.s6.len(), 4);
    assert!(
        report.s6.iter().any(|r| r.exported_lines > 0),
        "the recorder saw the pool"
    );

    if let Ok(url) = std::env::var("DATABASE_URL") {
        report.s5 = db::run(
            DbKind::ALL,
            &DbSettings {
                url: url.clone(),
                pool_size: 4,
                tasks: vec![8],
                validate: vec![false],
                duration: Duration::from_millis(50),
                grace: Duration::from_secs(2),
                repeats: 1,
                rate: None,
            },
        );
        assert!(report.s5.iter().all(|r| r.errors == 0), "{:?}", report.s5);
        if http::wrk_available() {
            // Plain, and with wrk pinned (`--wrk-cpus`): it runs through
            // `taskset`, and a bad list is an error, never a silent skip.
            let s7 = |wrk_cpus: Option<&str>| {
                http::run(
                    &[DbKind::OursTp],
                    &HttpSettings {
                        url: url.clone(),
                        pool_size: 4,
                        connections: vec![4],
                        seconds: 1,
                        repeats: 1,
                        wrk_cpus: wrk_cpus.map(str::to_owned),
                    },
                )
            };
            report.s7 = s7(None);
            assert!(report.s7.iter().all(|r| r.valid), "{:?}", report.s7);
            assert!(
                report.s7.iter().all(|r| r.rounds.len() == 1),
                "{:?}",
                report.s7
            );
            let on_core_0 = s7(Some("0"));
            assert!(
                on_core_0.iter().all(|r| r.valid && r.rps > 0.0),
                "{on_core_0:?}"
            );
            let nowhere = s7(Some("4096"));
            assert!(
                nowhere.iter().all(
                    |r| !r.valid && r.note.as_deref().is_some_and(|n| n.contains("wrk failed"))
                ),
                "{nowhere:?}"
            );
        }
    }

    let md = report.markdown();
    assert!(md.contains("### S1") && md.contains("### S2") && md.contains("### S6"));
    #[cfg(feature = "peers")]
    {
        let dir = std::env::temp_dir().join(format!("pool-benches-quick-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        plot::s2_throughput(&report, &dir.join("s2.svg")).expect("s2 plot");
        plot::s3_waits(&report, &dir.join("s3.svg")).expect("s3 plot");
        let svg = std::fs::read_to_string(dir.join("s2.svg")).expect("s2 svg written");
        assert!(svg.contains("<svg"));
        std::fs::remove_dir_all(&dir).ok();
    }
    serde_json::to_string(&report).expect("report serialises");
}

#[test]
fn workers_runs_report_a_table_by_workers() {
    let workers = [1, 2];
    let mut report = Report::default();
    report.meta.workers = workers.to_vec();
    let kinds: &[Kind] = &[
        Kind::Ours,
        #[cfg(feature = "peers")]
        Kind::Qp,
        Kind::Floor,
    ];
    for w in workers {
        let s1 = S1Settings {
            pool_size: 4,
            iters: 2_048,
            time_limit: Duration::from_millis(50),
            repeats: 1,
            workers: Some(w),
        };
        report
            .s1
            .extend(kinds.iter().map(|&k| uncontended::run(k, &s1)));
        let mut load = tiny_load(&[4], &[4], false);
        load.workers = w;
        report.s2.extend(contended::run(kinds, &load));
    }
    assert!(report.s1.iter().all(|r| r.valid && r.ns_per_cycle > 0.0));
    assert_eq!(report.s2.len(), workers.len() * kinds.len());
    assert!(report
        .s2
        .iter()
        .filter(|r| r.pool == "ours")
        .all(|r| !r.stuck && r.errors == 0));
    assert_eq!(
        report.s2.iter().map(|r| r.workers).collect::<Vec<_>>(),
        workers
            .iter()
            .flat_map(|&w| std::iter::repeat_n(w, kinds.len()))
            .collect::<Vec<_>>()
    );
    let md = report.markdown();
    assert!(md.contains("### Many cores"), "{md}");
    assert!(
        md.contains("| point | pool | 1 worker | 2 workers |"),
        "{md}"
    );
    #[cfg(feature = "peers")]
    assert!(
        md.contains("| S2 pool 4, 4 tasks, cycles/s | ours vs qp |"),
        "{md}"
    );
    assert!(
        md.contains("| S2 pool 4, 4 tasks, cycles/s | ours, Jain's index (worst repeat) |"),
        "{md}"
    );
    assert!(
        md.contains("### S1 uncontended get + drop, 2 workers"),
        "{md}"
    );
    assert!(
        md.contains("### S2 contended get → yield → drop, 1 worker"),
        "{md}"
    );
    let json = serde_json::to_value(&report).expect("report serialises");
    assert_eq!(json["s2"][0]["workers"], 1);
    assert_eq!(json["s1"][0]["workers"], 1);
}
