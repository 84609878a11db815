//! Every pool wrapped as a [`Contestant`](crate::Contestant): the no-op ones
//! over [`FakeManager`](crate::fake::FakeManager), and the PostgreSQL ones
//! over tokio-postgres and sqlx. The peers, and sqlx (ours over a local sqlx
//! manager beside sqlx's own pool), build with the `peers` feature only.

pub mod floor;
pub mod noop;
#[cfg(feature = "peers")]
pub mod peers;
pub mod pg;
#[cfg(feature = "peers")]
pub mod sqlx;

/// Runs `$body` with `$pool` bound to a freshly built no-op pool of `$kind`
/// (built from the [`FakeSpec`](crate::fake::FakeSpec) `$spec`).
#[macro_export]
macro_rules! with_noop_pool {
    ($kind:expr, $spec:expr, |$pool:ident| $body:expr) => {{
        use $crate::pools::noop;
        match $kind {
            $crate::Kind::Ours => {
                let $pool = noop::Ours::build($spec).await;
                $body
            }
            #[cfg(feature = "peers")]
            $crate::Kind::Deadpool => {
                let $pool = $crate::pools::peers::Deadpool::build($spec).await;
                $body
            }
            #[cfg(feature = "peers")]
            $crate::Kind::Bb8 => {
                let $pool = $crate::pools::peers::Bb8::build($spec).await;
                $body
            }
            #[cfg(feature = "peers")]
            $crate::Kind::Qp => {
                let $pool = $crate::pools::peers::Qp::build($spec).await;
                $body
            }
            #[cfg(feature = "peers")]
            $crate::Kind::Mobc => {
                let $pool = $crate::pools::peers::Mobc::build($spec).await;
                $body
            }
            #[cfg(feature = "peers")]
            $crate::Kind::Fastpool => {
                let $pool = $crate::pools::peers::Fastpool::build($spec).await;
                $body
            }
            $crate::Kind::Floor => {
                let $pool = noop::Floor::build($spec).await;
                $body
            }
            $crate::Kind::OursAfterConnect => {
                let $pool = noop::Ours::build_after_connect($spec).await;
                $body
            }
        }
    }};
}
