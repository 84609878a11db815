//! The host pool over [`PostgresManager`]: hosts from a
//! `tokio_postgres::Config`, roles from the startup parameter statuses.

use std::sync::Arc;

use pool_api::async_trait;
use tokio_postgres::config::{Host, LoadBalanceHosts as DriverLoadBalance};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Config, Socket};

use super::{
    driver, role_from_text, HostBackend, HostConfigError, HostPool, HostPoolBuilder,
    LoadBalanceHosts, NamedManagers, ServerRole, ROLE_SQL,
};
use crate::pg::{PgClient, PgError, PostgresManager};

/// The TLS connectors a host pool works with: what [`PostgresManager`]
/// needs to connect, named once. Every connector that `PostgresManager`
/// takes (`NoTls`, `postgres-native-tls`, `tokio-postgres-rustls`) has it.
pub trait HostTls:
    MakeTlsConnect<Socket, Stream: Send, TlsConnect: Send + TlsConnect<Socket, Future: Send>>
    + Clone
    + Send
    + Sync
    + 'static
{
}

impl<T> HostTls for T where
    T: MakeTlsConnect<Socket, Stream: Send, TlsConnect: Send + TlsConnect<Socket, Future: Send>>
        + Clone
        + Send
        + Sync
        + 'static
{
}

/// Asks the server `conn` talks to for its role now.
///
/// # Cancel safety
///
/// The connection is marked abandoned until the server answers: dropped at
/// the check's time limit (a server that stopped answering), it is closed
/// without waiting for the answer.
async fn query_role(conn: &PgClient) -> Result<ServerRole, PgError> {
    conn.set_abandoned(true);
    let rows = conn.client().simple_query(ROLE_SQL).await?;
    conn.set_abandoned(false);
    let row = rows.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(row) => Some((row.get(0), row.get(1))),
        _ => None,
    });
    Ok(match row {
        Some((in_recovery, read_only)) => role_from_text(in_recovery, read_only),
        None => role_from_text(None, None),
    })
}

#[async_trait]
impl<Tls: HostTls> driver::Backend for PostgresManager<Tls> {
    async fn startup_role(&self, conn: &mut PgClient) -> Result<ServerRole, PgError> {
        let reported = conn.reported_role();
        if let (Some(in_recovery), Some(read_only)) =
            (reported.in_hot_standby, reported.default_read_only)
        {
            return Ok(ServerRole::from_flags(in_recovery, read_only));
        }
        query_role(conn).await
    }

    async fn current_role(&self, conn: &mut PgClient) -> Result<ServerRole, PgError> {
        query_role(conn).await
    }

    fn saw_server_gone(&self, conn: &PgClient) -> bool {
        conn.saw_server_gone()
    }

    fn is_retired(&self, conn: &PgClient) -> bool {
        conn.is_retired()
    }

    fn retire_all(&self) {
        self.retire_connections();
    }
}

impl<Tls: HostTls> HostBackend for PostgresManager<Tls> {}

impl<Tls: HostTls> HostPool<PostgresManager<Tls>> {
    /// A builder over the hosts `config` lists (`host=a,b,c`, with one port
    /// or one per host, and `hostaddr`s if any, one per host); every other
    /// setting of `config` applies to each host, whose manager is
    /// `PostgresManager::new(config for that host, tls)`. Its
    /// `target_session_attrs` is not used: each checkout names its own
    /// target. Its `load_balance_hosts` is the default order.
    pub fn builder(config: Config, tls: Tls) -> HostPoolBuilder<PostgresManager<Tls>> {
        let load_balance = match config.get_load_balance_hosts() {
            DriverLoadBalance::Random => LoadBalanceHosts::Random,
            _ => LoadBalanceHosts::Disable,
        };
        HostPoolBuilder::over(managers(&config, &tls)).load_balance_hosts(load_balance)
    }
}

/// One manager per host `config` lists, with its `host:port` name.
fn managers<Tls: HostTls>(config: &Config, tls: &Tls) -> NamedManagers<PostgresManager<Tls>> {
    let hosts = config.get_hosts();
    let ports = config.get_ports();
    let addrs = config.get_hostaddrs();
    if hosts.is_empty() {
        return Err(HostConfigError::NoHost);
    }
    if ports.len() > 1 && ports.len() != hosts.len() {
        return Err(HostConfigError::PortCount {
            hosts: hosts.len(),
            ports: ports.len(),
        });
    }
    if !addrs.is_empty() && addrs.len() != hosts.len() {
        return Err(HostConfigError::HostaddrCount {
            hosts: hosts.len(),
            hostaddrs: addrs.len(),
        });
    }
    let port = |i: usize| match ports.len() {
        0 => 5432,
        1 => ports[0],
        _ => ports[i],
    };
    Ok(hosts
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let one = single_host(config, host, addrs.get(i).copied(), port(i));
            (
                Arc::from(label(host, port(i))),
                PostgresManager::new(one, tls.clone()),
            )
        })
        .collect())
}

/// `host:port` for the `host` label and the events.
fn label(host: &Host, port: u16) -> String {
    match host {
        Host::Tcp(name) => format!("{name}:{port}"),
        #[cfg(unix)]
        Host::Unix(path) => format!("{}:{port}", path.display()),
    }
}

/// `base` with its host list replaced by `host` alone; every other setting
/// that `tokio_postgres::Config` exposes is carried over.
fn single_host(
    base: &Config,
    host: &Host,
    hostaddr: Option<std::net::IpAddr>,
    port: u16,
) -> Config {
    let mut c = Config::new();
    match host {
        Host::Tcp(name) => c.host(name),
        #[cfg(unix)]
        Host::Unix(path) => c.host_path(path),
    };
    if let Some(addr) = hostaddr {
        c.hostaddr(addr);
    }
    c.port(port);
    if let Some(user) = base.get_user() {
        c.user(user);
    }
    if let Some(password) = base.get_password() {
        c.password(password);
    }
    if let Some(db) = base.get_dbname() {
        c.dbname(db);
    }
    if let Some(options) = base.get_options() {
        c.options(options);
    }
    if let Some(app) = base.get_application_name() {
        c.application_name(app);
    }
    c.ssl_mode(base.get_ssl_mode())
        .ssl_negotiation(base.get_ssl_negotiation())
        .channel_binding(base.get_channel_binding())
        .keepalives(base.get_keepalives())
        .keepalives_idle(base.get_keepalives_idle());
    if let Some(t) = base.get_connect_timeout() {
        c.connect_timeout(*t);
    }
    if let Some(t) = base.get_tcp_user_timeout() {
        c.tcp_user_timeout(*t);
    }
    if let Some(i) = base.get_keepalives_interval() {
        c.keepalives_interval(i);
    }
    if let Some(r) = base.get_keepalives_retries() {
        c.keepalives_retries(r);
    }
    c
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::HostPoolError;
    use super::*;
    use crate::PoolConfig;

    #[test]
    fn one_host_configs_keep_the_settings_and_drop_the_other_hosts() {
        let base: Config = "host=a,b port=5433,5434 user=app password=pw dbname=shop \
                            application_name=svc connect_timeout=3 keepalives_idle=7"
            .parse()
            .unwrap();
        let one = single_host(&base, &base.get_hosts()[1], None, 5434);
        assert_eq!(one.get_hosts(), [Host::Tcp("b".into())]);
        assert_eq!(one.get_ports(), [5434]);
        assert_eq!(one.get_user(), Some("app"));
        assert_eq!(one.get_password(), Some(&b"pw"[..]));
        assert_eq!(one.get_dbname(), Some("shop"));
        assert_eq!(one.get_application_name(), Some("svc"));
        assert_eq!(one.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(one.get_keepalives_idle(), Duration::from_secs(7));
        assert_eq!(label(&base.get_hosts()[0], 5433), "a:5433");
    }

    async fn config_error(
        builder: HostPoolBuilder<PostgresManager<tokio_postgres::NoTls>>,
    ) -> HostConfigError {
        match builder.build().await {
            Err(HostPoolError::Config(e)) => e,
            other => panic!("{other:?}"),
        }
    }

    fn builder(s: &str) -> HostPoolBuilder<PostgresManager<tokio_postgres::NoTls>> {
        HostPool::builder(s.parse().unwrap(), tokio_postgres::NoTls)
    }

    #[tokio::test]
    async fn bad_host_lists_and_settings_are_refused() {
        assert!(matches!(
            config_error(builder("user=app")).await,
            HostConfigError::NoHost
        ));
        assert!(matches!(
            config_error(builder("host=a,b,c port=1,2")).await,
            HostConfigError::PortCount { hosts: 3, ports: 2 }
        ));
        assert!(matches!(
            config_error(builder("host=a,b hostaddr=127.0.0.1")).await,
            HostConfigError::HostaddrCount {
                hosts: 2,
                hostaddrs: 1
            }
        ));
        assert!(matches!(
            config_error(builder("host=a").recheck_interval(Duration::ZERO)).await,
            HostConfigError::ZeroRecheck
        ));
        let taken = builder("host=a").pool_config(
            PoolConfig::builder()
                .metric_label("host", "mine")
                .build()
                .unwrap(),
        );
        let HostConfigError::Pool(e) = config_error(taken).await else {
            panic!("a taken host label")
        };
        assert_eq!(e.field(), "metric_label");
        let budget = builder("host=a,b").manager(|m| m.fleet_budget("", 4));
        let e = config_error(budget).await;
        assert!(matches!(e, HostConfigError::Manager(_)), "{e:?}");
        assert!(std::error::Error::source(&e).is_some());
    }

    #[tokio::test]
    async fn no_reachable_host_fails_the_build_with_every_error() {
        // Two closed loopback ports.
        let ports: Vec<u16> = (0..2)
            .map(|_| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            })
            .collect();
        let err = builder(&format!(
            "host=127.0.0.1,127.0.0.1 port={},{} user=x connect_timeout=2",
            ports[0], ports[1]
        ))
        .build()
        .await
        .unwrap_err();
        let HostPoolError::Unreachable { errors } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(errors.len(), 2, "{err}");
        assert!(
            err.to_string().contains(&format!("127.0.0.1:{}", ports[1])),
            "{err}"
        );
    }
}
