//! Where decision-log lines go. Writing to stdout from the request path would
//! take stdout's lock per request; instead lines go through a bounded channel
//! to one writer thread (and are dropped, counted, if it ever falls behind).

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
    /// Start the writer thread.
    pub fn stdout() -> DecisionSink {
        let (tx, rx) = sync_channel::<String>(16_384);
        std::thread::Builder::new()
            .name("decision-log".into())
            .spawn(move || write_loop(rx))
            .map(|_| DecisionSink::Stdout(tx, Arc::new(AtomicU64::new(0))))
            .unwrap_or(DecisionSink::Off)
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

fn write_loop(rx: Receiver<String>) {
    let stdout = std::io::stdout();
    while let Ok(line) = rx.recv() {
        let mut out = stdout.lock();
        let _ = writeln!(out, "{line}");
        // Drain whatever else is queued under the same lock.
        while let Ok(more) = rx.try_recv() {
            let _ = writeln!(out, "{more}");
        }
        let _ = out.flush();
    }
}
