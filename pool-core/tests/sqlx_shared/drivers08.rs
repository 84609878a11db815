//! The crates a shared body names as `drivers::sqlx` and
//! `drivers::pool_sqlx`, for sqlx 0.8: each sqlx 0.8 file includes it.

pub use ::sqlx08 as sqlx;
pub use pool_core::managers::sqlx08 as pool_sqlx;
