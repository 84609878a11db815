//! Leak detection: a connection held past the threshold is reported once, as
//! a `tracing` WARN carrying the backtrace of the code that took it; a short
//! hold never is; the late return is logged at INFO; `leak_count` counts
//! reports. Logs are captured into a buffer by a `tracing_subscriber` fmt
//! layer installed for the test's thread (tests run on a current-thread
//! runtime, so the housekeeper logs there too).

use std::time::Duration;

use crate::support::logs::capture;
use crate::support::{config, Mock};
use pool_core::{Pool, PooledConnection};

const REPORT: &str = "connection held past the leak detection threshold";
const RETURNED: &str = "previously reported leaked connection was returned";

fn leaky_pool(mock: &Mock, threshold: Option<Duration>) -> Pool<Mock> {
    Pool::new_lazy(
        mock.clone(),
        config(3)
            .name("leaky")
            .leak_detection_threshold(threshold)
            .housekeeping_period(Duration::from_secs(30))
            .build()
            .unwrap(),
    )
}

/// The application code that takes the connection and forgets to give it
/// back; its name must show in the report.
#[inline(never)]
async fn checkout_in_forgetful_report_handler(pool: &Pool<Mock>) -> PooledConnection<Mock> {
    pool.get().await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_long_hold_is_reported_once_with_the_acquiring_backtrace() {
    let (logs, _guard) = capture();
    let mock = Mock::default();
    let pool = leaky_pool(&mock, Some(Duration::from_millis(100)));
    let conn = checkout_in_forgetful_report_handler(&pool).await;

    tokio::time::sleep(Duration::from_millis(90)).await;
    assert!(logs.records_with(REPORT).is_empty(), "reported too early");
    // Reported at most one tick (min(period, threshold, 1 s)) past the
    // threshold, and only once however long it stays out.
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert_eq!(pool.metrics().leak_count, 1);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let reports = logs.records_with(REPORT);
    assert_eq!(reports.len(), 1, "{}", logs.text());
    let report = &reports[0];
    assert!(report.contains(" WARN "), "{report}");
    assert!(report.contains("leaky"), "no pool name: {report}");
    assert!(report.contains("held_ms="), "no hold time: {report}");
    assert!(
        report.contains("checkout_in_forgetful_report_handler"),
        "the backtrace does not name the acquiring function:\n{report}"
    );
    // Trimmed to the application's frames: the pool's own and the
    // runtime's are left out.
    let frames: Vec<&str> = report
        .lines()
        .filter_map(|l| l.trim_start().split_once(": "))
        .filter(|(n, _)| n.parse::<u32>().is_ok())
        .map(|(_, name)| name)
        .collect();
    assert!(!frames.is_empty(), "no frames: {report}");
    for frame in &frames {
        for machinery in ["pool_core::", "tokio::", "<core::", "std::"] {
            assert!(!frame.starts_with(machinery), "untrimmed: {report}");
        }
    }
    assert!(
        report.contains("a_long_hold_is_reported_once_with_the_acquiring_backtrace"),
        "the caller's caller is missing: {report}"
    );
    assert_eq!(pool.metrics().leak_count, 1);

    assert!(logs.records_with(RETURNED).is_empty());
    drop(conn);
    let returned = logs.records_with(RETURNED);
    assert_eq!(returned.len(), 1, "{}", logs.text());
    assert!(returned[0].contains(" INFO "), "{}", returned[0]);
    assert!(returned[0].contains("leaky"), "{}", returned[0]);

    // The same slot used briefly afterwards is not reported again.
    drop(pool.get().await.unwrap());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(logs.records_with(REPORT).len(), 1);
    assert_eq!(pool.metrics().leak_count, 1);
}

#[tokio::test(start_paused = true)]
async fn a_short_hold_is_never_reported() {
    let (logs, _guard) = capture();
    let mock = Mock::default();
    let pool = leaky_pool(&mock, Some(Duration::from_millis(100)));
    for _ in 0..20 {
        let conn = checkout_in_forgetful_report_handler(&pool).await;
        tokio::time::sleep(Duration::from_millis(60)).await;
        drop(conn);
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(logs.records_with(REPORT).is_empty(), "{}", logs.text());
    assert!(logs.records_with(RETURNED).is_empty(), "{}", logs.text());
    assert_eq!(pool.metrics().leak_count, 0);
}

#[tokio::test(start_paused = true)]
async fn each_leaked_connection_counts_once() {
    let (logs, _guard) = capture();
    let mock = Mock::default();
    let pool = leaky_pool(&mock, Some(Duration::from_millis(100)));
    let a = checkout_in_forgetful_report_handler(&pool).await;
    let b = pool.try_get();
    assert!(b.is_none(), "nothing idle yet");
    let b = checkout_in_forgetful_report_handler(&pool).await;
    drop(b);
    let b = pool.try_get().expect("b came back");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(pool.metrics().leak_count, 2);
    assert_eq!(logs.records_with(REPORT).len(), 2, "{}", logs.text());
    drop((a, b));
    assert_eq!(logs.records_with(RETURNED).len(), 2, "{}", logs.text());
}

#[tokio::test(start_paused = true)]
async fn with_leak_detection_off_nothing_is_reported() {
    let (logs, _guard) = capture();
    let mock = Mock::default();
    let pool = leaky_pool(&mock, None);
    let conn = checkout_in_forgetful_report_handler(&pool).await;
    tokio::time::sleep(Duration::from_secs(600)).await;
    drop(conn);
    assert!(logs.records_with(REPORT).is_empty(), "{}", logs.text());
    assert_eq!(pool.metrics().leak_count, 0);
}

/// A leaked checkout that was not itself sampled (the site's 2nd..63rd on
/// this thread) is reported with its site's latest sampled backtrace, and
/// the report says so.
#[tokio::test(start_paused = true)]
async fn an_unsampled_leak_shows_its_sites_sampled_backtrace() {
    let (logs, _guard) = capture();
    let mock = Mock::default();
    let pool = leaky_pool(&mock, Some(Duration::from_millis(100)));
    // The first checkout at this site on this thread is sampled; the
    // next ones are not (one in 256 is).
    for _ in 0..3 {
        drop(checkout_in_forgetful_report_handler(&pool).await);
    }
    let conn = checkout_in_forgetful_report_handler(&pool).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reports = logs.records_with(REPORT);
    assert_eq!(reports.len(), 1, "{}", logs.text());
    let report = &reports[0];
    assert!(
        report.contains("a sampled checkout from the same site was acquired at:"),
        "not marked as the site's sampled backtrace:\n{report}"
    );
    assert!(
        report.contains("checkout_in_forgetful_report_handler"),
        "the sampled backtrace does not name the acquiring function:\n{report}"
    );
    drop(conn);
    assert_eq!(logs.records_with(RETURNED).len(), 1, "{}", logs.text());
}
