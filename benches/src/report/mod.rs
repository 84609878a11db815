//! The results of one run: JSON as measured ([`Report`] serialises as is),
//! and the Markdown tables with ratios to the best valid peer
//! (`markdown.rs`).

use serde::Serialize;

mod markdown;

use crate::scenarios::contended::LoadRow;
use crate::scenarios::db::DbRow;
use crate::scenarios::http::HttpRow;
use crate::scenarios::options::OptionRow;
use crate::scenarios::spike::SpikeRow;
use crate::scenarios::uncontended::S1Row;

/// Where and how the run was taken.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Meta {
    /// "full" or "quick".
    pub mode: String,
    /// UTC start, RFC 3339-ish, from the system clock.
    pub started_unix: u64,
    /// CPU model and logical cores.
    pub cpu: String,
    /// Load averages (1, 5, 15 min) before and after the run.
    pub load_before: String,
    /// See `load_before`.
    pub load_after: String,
    /// Whole run, seconds.
    pub seconds: f64,
    /// The worker counts `--workers` asked for S1–S3; empty: the defaults
    /// (S1 on the current-thread runtime, S2/S3 on 2 workers).
    pub workers: Vec<usize>,
}

/// Everything one run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// Where and how.
    pub meta: Meta,
    /// S1 per contestant.
    pub s1: Vec<S1Row>,
    /// S1 floor: four atomic RMWs.
    pub s1_atomics: Option<S1Row>,
    /// S2 points.
    pub s2: Vec<LoadRow>,
    /// S3 points.
    pub s3: Vec<LoadRow>,
    /// S4 per contestant.
    pub s4: Vec<SpikeRow>,
    /// S5 rows.
    pub s5: Vec<DbRow>,
    /// S6 rows.
    pub s6: Vec<OptionRow>,
    /// S7 rows.
    pub s7: Vec<HttpRow>,
    /// Skipped parts and other remarks.
    pub notes: Vec<String>,
}
