//! deadpool
