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
