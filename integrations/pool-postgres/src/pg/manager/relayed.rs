//! The connect through a statement relay, for the transaction-pooler mode.

use std::sync::Arc;

use tokio_postgres::config::Host;
use tokio_postgres::Client;
use tokio_postgres::Config;

use crate::pg::client::ReportedRole;
use crate::pg::driver::drive;
use crate::pg::error::PgError;
use crate::pg::timeout::Canceller;
use crate::relay::{Keepalive, Relay, Upstream};

/// Where `config` points, in order: each host (or `hostaddr`) with its port.
fn upstreams(config: &Config) -> Vec<Upstream> {
    let hosts = config.get_hosts();
    let addrs = config.get_hostaddrs();
    let ports = config.get_ports();
    (0..hosts.len().max(addrs.len()))
        .filter_map(|i| {
            let port = ports
                .get(i)
                .or_else(|| ports.first())
                .copied()
                .unwrap_or(5432);
            if let Some(addr) = addrs.get(i) {
                return Some(Upstream::Tcp(addr.to_string(), port));
            }
            match hosts.get(i)? {
                Host::Tcp(host) => Some(Upstream::Tcp(host.clone(), port)),
                Host::Unix(dir) => Some(Upstream::Unix(dir.join(format!(".s.PGSQL.{port}")))),
            }
        })
        .collect()
}

/// Opens a connection through a statement relay: to the first of the
/// config's hosts that accepts one, each within `connect_timeout`, with the
/// config's TCP keepalive on the relay's socket. Its cancel requests go
/// straight to that host.
pub(super) async fn relayed_connect(
    config: &Config,
) -> Result<(Client, tokio::task::JoinHandle<()>, Canceller, ReportedRole), PgError> {
    let keepalive = config.get_keepalives().then(|| Keepalive {
        idle: config.get_keepalives_idle(),
        interval: config.get_keepalives_interval(),
        retries: config.get_keepalives_retries(),
    });
    let mut last = None;
    for upstream in upstreams(config) {
        let opened = async {
            let stream = Relay::rewriting(&upstream, keepalive)
                .await
                .map_err(PgError::Relay)?;
            Ok::<_, PgError>(config.connect_raw(stream, tokio_postgres::NoTls).await?)
        };
        let opened = match config.get_connect_timeout() {
            Some(limit) => match tokio::time::timeout(*limit, opened).await {
                Ok(opened) => opened,
                Err(_) => Err(PgError::Relay(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("connect to {upstream:?} timed out after {limit:?}"),
                ))),
            },
            None => opened.await,
        };
        match opened {
            Ok((client, connection)) => {
                let reported = ReportedRole::from_params(
                    connection.parameter("in_hot_standby"),
                    connection.parameter("default_transaction_read_only"),
                );
                let driver = tokio::spawn(drive(connection));
                let canceller: Canceller = Arc::new(move |token| {
                    let upstream = upstream.clone();
                    Box::pin(async move {
                        use crate::relay::ServerStream;
                        let sent = match upstream.connect().await {
                            Ok(ServerStream::Tcp(s)) => {
                                token.cancel_query_raw(s, tokio_postgres::NoTls).await
                            }
                            Ok(ServerStream::Unix(s)) => {
                                token.cancel_query_raw(s, tokio_postgres::NoTls).await
                            }
                            Err(error) => {
                                tracing::warn!(%error, "could not reach the pooler to cancel a query");
                                return Err(None);
                            }
                        };
                        sent.map_err(Some)
                    })
                });
                return Ok((client, driver, canceller, reported));
            }
            // A refused login is the server's answer: no other host is
            // tried, as the driver itself does.
            Err(PgError::Db(e)) if e.as_db_error().is_some() => return Err(PgError::Db(e)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        PgError::Relay(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the config names no host",
        ))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(s: &str) -> Config {
        s.parse().expect("a valid connection string")
    }

    #[test]
    fn upstreams_pair_each_host_with_its_port() {
        let c = config("host=db1,db2 port=5433,5434 user=u");
        let found: Vec<String> = upstreams(&c)
            .into_iter()
            .map(|u| match u {
                Upstream::Tcp(host, port) => format!("{host}:{port}"),
                Upstream::Unix(path) => path.display().to_string(),
            })
            .collect();
        assert_eq!(found, ["db1:5433", "db2:5434"]);
        // One port for every host.
        let one = config("host=db1,db2 port=6000 user=u");
        assert_eq!(upstreams(&one).len(), 2);
        assert!(matches!(&upstreams(&one)[1], Upstream::Tcp(h, 6000) if h == "db2"));
    }
}
