//! The host pool over [`SqlxManager<PgConnection>`]: one set of connect
//! options, a host list, and roles asked with one query per connect (sqlx
//! does not expose the startup parameter statuses).

use std::sync::Arc;

use ::sqlx::postgres::{PgConnectOptions, PgConnection};
use ::sqlx::{AssertSqlSafe, Error, Executor, Row};
use pool_api::async_trait;

use crate::SqlxManager;
use pool_postgres::hosts::driver::{self, role_from_text, Backend, ROLE_SQL};
use pool_postgres::hosts::{HostBackend, HostConfigError, HostPoolBuilder, ServerRole};

#[async_trait]
impl Backend for SqlxManager<PgConnection> {
    async fn startup_role(&self, conn: &mut PgConnection) -> Result<ServerRole, Error> {
        self.current_role(conn).await
    }

    async fn current_role(&self, conn: &mut PgConnection) -> Result<ServerRole, Error> {
        // No parameters: sqlx sends it as a simple query (one round trip,
        // nothing prepared or cached).
        let row = conn.fetch_one(AssertSqlSafe(ROLE_SQL)).await?;
        let in_recovery: Option<String> = row.try_get(0)?;
        let read_only: Option<String> = row.try_get(1)?;
        Ok(role_from_text(in_recovery.as_deref(), read_only.as_deref()))
    }
}

impl HostBackend for SqlxManager<PgConnection> {}

/// A builder over `hosts` (`(host, port)` pairs, in the order to try
/// them), each connected with `options` pointed at that host:
/// `SqlxManager::new(options.host(host).port(port))`.
///
/// sqlx's connections are not watched for read-only errors (`25006`):
/// a host that turns read-only in place is seen by the next role check
/// (every [`recheck_interval`](HostPoolBuilder::recheck_interval), or a
/// new connection's), and a host that stops is seen at the next
/// connect.
///
/// ```
/// use sqlx::postgres::PgConnectOptions;
///
/// let options = PgConnectOptions::new().username("app").database("shop");
/// let builder = pool_sqlx::hosts::builder(options, [("db1", 5432), ("db2", 5432)]);
/// ```
pub fn builder<H, I>(
    options: PgConnectOptions,
    hosts: I,
) -> HostPoolBuilder<SqlxManager<PgConnection>>
where
    I: IntoIterator<Item = (H, u16)>,
    H: Into<String>,
{
    let managers: Vec<_> = hosts
        .into_iter()
        .map(|(host, port)| {
            let host = host.into();
            let name: Arc<str> = Arc::from(format!("{host}:{port}"));
            let one = options.clone().host(&host).port(port);
            (name, SqlxManager::new(one))
        })
        .collect();
    let managers = if managers.is_empty() {
        Err(HostConfigError::NoHost)
    } else {
        Ok(managers)
    };
    driver::builder(managers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pool_postgres::hosts::HostPoolError;

    #[tokio::test]
    async fn an_empty_host_list_is_refused() {
        let none: [(&str, u16); 0] = [];
        let err = builder(PgConnectOptions::new(), none)
            .build()
            .await
            .unwrap_err();
        assert!(
            matches!(err, HostPoolError::Config(HostConfigError::NoHost)),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn hosts_are_named_host_colon_port() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let options = PgConnectOptions::new().username("x");
        let err = builder(options, [("127.0.0.1", port)])
            .build()
            .await
            .unwrap_err();
        let HostPoolError::Unreachable { errors } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(&*errors[0].0, format!("127.0.0.1:{port}"));
    }
}
