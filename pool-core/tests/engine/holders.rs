//! Holder sites: every checkout records its caller's source
//! location; `holders()` lists them with how long each connection has been
//! held; a timeout's text names the busiest sites; leak reports name the
//! site, with or without the backtrace; `slow_acquire_threshold` logs one
//! WARN with the wait and the holders; the snapshot counts holders by site.

use std::panic::Location;
use std::time::Duration;

use crate::support;
use crate::support::logs::capture;
use crate::support::{config, Mock};
use pool_core::{Pool, PoolError};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// `file:line` of the caller, to compare with a recorded site.
#[track_caller]
fn here() -> (&'static str, u32) {
    let l = Location::caller();
    (l.file(), l.line())
}

fn at(l: &Location<'_>) -> (&'static str, u32) {
    // The file names compared are the test's own: `file!()` is 'static.
    assert_eq!(l.file(), file!());
    (file!(), l.line())
}

#[tokio::test(start_paused = true)]
async fn holders_name_this_files_lines_and_how_long_each_is_held() {
    let (_, pool) = support::pool(config(3)).await;
    assert!(pool.holders().is_empty(), "nothing held yet");

    let (a, site_a) = (pool.get().await.unwrap(), here());
    tokio::time::advance(ms(300)).await;
    let (b, site_b) = (pool.get_timeout(ms(50)).await.unwrap(), here());
    tokio::time::advance(ms(100)).await;
    let (c, site_c) = (pool.try_get(), here());
    assert!(c.is_none(), "nothing idle: try_get takes nothing");

    let mut holders = pool.holders();
    holders.sort_by_key(|h| std::cmp::Reverse(h.held_for));
    let seen: Vec<_> = holders
        .iter()
        .map(|h| (at(h.location), h.held_for))
        .collect();
    assert_eq!(seen, [(site_a, ms(400)), (site_b, ms(100))]);
    let _ = site_c;

    // A returned connection is no longer held; try_get records its site.
    drop(a);
    let (c, site_c) = (pool.try_get().expect("one idle"), here());
    let sites: Vec<_> = pool.holders().iter().map(|h| at(h.location)).collect();
    assert_eq!(sites.len(), 2);
    assert!(
        sites.contains(&site_b) && sites.contains(&site_c),
        "{sites:?}"
    );

    // The snapshot counts holders by site.
    let by_site = pool.metrics().holders_by_site;
    assert_eq!(by_site.len(), 2, "{by_site:?}");
    assert!(by_site.iter().all(|(_, n)| *n == 1));
    drop((b, c));
    assert!(pool.holders().is_empty());
    assert!(pool.metrics().holders_by_site.is_empty());
}

/// Takes a connection from one line, to be counted by site; says which.
async fn hold_from_orders(pool: &Pool<Mock>) -> (pool_core::PooledConnection<Mock>, (&str, u32)) {
    (pool.get().await.unwrap(), here())
}

#[tokio::test(start_paused = true)]
async fn a_timeout_names_the_busiest_sites_most_connections_first() {
    let (_, pool) = support::pool(config(4)).await;
    let mut held = Vec::new();
    let mut orders = None;
    for _ in 0..3 {
        let (conn, site) = hold_from_orders(&pool).await;
        held.push(conn);
        orders = Some(site);
    }
    tokio::time::advance(ms(4_900)).await;
    let (report_conn, report_site) = (pool.get().await.unwrap(), here());
    tokio::time::advance(ms(210)).await;

    let by_site = pool.metrics().holders_by_site;
    assert_eq!(by_site.len(), 2, "{by_site:?}");
    assert_eq!(
        (at(by_site[0].0), by_site[0].1),
        (orders.unwrap(), 3),
        "busiest first"
    );
    assert_eq!((at(by_site[1].0), by_site[1].1), (report_site, 1));

    let err = pool.get_timeout(ms(1_000)).await.unwrap_err();
    let PoolError::Timeout { holders, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(holders.sites().len(), 2);
    let (orders, report) = (holders.sites()[0].location, holders.sites()[1].location);
    assert_eq!(at(orders), by_site_line(&by_site, 0));
    assert_eq!(
        err.to_string(),
        format!(
            "timed out after 1s waiting for a connection (4 of 4 open: 0 idle, 4 in use; \
             0 opening; 1 waiting; 3 taken at {orders}, held up to 6.11s; \
             1 at {report}, held up to 1.21s)"
        ),
    );
    drop((held, report_conn));
}

fn by_site_line(by_site: &[(&'static Location<'static>, u32)], i: usize) -> (&'static str, u32) {
    at(by_site[i].0)
}

#[tokio::test(start_paused = true)]
async fn a_timeout_caps_the_sites_it_names() {
    let (_, pool) = support::pool(config(5)).await;
    let _a = pool.get().await.unwrap();
    let _b = pool.get().await.unwrap();
    let _c = pool.get().await.unwrap();
    let _d = pool.get().await.unwrap();
    let _e = pool.get().await.unwrap();
    let err = pool.get_timeout(ms(10)).await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.ends_with("; and 2 more at 2 other sites)"),
        "three sites named, then the rest counted: {text}"
    );
}

fn leak_pool(mock: &Mock, backtrace: bool) -> Pool<Mock> {
    Pool::new_lazy(
        mock.clone(),
        config(2)
            .name("leaky")
            .leak_detection_threshold(ms(500))
            .leak_detection_backtrace(backtrace)
            .build()
            .unwrap(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_leak_report_names_the_site_without_a_backtrace() {
    let (out, _guard) = capture();
    let mock = Mock::default();
    let pool = leak_pool(&mock, false);
    let (leaked, site) = (pool.get().await.unwrap(), here());
    tokio::time::advance(ms(2_000)).await;
    for _ in 0..3 {
        tokio::time::sleep(ms(600)).await;
    }
    let text = out.text();
    let site = format!("taken at {}:{}:", site.0, site.1);
    let reports: Vec<_> = text
        .lines()
        .filter(|l| l.contains("connection held past the leak detection threshold"))
        .collect();
    assert_eq!(reports.len(), 1, "reported once: {text}");
    assert!(reports[0].contains(" WARN "), "{text}");
    assert!(reports[0].contains(&site), "{text}");
    assert!(!text.contains("acquired at:"), "no backtrace: {text}");
    assert_eq!(pool.metrics().leak_count, 1);

    drop(leaked);
    let text = out.text();
    assert!(
        text.contains("previously reported leaked connection was returned"),
        "{text}"
    );
    // The next checkout of the same slot is tracked afresh.
    let again = pool.get().await.unwrap();
    tokio::time::sleep(ms(1_200)).await;
    assert_eq!(pool.metrics().leak_count, 2);
    drop(again);
}

#[tokio::test(start_paused = true)]
async fn a_leak_report_with_the_backtrace_names_the_site_too() {
    let (out, _guard) = capture();
    let mock = Mock::default();
    let pool = leak_pool(&mock, true);
    let (leaked, site) = (pool.get().await.unwrap(), here());
    tokio::time::sleep(ms(1_200)).await;
    let text = out.text();
    let site = format!("taken at {}:{}:", site.0, site.1);
    assert!(text.contains(&site), "{text}");
    assert!(text.contains("acquired at:"), "with the backtrace: {text}");
    assert_eq!(pool.metrics().leak_count, 1);
    drop(leaked);
}

#[tokio::test(start_paused = true)]
async fn a_slow_acquire_logs_one_warn_with_the_wait_and_the_holders() {
    let (out, _guard) = capture();
    let pool = Pool::new(
        Mock::default(),
        config(2)
            .name("slow")
            .slow_acquire_threshold(ms(200))
            .build()
            .unwrap(),
    )
    .await
    .unwrap();
    let (held, _) = (pool.get().await.unwrap(), here());
    let (kept, holder) = (pool.get().await.unwrap(), here());
    let returner = tokio::spawn(async move {
        tokio::time::sleep(ms(300)).await;
        drop(held);
    });
    let (conn, waiter) = (pool.get().await.unwrap(), here());
    returner.await.unwrap();
    let text = out.text();
    let warns: Vec<_> = text
        .lines()
        .filter(|l| l.contains("slow acquire"))
        .collect();
    assert_eq!(warns.len(), 1, "{text}");
    let warn = warns[0];
    assert!(warn.contains(" WARN "), "{warn}");
    assert!(warn.contains("waited 300ms"), "{warn}");
    assert!(
        warn.contains(&format!("at {}:{}:", waiter.0, waiter.1)),
        "the waiting caller: {warn}"
    );
    assert!(
        warn.contains(&format!("1 taken at {}:{}:", holder.0, holder.1)),
        "the connection still held: {warn}"
    );
    drop((conn, kept));

    // A wait under the threshold logs nothing.
    let held = pool.get().await.unwrap();
    let _kept = pool.get().await.unwrap();
    let returner = tokio::spawn(async move {
        tokio::time::sleep(ms(100)).await;
        drop(held);
    });
    drop(pool.get().await.unwrap());
    returner.await.unwrap();
    let warns = out.text().matches("slow acquire").count();
    assert_eq!(warns, 1, "{}", out.text());
}
