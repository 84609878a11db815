//! Connection managers for database drivers, each behind its cargo feature.

pub(crate) mod pooler;
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite"
))]
pub mod sqlx;
#[cfg(any(
    feature = "sqlx08-postgres",
    feature = "sqlx08-mysql",
    feature = "sqlx08-sqlite"
))]
pub mod sqlx08;
#[cfg(feature = "tokio-postgres")]
pub mod tokio_postgres;
