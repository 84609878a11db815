//! SVG plots rendered from a [`Report`] with plotters' SVG backend (its
//! built-in text layout, no system fonts).

use std::path::Path;

use plotters::prelude::*;

use crate::report::Report;
use crate::runner::runtime_label;
use crate::scenarios::contended::{LoadRow, DEFAULT_WORKERS};

const COLOURS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(255, 127, 14),
    RGBColor(127, 127, 127),
    RGBColor(23, 190, 207),
];

type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// The rows of one worker count: the default one where the run has it,
/// else the first the run measured (a plot shows one runtime; the table by
/// workers is in the Markdown report).
fn one_runtime(rows: &[LoadRow]) -> (usize, Vec<LoadRow>) {
    let workers = if rows.iter().any(|r| r.workers == DEFAULT_WORKERS) {
        DEFAULT_WORKERS
    } else {
        rows.first().map_or(DEFAULT_WORKERS, |r| r.workers)
    };
    let rows = rows
        .iter()
        .filter(|r| r.workers == workers)
        .cloned()
        .collect();
    (workers, rows)
}

fn pools(rows: &[LoadRow]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(&r.pool) {
            out.push(r.pool.clone());
        }
    }
    out
}

/// S2: cycles/s against tasks (log scale), one panel per pool size; invalid
/// points are drawn as crosses.
pub fn s2_throughput(report: &Report, path: &Path) -> PlotResult {
    let (workers, s2) = one_runtime(&report.s2);
    let sizes: Vec<u32> = {
        let mut v: Vec<u32> = s2.iter().map(|r| r.pool_size).collect();
        v.dedup();
        v.sort_unstable();
        v.dedup();
        v
    };
    if sizes.is_empty() {
        return Ok(());
    }
    let root = SVGBackend::new(path, (560 * sizes.len() as u32, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, sizes.len()));
    let names = pools(&s2);
    let max_tasks = s2.iter().map(|r| r.tasks).max().unwrap_or(2).max(2) as f64;
    let min_tasks = s2.iter().map(|r| r.tasks).min().unwrap_or(1).max(1) as f64;
    let top = s2.iter().map(|r| r.cycles_per_sec).fold(1.0, f64::max) / 1e6 * 1.15;
    for (panel, size) in panels.iter().zip(&sizes) {
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("S2: pool {size}, {}", runtime_label(Some(workers))),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(52)
            .build_cartesian_2d((min_tasks..max_tasks).log_scale(), 0.0..top)?;
        chart
            .configure_mesh()
            .x_desc("tasks")
            .y_desc("million cycles/s")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()?;
        for (i, name) in names.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let pts: Vec<(f64, f64, bool)> = s2
                .iter()
                .filter(|r| r.pool == *name && r.pool_size == *size)
                .map(|r| (r.tasks as f64, r.cycles_per_sec / 1e6, r.valid))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.1)),
                    colour.stroke_width(2),
                ))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
            chart.draw_series(pts.iter().map(|&(x, y, valid)| {
                if valid {
                    Circle::new((x, y), 3, colour.filled()).into_dyn()
                } else {
                    Cross::new((x, y), 5, colour.stroke_width(2)).into_dyn()
                }
            }))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// S3: acquire wait p50, p99 and max (µs, log scale) against pool size, one
/// panel per percentile; invalid pools drawn as crosses.
pub fn s3_waits(report: &Report, path: &Path) -> PlotResult {
    let (workers, s3) = one_runtime(&report.s3);
    let rows: Vec<&LoadRow> = s3.iter().filter(|r| r.wait_us.is_some()).collect();
    if rows.is_empty() {
        return Ok(());
    }
    let names = pools(&s3);
    let root = SVGBackend::new(path, (1500, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, 3));
    let max_size = rows.iter().map(|r| r.pool_size).max().unwrap_or(1) as f64;
    for (k, (panel, title)) in panels.iter().zip(["p50", "p99", "max"]).enumerate() {
        let values: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.wait_us.map(|w| w[k]))
            .collect();
        let lo = values
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
            .max(0.01)
            / 2.0;
        let hi = values.iter().copied().fold(0.0, f64::max).max(lo * 10.0) * 2.0;
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("S3: acquire wait {title}, {}", runtime_label(Some(workers))),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(60)
            .build_cartesian_2d(0.5..max_size + 0.5, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("pool size")
            .y_desc("µs")
            .x_labels(max_size as usize + 1)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()?;
        for (i, name) in names.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let pts: Vec<(f64, f64, bool)> = rows
                .iter()
                .filter(|r| r.pool == *name)
                .filter_map(|r| Some((f64::from(r.pool_size), r.wait_us?[k].max(lo), r.valid)))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.1)),
                    colour.stroke_width(2),
                ))?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2))
                });
            chart.draw_series(pts.iter().map(|&(x, y, valid)| {
                if valid {
                    Circle::new((x, y), 3, colour.filled()).into_dyn()
                } else {
                    Cross::new((x, y), 5, colour.stroke_width(2)).into_dyn()
                }
            }))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::MiddleRight)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
