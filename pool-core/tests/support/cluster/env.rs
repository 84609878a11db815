//! What the server tests need of the machine: the PostgreSQL binaries, a
//! free port, a temporary directory, whether this runs as root, and a
//! client config for a cluster's TCP port.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The path of an executable, checked to exist.
///
/// # Panics
///
/// When it does not exist, naming what to install.
pub fn require_binary(path: &Path, what: &str) -> PathBuf {
    assert!(
        path.is_file(),
        "{} not found: this test needs {what}",
        path.display()
    );
    path.to_path_buf()
}

/// A free TCP port on 127.0.0.1 (free when this returns).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind a loopback port")
        .port()
}

/// A fresh directory under the system temp dir.
pub fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "pc-{tag}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temp dir");
    dir
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The directory of the PostgreSQL server binaries.
///
/// # Panics
///
/// When none is found.
pub fn pg_bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BIN_DIR") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("initdb").is_file())
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    let out = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .unwrap_or_else(|| {
            panic!(
                "PostgreSQL server binaries (initdb, pg_ctl) not found: this test needs them \
                 (install postgresql, or set PG_BIN_DIR)"
            )
        });
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A TCP config for `user` on `dbname` at 127.0.0.1:`port` (the cluster's
/// own port, or a proxy's in front of it).
pub fn tcp_config_at(port: u16, user: &str, dbname: &str) -> tokio_postgres::Config {
    let mut c = tokio_postgres::Config::new();
    c.host("127.0.0.1").port(port).user(user).dbname(dbname);
    c
}
