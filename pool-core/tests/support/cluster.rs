//! Test support: a throw-away PostgreSQL cluster the test owns (start, stop,
//! kill -9, restart), and the environment checks the server tests share
//! (the server binaries, a free port).
//!
//! The cluster lives in a temporary directory on its own loopback port;
//! `initdb` trusts the unix socket (the admin path) and checks passwords
//! with SCRAM over TCP (the path the pools under test use). Run as root,
//! the server runs as the `postgres` user through `runuser`, since
//! PostgreSQL refuses to run as root. Every wait is bounded; `Drop` stops the
//! server and removes the directory.
//!
//! The binaries come from `PG_BIN_DIR`, else the newest
//! `/usr/lib/postgresql/*/bin`, else `pg_config --bindir`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// By path, so that the module resolves the same when this file is included
// on its own (the faults bench does).
#[path = "cluster/env.rs"]
mod env;

pub use env::*;

/// How long starting or stopping the server may take.
const SERVER_WAIT: Duration = Duration::from_secs(30);

/// A PostgreSQL cluster owned by one test.
#[derive(Debug)]
pub struct Cluster {
    dir: PathBuf,
    data: PathBuf,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    /// The cores the server is started on (a `taskset -c` list), or `None`
    /// for wherever the OS puts it.
    cpus: Option<String>,
}

impl Cluster {
    /// `initdb` and start a cluster: superuser `postgres`, trusted over the
    /// unix socket in [`socket_dir`](Self::socket_dir), SCRAM passwords over
    /// TCP on 127.0.0.1:[`port`](Self::port).
    ///
    /// # Panics
    ///
    /// When the binaries are missing or the server does not start in time.
    pub fn start() -> Cluster {
        Cluster::start_on(None)
    }

    /// [`start`](Self::start), with the server (the postmaster, and through
    /// it every process it forks) kept on `cpus`, a `taskset -c` list, here
    /// and at every [`restart`](Self::restart): for measurements that keep
    /// the server off the client's cores.
    ///
    /// # Panics
    ///
    /// As `start` does, and when `taskset` refuses the list.
    pub fn start_on(cpus: Option<&str>) -> Cluster {
        let bin = pg_bin_dir();
        require_binary(&bin.join("initdb"), "PostgreSQL binaries (initdb)");
        let dir = temp_dir("cluster");
        let as_postgres = is_root();
        if as_postgres {
            chown_to_postgres(&dir);
        }
        let cluster = Cluster {
            data: dir.join("data"),
            dir,
            bin,
            port: free_port(),
            as_postgres,
            cpus: cpus.map(str::to_owned),
        };
        let out = cluster
            .command("initdb")
            .args(["-U", "postgres", "-A", "trust", "--auth-host=scram-sha-256"])
            .args(["--no-sync", "-E", "UTF8", "--locale=C", "-D"])
            .arg(&cluster.data)
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.start_server();
        cluster
    }

    /// [`start`](Self::start) on a blocking thread, for async tests
    /// (initdb and `pg_ctl` block).
    ///
    /// # Panics
    ///
    /// As `start` does.
    pub async fn spawn() -> Cluster {
        tokio::task::spawn_blocking(Cluster::start)
            .await
            .expect("start the cluster")
    }

    /// A streaming standby of `primary`: `pg_basebackup -R` from it over
    /// its unix socket (replication is trusted there), then started in its
    /// own temp dir on its own port. It follows `primary` until
    /// [`promote`](Self::promote)d.
    ///
    /// # Panics
    ///
    /// When the base backup fails or the standby does not start in time.
    pub fn standby_of(primary: &Cluster) -> Cluster {
        let dir = temp_dir("standby");
        if primary.as_postgres {
            chown_to_postgres(&dir);
        }
        let standby = Cluster {
            data: dir.join("data"),
            dir,
            bin: primary.bin.clone(),
            port: free_port(),
            as_postgres: primary.as_postgres,
            cpus: primary.cpus.clone(),
        };
        let out = standby
            .command("pg_basebackup")
            .arg("-h")
            .arg(&primary.dir)
            .args(["-p", &primary.port.to_string(), "-U", "postgres"])
            .args(["-X", "stream", "-R", "--no-sync", "-c", "fast", "-D"])
            .arg(&standby.data)
            .output()
            .expect("run pg_basebackup");
        assert!(
            out.status.success(),
            "pg_basebackup failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        standby.start_server();
        standby
    }

    /// Promotes a standby (`pg_ctl promote -w`): returns once it accepts
    /// writes.
    ///
    /// # Panics
    ///
    /// When the promotion fails or takes longer than 30 seconds.
    pub fn promote(&self) {
        let out = self
            .command("pg_ctl")
            .args(["promote", "-w", "-t", "30", "-D"])
            .arg(&self.data)
            .output()
            .expect("run pg_ctl promote");
        assert!(
            out.status.success(),
            "pg_ctl promote failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn command(&self, tool: &str) -> Command {
        self.command_on(tool, None)
    }

    /// `tool`, as the server's user, under `taskset -c cpus` when given:
    /// `[taskset -c LIST] [runuser -u postgres --] PATH`.
    fn command_on(&self, tool: &str, cpus: Option<&str>) -> Command {
        let mut argv: Vec<OsString> = Vec::new();
        if let Some(list) = cpus {
            argv.extend(["taskset", "-c", list].map(OsString::from));
        }
        if self.as_postgres {
            argv.extend(["runuser", "-u", "postgres", "--"].map(OsString::from));
        }
        argv.push(self.bin.join(tool).into_os_string());
        let mut c = Command::new(&argv[0]);
        c.args(&argv[1..]);
        c
    }

    fn start_server(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100",
            self.port,
            self.dir.display()
        );
        let deadline = Instant::now() + SERVER_WAIT;
        loop {
            let out = self
                .command_on("pg_ctl", self.cpus.as_deref())
                .args(["start", "-w", "-t", "30", "-D"])
                .arg(&self.data)
                .arg("-l")
                .arg(self.dir.join("server.log"))
                .args(["-o", &options])
                .stdout(Stdio::null())
                .output()
                .expect("run pg_ctl start");
            if out.status.success() {
                return;
            }
            // After a kill -9 the old backends may hold the shared memory
            // for a moment: try again until the deadline.
            assert!(
                Instant::now() < deadline,
                "the test cluster did not start: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of the unix socket.
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// Connection settings for the superuser over the unix socket (trusted).
    pub fn admin_config(&self) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        c.host_path(&self.dir)
            .port(self.port)
            .user("postgres")
            .dbname("postgres");
        c
    }

    /// Connection settings for `user` over TCP (a password is required).
    pub fn tcp_config(&self, user: &str, dbname: &str) -> tokio_postgres::Config {
        tcp_config_at(self.port, user, dbname)
    }

    /// A superuser client over the unix socket, its connection driven on the
    /// current runtime.
    pub async fn admin(&self) -> tokio_postgres::Client {
        let (client, connection) = self
            .admin_config()
            .connect(tokio_postgres::NoTls)
            .await
            .expect("admin connection to the test cluster");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    /// An [`admin`](Self::admin) client, once it has created the login role
    /// `role` with `password`.
    ///
    /// # Panics
    ///
    /// When the role cannot be created.
    pub async fn admin_with_login(&self, role: &str, password: &str) -> tokio_postgres::Client {
        let admin = self.admin().await;
        admin
            .batch_execute(&format!("CREATE ROLE {role} LOGIN PASSWORD '{password}'"))
            .await
            .expect("create role");
        admin
    }

    /// The postmaster's process id, from `postmaster.pid`.
    pub fn postmaster_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()?
            .lines()
            .next()?
            .trim()
            .parse()
            .ok()
    }

    /// Fast shutdown (open sessions are ended), bounded in time.
    pub fn stop(&self) {
        let _ = self
            .command("pg_ctl")
            .args(["stop", "-m", "fast", "-w", "-t", "30", "-D"])
            .arg(&self.data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// `kill -9` of the postmaster: no shutdown, sockets dropped by the
    /// kernel; its backends exit when they notice.
    pub fn kill9(&self) {
        if let Some(pid) = self.postmaster_pid() {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            let deadline = Instant::now() + SERVER_WAIT;
            while process_alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Starts the server again on the same port and data (after `stop` or
    /// `kill9`).
    pub fn restart(&self) {
        self.start_server();
    }

    /// Sets the superuser's password, for pools that connect over TCP
    /// ([`tcp_config`](Self::tcp_config) with `postgres`).
    pub async fn set_postgres_password(&self, password: &str) {
        self.admin()
            .await
            .batch_execute(&format!("ALTER ROLE postgres PASSWORD '{password}'"))
            .await
            .expect("set the postgres password");
    }

    /// Trusts TCP connections too (no password check), then reloads: for
    /// tests whose figures should not include SCRAM's key stretching on
    /// every connect.
    pub async fn trust_tcp(&self) {
        let hba = self.data.join("pg_hba.conf");
        let text = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
        std::fs::write(&hba, text.replace("scram-sha-256", "trust")).expect("write pg_hba.conf");
        self.admin()
            .await
            .batch_execute("SELECT pg_reload_conf()")
            .await
            .expect("pg_reload_conf");
    }

    /// Makes the whole server read-only (`default_transaction_read_only`
    /// through `ALTER SYSTEM` and a reload), or writable again. Open sessions
    /// pick the new value up before their next statement; a write then fails
    /// with SQLSTATE 25006, as on a demoted primary.
    pub async fn set_read_only(&self, read_only: bool) {
        let value = if read_only { "on" } else { "off" };
        let admin = self.admin().await;
        admin
            .batch_execute(&format!(
                "ALTER SYSTEM SET default_transaction_read_only = {value}"
            ))
            .await
            .expect("ALTER SYSTEM default_transaction_read_only");
        admin
            .batch_execute("SELECT pg_reload_conf()")
            .await
            .expect("pg_reload_conf");
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
        if self.postmaster_pid().is_some_and(process_alive) {
            self.kill9();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn process_alive(pid: u32) -> bool {
    Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn chown_to_postgres(dir: &Path) {
    let ok = Command::new("chown")
        .arg("postgres:")
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "chown {} to the postgres user", dir.display());
}
