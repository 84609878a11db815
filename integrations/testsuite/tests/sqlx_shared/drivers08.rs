//! The crates a shared body names as `drivers::sqlx` and
//! `drivers::pool_sqlx`, for sqlx 0.8: each sqlx 0.8 file includes it.

pub use ::pool_sqlx::sqlx08 as pool_sqlx;
pub use ::sqlx08 as sqlx;
