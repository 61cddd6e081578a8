//! Where decision-log lines go. Each thread serialises its lines straight
//! into a buffer of its own (a lock only that thread and, once per tick, the
//! writer take: never contended per request, never a global lock); one writer
//! thread swaps the buffers out every tick and writes them to stdout in one
//! go. No allocation, channel hop or copy per line. Should the writer fall
//! behind, a buffer stops growing at `MAX_PENDING` and further lines are
//! dropped and counted. On an idle gateway the writer sleeps until the first
//! new line wakes it, instead of ticking.

use std::cell::RefCell;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::thread::Thread;
use std::time::Duration;

/// Per thread, lines waiting beyond this many bytes are dropped.
const MAX_PENDING: usize = 8 * 1024 * 1024;

/// When the writer drains the buffers.
#[derive(Clone, Copy)]
struct Pacing {
    /// While lines come: a line waits at most this long.
    tick: Duration,
    /// With no line for this long the writer goes idle ...
    quiet_after: Duration,
    /// ... and sleeps until a line wakes it, or this long at most.
    idle_wait: Duration,
}

const PACING: Pacing = Pacing {
    tick: Duration::from_millis(20),
    quiet_after: Duration::from_secs(1),
    idle_wait: Duration::from_secs(60),
};

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
    /// The writer sleeps until woken: the next line must wake it.
    idle: AtomicBool,
    writer: OnceLock<Thread>,
}

impl Batches {
    fn new() -> Self {
        Batches {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            buffers: Arc::default(),
            dropped: AtomicU64::new(0),
            idle: AtomicBool::new(false),
            writer: OnceLock::new(),
        }
    }

    /// Called after a line went into a buffer. SeqCst pairs with the
    /// writer's store-then-recheck in `go_idle`: either it sees the line or
    /// this sees `idle`.
    fn line_added(&self) {
        if self.idle.load(Ordering::SeqCst) && self.idle.swap(false, Ordering::SeqCst) {
            self.wake_writer();
        }
    }

    fn wake_writer(&self) {
        if let Some(t) = self.writer.get() {
            t.unpark();
        }
    }
}

/// The last sink is gone: let the writer drain and exit now.
impl Drop for Batches {
    fn drop(&mut self) {
        self.wake_writer();
    }
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
        Self::writing_to(std::io::stdout(), PACING)
    }

    fn writing_to(
        out: impl Write + Send + 'static,
        pacing: Pacing,
    ) -> (DecisionSink, Option<std::thread::JoinHandle<()>>) {
        let batches = Arc::new(Batches::new());
        let (buffers, alive) = (batches.buffers.clone(), Arc::downgrade(&batches));
        match std::thread::Builder::new()
            .name("decision-log".into())
            .spawn(move || write_loop(out, &buffers, &alive, pacing))
        {
            Ok(handle) => {
                let _ = batches.writer.set(handle.thread().clone());
                (DecisionSink::Stdout(batches), Some(handle))
            }
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
                drop(buf);
                batches.line_added();
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
/// only for the swap) and write them all. After `quiet_after` without a
/// line, sleep until a line (or the last sink's drop) wakes it. Exits,
/// after a last drain, once every sink is gone.
fn write_loop(
    mut out: impl Write,
    buffers: &Mutex<Vec<Buffer>>,
    alive: &Weak<Batches>,
    pacing: Pacing,
) {
    let mut spare: Vec<u8> = Vec::with_capacity(64 * 1024);
    let quiet_ticks = pacing.quiet_after.as_millis() / pacing.tick.as_millis().max(1);
    let (mut quiet, mut idle) = (0, false);
    loop {
        if idle {
            std::thread::park_timeout(pacing.idle_wait);
        } else {
            std::thread::sleep(pacing.tick);
        }
        let last = alive.strong_count() == 0;
        let all: Vec<_> = lock(buffers).clone();
        let mut wrote = false;
        for b in &all {
            std::mem::swap(&mut *lock(b), &mut spare);
            if !spare.is_empty() {
                let _ = out.write_all(&spare);
                spare.clear();
                wrote = true;
            }
        }
        let _ = out.flush();
        if last {
            return;
        }
        quiet = if wrote { 0 } else { quiet + 1 };
        idle = quiet >= quiet_ticks && alive.upgrade().is_some_and(|b| go_idle(&b, &all));
    }
}

/// Mark the writer idle unless a line slipped in meanwhile (SeqCst store,
/// then each buffer looked at under its lock: see `line_added`).
fn go_idle(batches: &Batches, all: &[Buffer]) -> bool {
    batches.idle.store(true, Ordering::SeqCst);
    if all.iter().any(|b| !lock(b).is_empty()) || lock(&batches.buffers).len() != all.len() {
        batches.idle.store(false, Ordering::SeqCst);
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unwritten() -> Arc<Batches> {
        Arc::new(Batches::new())
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

    /// A writer target the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn within(limit: Duration, done: impl Fn() -> bool) -> bool {
        let end = std::time::Instant::now() + limit;
        while std::time::Instant::now() < end {
            if done() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        done()
    }

    /// Idle, the writer sleeps for up to an hour here: every line below
    /// arrives within seconds only because it wakes the writer, and the
    /// writer exits when the last sink goes, not an hour later.
    #[test]
    fn an_idle_writer_wakes_for_each_line_and_exits_with_the_last_sink() {
        let out = Shared::default();
        let pacing = Pacing {
            tick: Duration::from_millis(2),
            quiet_after: Duration::from_millis(20),
            idle_wait: Duration::from_secs(3600),
        };
        let (sink, handle) = DecisionSink::writing_to(out.clone(), pacing);
        let handle = handle.expect("writer thread");
        let DecisionSink::Stdout(batches) = &sink else {
            unreachable!()
        };
        let idle = || batches.idle.load(Ordering::SeqCst);
        let text = || String::from_utf8(lock(&out.0).clone()).unwrap();
        let mut want = String::new();
        for i in 0..10 {
            assert!(
                within(Duration::from_secs(5), idle),
                "round {i}: never went idle"
            );
            sink.write_with(|b| write!(b, "line {i}"));
            want.push_str(&format!("line {i}\n"));
            assert!(
                within(Duration::from_secs(5), || text() == want),
                "round {i}: {:?}",
                text()
            );
        }
        assert!(within(Duration::from_secs(5), idle));
        drop(sink);
        assert!(within(Duration::from_secs(5), || handle.is_finished()));
        handle.join().unwrap();
        assert_eq!(text(), want);
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
