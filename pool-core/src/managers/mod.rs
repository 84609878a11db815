//! Connection managers for database drivers, each behind its cargo feature.

// Unconditional: the sqlx managers are generic over the driver and hold an
// optional budget whatever the driver; only PostgreSQL's can set one.
pub mod fleet;
#[cfg(any(feature = "tokio-postgres", feature = "sqlx-postgres"))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(feature = "tokio-postgres", feature = "sqlx-postgres")))
)]
pub mod hosts;
pub mod pooler;
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx08-postgres",
    feature = "tokio-postgres"
))]
pub(crate) mod relay;
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx08-postgres",
    feature = "tokio-postgres"
))]
#[doc(hidden)]
pub use relay::open_relays;
// The look at statements sent as text behind a transaction-mode pooler:
// the pooled tokio-postgres client's and the relay's. Only the former
// follows transactions.
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx08-postgres",
    feature = "tokio-postgres"
))]
#[cfg_attr(not(feature = "tokio-postgres"), allow(dead_code))]
mod session;
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite"
))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(
        feature = "sqlx-postgres",
        feature = "sqlx-mysql",
        feature = "sqlx-sqlite"
    )))
)]
pub mod sqlx;
#[cfg(any(
    feature = "sqlx08-postgres",
    feature = "sqlx08-mysql",
    feature = "sqlx08-sqlite"
))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(
        feature = "sqlx08-postgres",
        feature = "sqlx08-mysql",
        feature = "sqlx08-sqlite"
    )))
)]
pub mod sqlx08;
#[cfg(feature = "tokio-postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-postgres")))]
pub mod tokio_postgres;

/// Whether a SQLSTATE from a refused connect says that trying again at
/// once will not help: class 28 (invalid authorization: wrong password,
/// unknown role), `3D000` (unknown database), `42501` (no privilege to
/// connect), and MySQL's `42000` (access denied to, or no such, database).
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite",
    feature = "sqlx08-postgres",
    feature = "sqlx08-mysql",
    feature = "sqlx08-sqlite",
    feature = "tokio-postgres"
))]
pub(crate) fn is_permanent_sqlstate(code: &str) -> bool {
    code.starts_with("28") || matches!(code, "3D000" | "42501" | "42000")
}

#[cfg(all(test, feature = "tokio-postgres"))]
mod tests {
    #[test]
    fn refused_logins_and_unknown_databases_are_permanent() {
        for code in ["28000", "28P01", "3D000", "42501", "42000"] {
            assert!(super::is_permanent_sqlstate(code), "{code}");
        }
        for code in ["57P03", "53300", "08006", "57P01", "40001"] {
            assert!(!super::is_permanent_sqlstate(code), "{code}");
        }
    }
}
