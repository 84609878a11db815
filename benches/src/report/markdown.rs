//! The Markdown tables of a [`Report`], with ratios to the best valid peer.

use std::fmt::Write as _;

use super::Report;
use crate::runner::runtime_label;
use crate::scenarios::contended::LoadRow;
use crate::scenarios::db::DbRow;
use crate::scenarios::http::HttpRow;
use crate::scenarios::uncontended::S1Row;

/// 1234567.0 → "1.23 M".
pub(crate) fn si(v: f64) -> String {
    if !v.is_finite() {
        "–".to_owned()
    } else if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1} k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Best of the `candidates` (value, valid) that are valid.
fn best(candidates: impl Iterator<Item = (f64, bool)>, higher_is_better: bool) -> Option<f64> {
    candidates
        .filter(|c| c.1 && c.0.is_finite() && c.0 > 0.0)
        .map(|c| c.0)
        .reduce(|a, b| if (b > a) == higher_is_better { b } else { a })
}

fn is_peer(pool: &str) -> bool {
    !pool.starts_with("ours") && pool != "floor"
}

fn ratio(ours: Option<f64>, peer: Option<f64>) -> String {
    match (ours, peer) {
        (Some(o), Some(p)) => format!("{:.2}×", o / p),
        _ => "–".to_owned(),
    }
}

/// Ours (when valid) and the best valid peer at one S2/S3 point, each read
/// by `on` (a row's median over all repeats, or on one placement).
fn ours_and_best(
    rows: &[&LoadRow],
    on: impl Fn(&LoadRow) -> Option<f64>,
) -> (Option<f64>, Option<f64>) {
    let peer = best(
        rows.iter()
            .filter(|r| is_peer(&r.pool))
            .filter_map(|r| on(r).map(|v| (v, r.valid))),
        true,
    );
    let ours = rows
        .iter()
        .find(|r| r.pool == "ours")
        .filter(|r| r.valid)
        .and_then(|r| on(r));
    (ours, peer)
}

/// Ours / best valid peer within one placement of the workers' cores (near
/// or far, see `placement.rs`), from each row's median on it, with the
/// count of our repeats it rests on.
fn placement_ratio(rows: &[&LoadRow], far: bool) -> String {
    let (ours, peer) = ours_and_best(rows, |r| if far { r.far } else { r.near });
    let Some(row) = rows.iter().find(|r| r.pool == "ours") else {
        return "–".to_owned();
    };
    let n = row
        .placement_ns
        .iter()
        .filter(|&&probes| crate::placement::stayed_far(probes) == Some(far))
        .count();
    match ratio(ours, peer).as_str() {
        "–" => "–".to_owned(),
        r => format!("{r} ({n}/{})", row.placement_ns.len()),
    }
}

fn load_cell(r: &LoadRow) -> String {
    let mut s = si(r.cycles_per_sec);
    if r.stuck {
        s.push_str(" ✗stuck");
    } else if r.errors > 0 {
        s.push_str(" ✗err");
    } else if !r.valid {
        let _ = write!(s, " ✗J={:.2}", r.jain);
    }
    s
}

impl Report {
    /// The Markdown tables.
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        self.md_many_cores(&mut md);
        self.md_s1(&mut md);
        self.md_s2(&mut md);
        self.md_s3(&mut md);
        self.md_s4(&mut md);
        self.md_s5(&mut md);
        self.md_s6(&mut md);
        self.md_s7(&mut md);
        if !self.notes.is_empty() {
            md.push_str("\n### Notes\n\n");
            for n in &self.notes {
                let _ = writeln!(md, "- {n}");
            }
        }
        md
    }

    fn md_s1(&self, md: &mut String) {
        for workers in unique(self.s1.iter().map(|r| r.workers)) {
            self.md_s1_on(md, workers);
        }
    }

    /// The S1 table of one runtime.
    fn md_s1_on(&self, md: &mut String, workers: Option<usize>) {
        let rows: Vec<&S1Row> = self.s1.iter().filter(|r| r.workers == workers).collect();
        let _ = write!(
            md,
            "\n### S1 uncontended get + drop, {} (ns per cycle, lower is better)\n\n",
            runtime_label(workers)
        );
        md.push_str("| pool | ns/cycle (median) | repeats | valid |\n|---|---:|---|---|\n");
        for r in rows.iter().copied().chain(self.s1_atomics.as_ref()) {
            let runs: Vec<String> = r.runs.iter().map(|v| format!("{v:.1}")).collect();
            let _ = writeln!(
                md,
                "| {} | {:.1} | {} | {} |",
                r.pool,
                r.ns_per_cycle,
                runs.join(", "),
                r.valid
            );
        }
        let ours = rows
            .iter()
            .find(|r| r.pool == "ours")
            .map(|r| r.ns_per_cycle);
        let peer = best(
            rows.iter()
                .filter(|r| is_peer(&r.pool))
                .map(|r| (r.ns_per_cycle, r.valid)),
            false,
        );
        let _ = writeln!(
            md,
            "\nBest valid peer / ours (speed-up): {}",
            ratio(peer, ours)
        );
    }

    fn md_s2(&self, md: &mut String) {
        for workers in unique(self.s2.iter().map(|r| r.workers)) {
            self.md_s2_on(md, workers);
        }
    }

    /// The S2 table of one worker count.
    fn md_s2_on(&self, md: &mut String, workers: usize) {
        let all: Vec<&LoadRow> = self.s2.iter().filter(|r| r.workers == workers).collect();
        let _ = write!(
            md,
            "\n### S2 contended get → yield → drop, {} (cycles/s, higher is better)\n\n",
            runtime_label(Some(workers))
        );
        md.push_str("✗ marks an invalid run (stuck past the watchdog, errors, or Jain's index < 0.8); invalid runs are never the best peer. The last two columns compare medians within one placement of the two workers' cores (near or far, probed before and after every repeat; a repeat during which it changed counts in neither; the bracket says how many of our repeats it rests on): see BENCH.md, *Noise*.\n\n");
        let pools: Vec<&str> = unique(all.iter().map(|r| r.pool.as_str()));
        let _ = writeln!(
            md,
            "| pool size | tasks | {} | best valid peer | ours / best | near placement | far placement |",
            pools.join(" | ")
        );
        let _ = writeln!(
            md,
            "|---|---|{}---|---|---|---|",
            "---:|".repeat(pools.len())
        );
        for (size, tasks) in unique(all.iter().map(|r| (r.pool_size, r.tasks))) {
            let rows: Vec<&LoadRow> = all
                .iter()
                .copied()
                .filter(|r| r.pool_size == size && r.tasks == tasks)
                .collect();
            let cells: Vec<String> = pools
                .iter()
                .map(|p| {
                    rows.iter()
                        .find(|r| r.pool == *p)
                        .map_or("–".to_owned(), |r| load_cell(r))
                })
                .collect();
            let (ours, peer) = ours_and_best(&rows, |r| Some(r.cycles_per_sec));
            let _ = writeln!(
                md,
                "| {size} | {tasks} | {} | {} | {} | {} | {} |",
                cells.join(" | "),
                peer.map_or("–".to_owned(), si),
                ratio(ours, peer),
                placement_ratio(&rows, false),
                placement_ratio(&rows, true)
            );
        }
    }

    fn md_s3(&self, md: &mut String) {
        for workers in unique(self.s3.iter().map(|r| r.workers)) {
            self.md_s3_on(md, workers);
        }
    }

    /// The S3 table of one worker count.
    fn md_s3_on(&self, md: &mut String, workers: usize) {
        let all: Vec<&LoadRow> = self.s3.iter().filter(|r| r.workers == workers).collect();
        let _ = write!(
            md,
            "\n### S3 handoff under exhaustion, {} (acquire wait in µs; Jain's index of per-task cycles)\n\n",
            runtime_label(Some(workers))
        );
        md.push_str("| pool size | tasks | pool | cycles/s | Jain | per-task min–max | wait p50 | wait p99 | wait max | valid |\n");
        md.push_str("|---|---|---|---:|---:|---|---:|---:|---:|---|\n");
        for r in &all {
            let [p50, p99, max] = r.wait_us.unwrap_or([f64::NAN; 3]);
            let mark = if r.stuck {
                "✗ stuck"
            } else if r.valid {
                "yes"
            } else {
                "✗"
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {:.3} | {}–{} | {p50:.1} | {p99:.1} | {max:.0} | {mark} |",
                r.pool_size,
                r.tasks,
                r.pool,
                si(r.cycles_per_sec),
                r.jain,
                r.min_task,
                r.max_task
            );
        }
        md.push('\n');
        for (size, tasks) in unique(all.iter().map(|r| (r.pool_size, r.tasks))) {
            let rows: Vec<&LoadRow> = all
                .iter()
                .copied()
                .filter(|r| r.pool_size == size && r.tasks == tasks)
                .collect();
            let (ours, peer) = ours_and_best(&rows, |r| Some(r.cycles_per_sec));
            let _ = writeln!(
                md,
                "- pool {size}, {tasks} tasks: ours / best valid peer throughput {} (near placement {}, far {})",
                ratio(ours, peer),
                placement_ratio(&rows, false),
                placement_ratio(&rows, true)
            );
        }
    }

    /// The table by workers (`--workers`): every contestant at every
    /// worker count, S1 then each S2 and S3 point, with ours against qp,
    /// the floor and the best valid peer of the same run.
    fn md_many_cores(&self, md: &mut String) {
        let workers = &self.meta.workers;
        if workers.is_empty() {
            return;
        }
        md.push_str("\n### Many cores: every contestant by the runtime's workers\n\n");
        md.push_str("S1: ns per get + drop, one task on a multi-thread runtime of that many workers (lower is better). S2/S3: cycles/s of the get → yield → drop loop (higher is better). The `ours vs` rows are ours' speed over theirs, from the same run (above 1: ours is faster; for S1 their ns / ours); the floor is the semaphore + queue loop. ✗ marks an invalid run, never the best peer. Jain's index is of the per-task cycle counts (1.000: perfectly even).\n\n");
        let heads: Vec<String> = workers.iter().map(|&w| runtime_label(Some(w))).collect();
        let _ = writeln!(md, "| point | pool | {} |", heads.join(" | "));
        let _ = writeln!(md, "|---|---|{}", "---:|".repeat(workers.len()));
        let line = |md: &mut String, point: &str, pool: &str, cells: Vec<String>| {
            let _ = writeln!(md, "| {point} | {pool} | {} |", cells.join(" | "));
        };

        // S1, lower is better.
        let s1 = |pool: &str, w: usize| {
            self.s1
                .iter()
                .find(|r| r.pool == pool && r.workers == Some(w))
        };
        let s1_pools = unique(
            self.s1
                .iter()
                .filter(|r| r.workers.is_some())
                .map(|r| r.pool.as_str()),
        );
        if !s1_pools.is_empty() {
            let point = "S1 uncontended, ns";
            for pool in &s1_pools {
                let cells = workers
                    .iter()
                    .map(|&w| {
                        s1(pool, w).map_or("–".to_owned(), |r| {
                            format!("{:.1}{}", r.ns_per_cycle, if r.valid { "" } else { " ✗" })
                        })
                    })
                    .collect();
                line(md, point, pool, cells);
            }
            let valid_ns =
                |pool: &str, w: usize| s1(pool, w).filter(|r| r.valid).map(|r| r.ns_per_cycle);
            for other in ["qp", "floor"] {
                let cells = workers
                    .iter()
                    .map(|&w| ratio(valid_ns(other, w), valid_ns("ours", w)))
                    .collect();
                line(md, point, &format!("ours vs {other}"), cells);
            }
            let cells = workers
                .iter()
                .map(|&w| {
                    let peer = best(
                        self.s1
                            .iter()
                            .filter(|r| r.workers == Some(w) && is_peer(&r.pool))
                            .map(|r| (r.ns_per_cycle, r.valid)),
                        false,
                    );
                    ratio(peer, valid_ns("ours", w))
                })
                .collect();
            line(md, point, "ours vs best valid peer", cells);
        }

        // S2 and S3, higher is better.
        for (name, rows) in [("S2", &self.s2), ("S3", &self.s3)] {
            for (size, tasks) in unique(rows.iter().map(|r| (r.pool_size, r.tasks))) {
                let at = |w: usize| -> Vec<&LoadRow> {
                    rows.iter()
                        .filter(|r| r.pool_size == size && r.tasks == tasks && r.workers == w)
                        .collect()
                };
                let point = format!("{name} pool {size}, {tasks} tasks, cycles/s");
                for pool in unique(rows.iter().map(|r| r.pool.as_str())) {
                    let cells = workers
                        .iter()
                        .map(|&w| {
                            at(w)
                                .iter()
                                .find(|r| r.pool == pool)
                                .map_or("–".to_owned(), |r| load_cell(r))
                        })
                        .collect();
                    line(md, &point, pool, cells);
                }
                let valid = |w: usize, pool: &str| {
                    at(w)
                        .iter()
                        .find(|r| r.pool == pool && r.valid)
                        .map(|r| r.cycles_per_sec)
                };
                for other in ["qp", "floor"] {
                    let cells = workers
                        .iter()
                        .map(|&w| ratio(valid(w, "ours"), valid(w, other)))
                        .collect();
                    line(md, &point, &format!("ours vs {other}"), cells);
                }
                let cells = workers
                    .iter()
                    .map(|&w| {
                        let (ours, peer) = ours_and_best(&at(w), |r| Some(r.cycles_per_sec));
                        ratio(ours, peer)
                    })
                    .collect();
                line(md, &point, "ours vs best valid peer", cells);
                let cells = workers
                    .iter()
                    .map(|&w| {
                        at(w)
                            .iter()
                            .find(|r| r.pool == "ours")
                            .map_or("–".to_owned(), |r| format!("{:.3}", r.jain))
                    })
                    .collect();
                line(md, &point, "ours, Jain's index (worst repeat)", cells);
            }
        }
    }

    fn md_s4(&self, md: &mut String) {
        if self.s4.is_empty() {
            return;
        }
        md.push_str("\n### S4 spike demand (connect 150 ms, query 2 ms, max 50, min 5, 50 requests at once)\n\n");
        md.push_str("| pool | connections opened by the spike (median) | total open (+5 warm) | time to serve all, ms (median) | repeats (opened, ms) | valid |\n");
        md.push_str("|---|---:|---:|---:|---|---|\n");
        for r in &self.s4 {
            let runs: Vec<String> = r
                .runs
                .iter()
                .map(|(o, ms)| format!("({o}, {ms:.0})"))
                .collect();
            let _ = writeln!(
                md,
                "| {} | {:.0} | {:.0} | {:.0} | {} | {} |",
                r.pool,
                r.opened,
                r.opened + 5.0,
                r.serve_all_ms,
                runs.join(" "),
                r.valid
            );
        }
    }

    fn md_s5(&self, md: &mut String) {
        if self.s5.is_empty() {
            return;
        }
        md.push_str("\n### S5 PostgreSQL `SELECT 1`, pool 16 (latency = get + query, µs)\n\n");
        md.push_str("| family | validation | tasks | pool | qps | p50 | p99 | max | valid | ours / best peer (qps) |\n");
        md.push_str("|---|---|---|---|---:|---:|---:|---:|---|---|\n");
        for r in &self.s5 {
            let group =
                |o: &&DbRow| o.family == r.family && o.tasks == r.tasks && o.validate == r.validate;
            let peer = best(
                self.s5
                    .iter()
                    .filter(group)
                    .filter(|o| is_peer(&o.pool))
                    .map(|o| (o.qps, o.valid)),
                true,
            );
            let vs = if r.pool.starts_with("ours") && r.valid {
                ratio(Some(r.qps), peer)
            } else {
                String::new()
            };
            let [p50, p99, max] = r.latency_us;
            let valid = if r.valid {
                "yes".to_owned()
            } else {
                format!("✗ {}", r.first_error.as_deref().unwrap_or("unfair"))
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {p50:.0} | {p99:.0} | {max:.0} | {valid} | {vs} |",
                r.family,
                if r.validate { "on" } else { "off" },
                r.tasks,
                r.pool,
                si(r.qps)
            );
        }
    }

    fn md_s6(&self, md: &mut String) {
        if self.s6.is_empty() {
            return;
        }
        let base = &self.s6[0];
        md.push_str("\n### S6 hot-path options, ours (S1 ns/cycle; S2 cycles/s)\n\n");
        md.push_str("| options | S1 ns | vs baseline | S2 cycles/s | vs baseline | exported series |\n|---|---:|---:|---:|---:|---:|\n");
        for r in &self.s6 {
            let _ = writeln!(
                md,
                "| {} | {:.1} | {:.2}× | {} | {:.2}× | {} |",
                r.label,
                r.s1_ns,
                r.s1_ns / base.s1_ns,
                si(r.s2_cycles_per_sec),
                r.s2_cycles_per_sec / base.s2_cycles_per_sec,
                r.exported_lines
            );
        }
    }

    fn md_s7(&self, md: &mut String) {
        if self.s7.is_empty() {
            return;
        }
        md.push_str("\n### S7 HTTP service under wrk (one `SELECT 1` per request; latency µs)\n\n");
        md.push_str("The last two columns compare rounds that stayed on one placement of the two cores throughout (see S2).\n\n");
        md.push_str("| family | connections | pool | requests/s | p50 | p99 | errors | ours / best peer of its family (rps) | near placement | far placement |\n|---|---|---|---:|---:|---:|---:|---|---|---|\n");
        let mut rows: Vec<&HttpRow> = self.s7.iter().collect();
        rows.sort_by_key(|r| r.connections);
        for r in rows {
            let peers = || {
                self.s7.iter().filter(|o| {
                    o.family == r.family && o.connections == r.connections && is_peer(&o.pool)
                })
            };
            let peer = best(peers().map(|o| (o.rps, o.valid)), true);
            let within = |on: fn(&HttpRow) -> Option<f64>| {
                let peer = best(peers().filter_map(|o| on(o).map(|v| (v, o.valid))), true);
                ratio(on(r).filter(|_| r.valid), peer)
            };
            let (vs, near, far) = if r.pool.starts_with("ours") && r.valid {
                (
                    ratio(Some(r.rps), peer),
                    within(|o| o.near),
                    within(|o| o.far),
                )
            } else {
                (String::new(), String::new(), String::new())
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {:.0} | {:.0} | {} | {vs} | {near} | {far} |",
                r.family,
                r.connections,
                r.pool,
                si(r.rps),
                r.latency_us[0],
                r.latency_us[1],
                r.errors
            );
        }
    }
}

/// Distinct items in first-seen order.
fn unique<T: PartialEq + Copy>(items: impl Iterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenarios::http::HttpRow;

    fn http(family: &str, pool: &str, rps: f64) -> HttpRow {
        HttpRow {
            family: family.to_owned(),
            pool: pool.to_owned(),
            connections: 16,
            rps,
            latency_us: [1.0, 2.0],
            errors: 0,
            note: None,
            valid: true,
            near: Some(rps),
            far: None,
            rounds: vec![rps],
        }
    }

    #[test]
    fn s7_ratio_is_within_the_family() {
        let report = Report {
            s7: vec![
                http("tokio-postgres", "ours (tokio-postgres)", 200.0),
                http("tokio-postgres", "deadpool-postgres", 400.0),
                http("sqlx", "ours (sqlx)", 300.0),
                http("sqlx", "sqlx PgPool", 150.0),
            ],
            ..Report::default()
        };
        let md = report.markdown();
        assert!(md.contains("| 0.50× |"), "{md}");
        assert!(md.contains("| 2.00× |"), "{md}");
    }

    #[test]
    fn invalid_peers_are_never_best() {
        assert_eq!(
            best([(5.0, false), (3.0, true)].into_iter(), true),
            Some(3.0)
        );
        assert_eq!(best([(5.0, false)].into_iter(), true), None);
        assert_eq!(
            best([(5.0, true), (3.0, true)].into_iter(), false),
            Some(3.0)
        );
    }
}
