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

/// Persistence off: a test's Redis keeps nothing on disk.
const NO_DISK: [&str; 4] = ["--save", "", "--appendonly", "no"];

impl Redis {
    pub fn start() -> Redis {
        Self::start_on(super::free_port())
    }

    /// On a given port (a restart where the clients expect it).
    pub fn start_on(port: u16) -> Redis {
        let port_s = port.to_string();
        Self::run(
            port,
            &[
                "--port",
                &port_s,
                "--bind",
                "127.0.0.1",
                NO_DISK[0],
                NO_DISK[1],
                NO_DISK[2],
                NO_DISK[3],
            ],
            tempfile::tempdir().unwrap(),
        )
    }

    /// `redis-server` with `args` (and `--dir dir`), waited for on `port`.
    fn run<S: AsRef<std::ffi::OsStr>>(port: u16, args: &[S], dir: tempfile::TempDir) -> Redis {
        let bin = super::apt::binary(&["redis-server"], &["/usr/bin"], "redis-server");
        let child = Command::new(&bin)
            .args(args)
            .args(["--daemonize", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        Self::wait(child, port, dir)
    }

    /// Until it listens on `port`.
    fn wait(child: Child, port: u16, dir: tempfile::TempDir) -> Redis {
        let mut r = Redis {
            child,
            port,
            _dir: dir,
        };
        // A blocking poll: `Redis::start` is sync (tests call it outside
        // any `.await`), so `eventually` cannot serve here.
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

/// A `redis-server` that speaks TLS only, with a certificate for
/// `localhost` signed by a CA made for it (`openssl`): clients verify it
/// against `ca` (e.g. `SSL_CERT_FILE`).
pub struct TlsRedis {
    pub redis: Redis,
    pub ca: std::path::PathBuf,
    _certs: tempfile::TempDir,
}

impl TlsRedis {
    pub fn start() -> TlsRedis {
        let certs = tempfile::tempdir().unwrap();
        let d = certs.path();
        let openssl = super::apt::binary(&["openssl"], &["/usr/bin"], "openssl");
        let run = |args: &[&str]| {
            let out = Command::new(&openssl)
                .args(args)
                .current_dir(d)
                .output()
                .expect("openssl runs");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        std::fs::write(
            d.join("ext.cnf"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )
        .unwrap();
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=switchyard-test-ca",
        ]);
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "srv.key",
            "-out",
            "srv.csr",
            "-subj",
            "/CN=localhost",
        ]);
        run(&[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "srv.pem",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ]);
        let port = super::free_port();
        let file = |f: &str| d.join(f).display().to_string();
        let args = [
            "--port".to_string(),
            "0".into(),
            "--tls-port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--tls-cert-file".into(),
            file("srv.pem"),
            "--tls-key-file".into(),
            file("srv.key"),
            "--tls-ca-cert-file".into(),
            file("ca.pem"),
            "--tls-auth-clients".into(),
            "no".into(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).chain(NO_DISK).collect();
        let redis = Redis::run(port, &args, tempfile::tempdir().unwrap());
        TlsRedis {
            redis,
            ca: d.join("ca.pem"),
            _certs: certs,
        }
    }

    pub fn url(&self) -> String {
        format!("rediss://localhost:{}/", self.redis.port)
    }
}

/// A master, its replica and one Sentinel watching them as `main`
/// (quick to fail over: the master is down after 1 s of silence).
pub struct SentinelSet {
    pub master: Redis,
    pub replica: Redis,
    sentinel: Redis,
}

impl SentinelSet {
    pub fn start() -> SentinelSet {
        let master = Redis::start();
        let (rport, mport) = (super::free_port().to_string(), master.port.to_string());
        let mut args = vec![
            "--port",
            &rport,
            "--bind",
            "127.0.0.1",
            "--replicaof",
            "127.0.0.1",
            &mport,
        ];
        args.extend(NO_DISK);
        let replica = Redis::run(rport.parse().unwrap(), &args, tempfile::tempdir().unwrap());
        let sport = super::free_port();
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {sport}\nbind 127.0.0.1\nsentinel monitor main 127.0.0.1 {} 1\nsentinel down-after-milliseconds main 1000\nsentinel failover-timeout main 3000\n",
                master.port
            ),
        )
        .unwrap();
        let sentinel = Redis::run(
            sport,
            &[conf.display().to_string(), "--sentinel".into()],
            dir,
        );
        SentinelSet {
            master,
            replica,
            sentinel,
        }
    }

    pub fn url(&self) -> String {
        format!("redis+sentinel://127.0.0.1:{}/main", self.sentinel.port)
    }
}

/// A Redis Cluster of three masters (slots spread by `redis-cli --cluster
/// create`), each a `redis-server` of its own.
pub struct Cluster {
    pub nodes: Vec<Redis>,
}

impl Cluster {
    pub fn start() -> Cluster {
        let cli = super::apt::binary(&["redis-cli"], &["/usr/bin"], "redis-tools");
        let nodes: Vec<Redis> = (0..3)
            .map(|_| {
                let port = super::free_port();
                let dir = tempfile::tempdir().unwrap();
                let (p, conf) = (
                    port.to_string(),
                    dir.path().join("nodes.conf").display().to_string(),
                );
                let mut args = vec![
                    "--port",
                    &p,
                    "--bind",
                    "127.0.0.1",
                    "--cluster-enabled",
                    "yes",
                ];
                args.extend([
                    "--cluster-node-timeout",
                    "2000",
                    "--cluster-config-file",
                    &conf,
                ]);
                args.extend(NO_DISK);
                Redis::run(port, &args, dir)
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new(&cli)
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli runs");
        assert!(
            out.status.success(),
            "cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        // A blocking poll, as in `Redis::wait`: `Cluster::start` is sync.
        for n in &nodes {
            let mut ok = false;
            for _ in 0..200 {
                let info = Command::new(&cli)
                    .args(["-p", &n.port.to_string(), "cluster", "info"])
                    .output()
                    .expect("redis-cli runs");
                if String::from_utf8_lossy(&info.stdout).contains("cluster_state:ok") {
                    ok = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(ok, "the cluster did not come up");
        }
        Cluster { nodes }
    }

    /// `cluster_urls` for the config.
    pub fn urls_yaml(&self) -> String {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("\"{}\"", n.url()))
            .collect();
        format!("[{}]", urls.join(", "))
    }
}

/// A TCP hop that delays every byte by `one_way` in each direction, like a
/// Redis in another zone: in front of `target` (a local port). The delay
/// is a fixed latency, not a throughput cap: bytes read while earlier ones
/// wait are queued with their own deadlines.
pub struct DelayProxy {
    pub port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl DelayProxy {
    /// The hop runs on a thread of its own, so the test's own tasks (a
    /// burst of clients) add no jitter to the latency it stands for.
    pub async fn start(target: u16, one_way: Duration) -> DelayProxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let accept = async {
                    while let Ok((client, _)) = listener.accept().await {
                        let Ok(server) =
                            tokio::net::TcpStream::connect(("127.0.0.1", target)).await
                        else {
                            continue;
                        };
                        // Small writes go at once both ways (Nagle would hold one
                        // behind an unacknowledged other: a 40 ms stall).
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        let (cr, cw) = client.into_split();
                        let (sr, sw) = server.into_split();
                        tokio::spawn(delayed(cr, sw, one_way));
                        tokio::spawn(delayed(sr, cw, one_way));
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
        });
        DelayProxy {
            port,
            stop: Some(stop),
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Copy `from` to `to`, each chunk written `delay` after it was read.
async fn delayed(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((at, bytes)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
    });
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0
            || tx
                .send((tokio::time::Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
        {
            break;
        }
    }
    drop(tx);
    let _ = writer.await;
}
