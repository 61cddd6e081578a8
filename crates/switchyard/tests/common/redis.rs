//! A real `redis-server` for a test: on a free loopback port, persistence
//! off, in its own folder; stopped when dropped. Debian's `redis-server` is
//! installed with apt-get when missing (`common::apt`).

use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Redis {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Redis {
    pub fn start() -> Redis {
        Self::start_on(super::free_port())
    }

    /// On a given port (a restart where the clients expect it).
    pub fn start_on(port: u16) -> Redis {
        let bin = super::apt::binary(&["redis-server"], &["/usr/bin"], "redis-server");
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new(&bin)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        let mut r = Redis {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return r;
            }
            if let Ok(Some(status)) = r.child.try_wait() {
                panic!("redis-server exited at start ({status})");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not listen on {port}");
    }

    /// Kill it at once (as a crash would).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
