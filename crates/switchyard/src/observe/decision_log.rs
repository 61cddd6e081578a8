//! Where decision-log lines go. Each thread serialises its lines straight
//! into a buffer of its own (a lock only that thread and, once per tick, the
//! writer take: never contended per request, never a global lock); one writer
//! thread swaps the buffers out every tick and writes them to stdout in one
//! go. No allocation, channel hop or copy per line. Should the writer fall
//! behind, a buffer stops growing at `MAX_PENDING` and further lines are
//! dropped and counted.

use std::cell::RefCell;
use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

/// How often the writer drains the buffers: a line waits at most this long.
const TICK: Duration = Duration::from_millis(20);
/// Per thread, lines waiting beyond this many bytes are dropped.
const MAX_PENDING: usize = 8 * 1024 * 1024;

#[derive(Clone, Default)]
pub enum DecisionSink {
    #[default]
    Off,
    Stdout(Arc<Batches>),
    /// Tests read the lines back.
    Capture(Arc<Mutex<Vec<String>>>),
}

impl std::fmt::Debug for DecisionSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DecisionSink::Off => "Off",
            DecisionSink::Stdout(_) => "Stdout",
            DecisionSink::Capture(_) => "Capture",
        })
    }
}

/// One thread's pending lines.
type Buffer = Arc<Mutex<Vec<u8>>>;
/// Every thread's buffer of one sink, for the writer to drain.
type Buffers = Arc<Mutex<Vec<Buffer>>>;

/// One stdout sink's per-thread buffers.
pub struct Batches {
    id: usize,
    buffers: Buffers,
    dropped: AtomicU64,
}

thread_local! {
    /// This thread's buffer for each sink it has written to, by sink id.
    static MINE: RefCell<Vec<(usize, Buffer)>> = const { RefCell::new(Vec::new()) };
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

/// A poisoned lock only means a panic mid-line: the bytes are still bytes.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Batches {
    /// Runs `f` on this thread's buffer, registered with the writer on
    /// first use (`f` must not write to a sink itself).
    fn with_buffer<R>(&self, f: impl FnOnce(&Mutex<Vec<u8>>) -> R) -> R {
        MINE.with_borrow_mut(|mine| {
            if let Some((_, b)) = mine.iter().find(|(id, _)| *id == self.id) {
                return f(b);
            }
            let b = Arc::new(Mutex::new(Vec::with_capacity(64 * 1024)));
            lock(&self.buffers).push(b.clone());
            mine.push((self.id, b.clone()));
            f(&b)
        })
    }
}

impl DecisionSink {
    /// Start the writer thread. Join the handle after every sink clone is
    /// dropped (the server has shut down) so no line is lost at exit.
    pub fn stdout() -> (DecisionSink, Option<std::thread::JoinHandle<()>>) {
        let batches = Arc::new(Batches {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            buffers: Arc::default(),
            dropped: AtomicU64::new(0),
        });
        let (buffers, alive) = (batches.buffers.clone(), Arc::downgrade(&batches));
        match std::thread::Builder::new()
            .name("decision-log".into())
            .spawn(move || write_loop(&buffers, &alive))
        {
            Ok(handle) => (DecisionSink::Stdout(batches), Some(handle)),
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

    /// Appends one line, serialised in place by `line` (which must write
    /// UTF-8 without newlines, as serde_json does).
    pub fn write_with<E>(&self, line: impl FnOnce(&mut Vec<u8>) -> Result<(), E>) {
        match self {
            DecisionSink::Off => {}
            DecisionSink::Stdout(batches) => batches.with_buffer(|buffer| {
                let mut buf = lock(buffer);
                if buf.len() >= MAX_PENDING {
                    batches.dropped.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                let start = buf.len();
                match line(&mut buf) {
                    Ok(()) => buf.push(b'\n'),
                    // Never half a line.
                    Err(_) => buf.truncate(start),
                }
            }),
            DecisionSink::Capture(lines) => {
                let mut buf = Vec::new();
                if line(&mut buf).is_ok() {
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    lock(lines).push(text);
                }
            }
        }
    }
}

/// Every tick: swap each thread's buffer for an empty one (holding its lock
/// only for the swap) and write them all. Exits, after a last drain, once
/// every sink is gone.
fn write_loop(buffers: &Mutex<Vec<Buffer>>, alive: &Weak<Batches>) {
    let stdout = std::io::stdout();
    let mut spare: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        std::thread::sleep(TICK);
        let last = alive.strong_count() == 0;
        let all: Vec<_> = lock(buffers).clone();
        let mut out = stdout.lock();
        for b in &all {
            std::mem::swap(&mut *lock(b), &mut spare);
            if !spare.is_empty() {
                let _ = out.write_all(&spare);
                spare.clear();
            }
        }
        let _ = out.flush();
        if last {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unwritten() -> Arc<Batches> {
        Arc::new(Batches {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            buffers: Arc::default(),
            dropped: AtomicU64::new(0),
        })
    }

    #[test]
    fn lines_from_several_threads_all_arrive_whole() {
        // No writer thread: the lines stay in the buffers to be counted.
        let batches = unwritten();
        let sink = DecisionSink::Stdout(batches.clone());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let sink = sink.clone();
                std::thread::spawn(move || {
                    for i in 0..100 {
                        sink.write_with(|b| write!(b, "{{\"t\":{t},\"i\":{i}}}"));
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let buffers = lock(&batches.buffers);
        assert_eq!(buffers.len(), 4, "one buffer per thread");
        let mut lines: Vec<String> = buffers
            .iter()
            .flat_map(|b| {
                let text = String::from_utf8(lock(b).clone()).unwrap();
                text.lines().map(str::to_owned).collect::<Vec<_>>()
            })
            .collect();
        lines.sort();
        lines.dedup();
        assert_eq!(lines.len(), 400);
        assert!(lines
            .iter()
            .all(|l| l.starts_with("{\"t\":") && l.ends_with('}')));
        assert_eq!(batches.dropped.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_failed_line_leaves_nothing_behind() {
        let (sink, lines) = DecisionSink::capture();
        sink.write_with(|b| write!(b, "ok"));
        sink.write_with(|b| {
            b.extend_from_slice(b"half");
            Err(())
        });
        assert_eq!(*lock(&lines), vec!["ok".to_owned()]);

        let sink = DecisionSink::Stdout(unwritten());
        sink.write_with(|b| write!(b, "first"));
        sink.write_with(|b| {
            b.extend_from_slice(b"half");
            Err(())
        });
        let DecisionSink::Stdout(batches) = &sink else {
            unreachable!()
        };
        let buffers = lock(&batches.buffers);
        assert_eq!(&*lock(&buffers[0]), b"first\n");
    }
}
