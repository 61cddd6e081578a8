//! The timing loop the cost examples share (`#[path]`-included: a file
//! under `examples/support/` is not an example of its own).

use std::time::{Duration, Instant};

/// Nanoseconds per call of `f`: the best of `rounds` means over enough calls
/// to last ~20 ms each (the best, so that a busy machine's interruptions
/// drop out).
pub fn time(rounds: usize, mut f: impl FnMut()) -> f64 {
    let mut calls = 1u32;
    loop {
        let t = Instant::now();
        for _ in 0..calls {
            f();
        }
        if t.elapsed() >= Duration::from_millis(20) || calls >= 1 << 24 {
            break;
        }
        calls *= 2;
    }
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                f();
            }
            t.elapsed().as_nanos() as f64 / f64::from(calls)
        })
        .fold(f64::INFINITY, f64::min)
}
