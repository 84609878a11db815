//! A PgBouncer of the test's own: transaction mode, on a free port of
//! 127.0.0.1, in front of one upstream server under the database name
//! `bounced`, with trust (`auth_type = any`) and its log in its own temp
//! dir. Stopped and the dir removed on drop. Needs the pgbouncer binary
//! (`PGBOUNCER`, else `/usr/sbin/pgbouncer`); run as root, it runs as
//! `postgres`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::cluster;

/// The server PgBouncer forwards to.
#[derive(Debug, Clone, Copy)]
pub struct Upstream<'a> {
    pub host: &'a str,
    pub port: u16,
    pub dbname: &'a str,
    pub user: &'a str,
}

/// A running PgBouncer; see the module docs.
pub struct Bouncer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Bouncer {
    /// Starts one and waits (up to 10 s) until it listens. `settings` are
    /// more lines for its `[pgbouncer]` section (pool sizes, reset query),
    /// each ending in a newline.
    ///
    /// # Panics
    ///
    /// When the binary is missing, the config cannot be written, or it does
    /// not listen within 10 s (the message carries its log).
    pub fn start(upstream: Upstream<'_>, settings: &str) -> Bouncer {
        let bin = std::env::var_os("PGBOUNCER")
            .map_or_else(|| PathBuf::from("/usr/sbin/pgbouncer"), PathBuf::from);
        let bin = cluster::require_binary(&bin, "pgbouncer (apt-get install pgbouncer)");
        let dir = cluster::temp_dir("pgbouncer");
        let port = cluster::free_port();
        let Upstream {
            host,
            port: upstream_port,
            dbname,
            user,
        } = upstream;
        let ini = format!(
            "[databases]\n\
             bounced = host={host} port={upstream_port} dbname={dbname} user={user}\n\
             [pgbouncer]\n\
             listen_addr = 127.0.0.1\n\
             listen_port = {port}\n\
             unix_socket_dir =\n\
             auth_type = any\n\
             pool_mode = transaction\n\
             ignore_startup_parameters = extra_float_digits,options\n\
             logfile = {log}\n\
             pidfile = {pid}\n\
             {settings}",
            log = dir.join("pgbouncer.log").display(),
            pid = dir.join("pgbouncer.pid").display(),
        );
        let ini_path = dir.join("pgbouncer.ini");
        std::fs::File::create(&ini_path)
            .and_then(|mut f| f.write_all(ini.as_bytes()))
            .expect("write pgbouncer.ini");
        let mut command = Command::new(&bin);
        if cluster::is_root() {
            // PgBouncer refuses to run as root; `-u` makes it switch user.
            let owned = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(owned, "chown the PgBouncer directory to postgres");
            command.args(["-u", "postgres"]);
        }
        let child = command
            .arg(&ini_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let bouncer = Bouncer { child, dir, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "PgBouncer did not listen on {port} within 10 s: {}",
                std::fs::read_to_string(bouncer.dir.join("pgbouncer.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        bouncer
    }

    /// The port it listens on, at 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL to the bounced database as `postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/bounced", self.port)
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        if let Err(e) = self.child.kill() {
            eprintln!("stopping PgBouncer: {e}");
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
