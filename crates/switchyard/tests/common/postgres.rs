//! A real PostgreSQL server for the tests that need one: its own cluster in
//! a temporary directory (`initdb`, then `pg_ctl` on a free loopback port),
//! run as the unprivileged `postgres` user when the tests run as root, and
//! stopped when dropped. Installs Debian's `postgresql` when the binaries
//! are missing; fails with a clear message when it cannot.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Postgres {
    pub url: String,
    pub port: u16,
    bin: PathBuf,
    data: PathBuf,
    _dir: tempfile::TempDir,
    as_user: Option<&'static str>,
}

fn find_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .collect();
    dirs.sort();
    dirs.reverse();
    dirs.into_iter()
        .chain(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths),
        )
        .find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
}

fn install() {
    eprintln!("PostgreSQL is not installed: installing Debian's postgresql with apt-get");
    let ok = |c: &mut Command| c.status().is_ok_and(|s| s.success());
    let _ = ok(Command::new("apt-get").arg("update").arg("-qq"));
    let _ = ok(Command::new("apt-get")
        .args(["install", "-y", "-qq", "postgresql"])
        .env("DEBIAN_FRONTEND", "noninteractive"));
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

impl Postgres {
    fn run(&self, tool: &str, args: &[&str]) -> Output {
        run_as(self.as_user, &self.bin.join(tool), args)
    }

    pub fn start() -> Postgres {
        let bin = find_bin().or_else(|| {
            install();
            find_bin()
        });
        let Some(bin) = bin else {
            panic!("PostgreSQL's initdb and pg_ctl were not found and could not be installed (apt-get install postgresql)");
        };
        let dir = tempfile::tempdir().expect("temporary directory");
        let as_user = is_root().then_some("postgres");
        if let Some(u) = as_user {
            let ok = Command::new("chown")
                .args(["-R", u])
                .arg(dir.path())
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "cannot give {} to the {u} user", dir.path().display());
        }
        let data = dir.path().join("data");
        let port = super::free_port();
        let mut pg = Postgres {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            port,
            bin,
            data,
            _dir: dir,
            as_user,
        };
        let data = pg.data.display().to_string();
        let out = pg.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        pg.start_server();
        pg.url = format!("postgres://postgres@127.0.0.1:{}/postgres", pg.port);
        pg
    }

    fn start_server(&mut self) {
        let data = self.data.display().to_string();
        let sock = self
            .data
            .parent()
            .unwrap_or(Path::new("/tmp"))
            .display()
            .to_string();
        let opts = format!(
            "-p {} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=40",
            self.port
        );
        let log = format!("{}/server.log", sock);
        let out = self.run(
            "pg_ctl",
            &[
                "-D", &data, "-o", &opts, "-l", &log, "-w", "-t", "60", "start",
            ],
        );
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    /// Stop the server (a store that goes down mid-run).
    pub fn stop(&self) {
        let data = self.data.display().to_string();
        let _ = self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
    }

    /// Start it again on the same port.
    pub fn restart(&mut self) {
        self.start_server();
    }
}

fn run_as(user: Option<&str>, tool: &Path, args: &[&str]) -> Output {
    let mut c = match user {
        Some(u) => {
            let mut c = Command::new("runuser");
            c.args(["-u", u, "--"]).arg(tool);
            c
        }
        None => Command::new(tool),
    };
    c.args(args)
        .current_dir("/")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", tool.display()))
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}
