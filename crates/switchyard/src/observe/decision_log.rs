//! Where decision-log lines go. Writing to stdout from the request path would
//! take stdout's lock per request; instead lines go through a bounded channel
//! to one writer thread that drains them in batches (and they are dropped,
//! counted, if it ever falls behind).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

#[derive(Clone, Default, Debug)]
pub enum DecisionSink {
    #[default]
    Off,
    Stdout(SyncSender<String>, Arc<AtomicU64>),
    /// Tests read the lines back.
    Capture(Arc<Mutex<Vec<String>>>),
}

impl DecisionSink {
    /// Start the writer thread. Join the handle after every sink clone is
    /// dropped (the server has shut down) so no line is lost at exit.
    pub fn stdout() -> (DecisionSink, Option<std::thread::JoinHandle<()>>) {
        let (tx, rx) = sync_channel::<String>(65_536);
        match std::thread::Builder::new()
            .name("decision-log".into())
            .spawn(move || write_loop(rx))
        {
            Ok(handle) => (
                DecisionSink::Stdout(tx, Arc::new(AtomicU64::new(0))),
                Some(handle),
            ),
            Err(_) => (DecisionSink::Off, None),
        }
    }

    pub fn capture() -> (DecisionSink, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        (DecisionSink::Capture(lines.clone()), lines)
    }

    pub fn is_on(&self) -> bool {
        !matches!(self, DecisionSink::Off)
    }

    pub fn write(&self, line: String) {
        match self {
            DecisionSink::Off => {}
            DecisionSink::Stdout(tx, dropped) => {
                if let Err(TrySendError::Full(_)) = tx.try_send(line) {
                    dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            DecisionSink::Capture(lines) => {
                lines.lock().unwrap_or_else(|e| e.into_inner()).push(line)
            }
        }
    }
}

/// Drain in batches on a short tick rather than blocking on `recv`: a
/// blocked receiver would be woken (a futex syscall) for every single line,
/// which at tens of thousands of requests a second costs more than the
/// logging itself. A line waits at most one tick.
fn write_loop(rx: Receiver<String>) {
    const TICK: std::time::Duration = std::time::Duration::from_millis(20);
    let stdout = std::io::stdout();
    loop {
        std::thread::sleep(TICK);
        let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
        loop {
            match rx.try_recv() {
                Ok(line) => {
                    let _ = out.write_all(line.as_bytes());
                    let _ = out.write_all(b"\n");
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => break,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    let _ = out.flush();
                    return;
                }
            }
        }
        let _ = out.flush();
    }
}
