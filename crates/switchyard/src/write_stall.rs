//! A client connection whose writes make no progress for too long is
//! closed (contract §8: a client that reads nothing is cut off). Without
//! this a client that stops reading parks its connection — and hyper's
//! write — forever once the socket buffers fill, since nothing else on the
//! connection runs while a write waits.
//!
//! One bool per write on the path that makes progress; a timer is armed only
//! when a write has to wait.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `io`, whose writes fail with `TimedOut` once one has waited `limit`.
pub struct WriteStall<T> {
    io: T,
    limit: Duration,
    /// Allocated on the first wait, re-armed on later ones.
    timer: Option<Pin<Box<Sleep>>>,
    /// A write is waiting and the timer runs for it.
    waiting: bool,
}

impl<T> WriteStall<T> {
    pub fn new(io: T, limit: Duration) -> Self {
        WriteStall {
            io,
            limit,
            timer: None,
            waiting: false,
        }
    }

    /// What a write that did not progress now means: wait more, or (past
    /// the limit) give up.
    fn waited<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        if !self.waiting {
            self.waiting = true;
            let by = Instant::now() + self.limit;
            match &mut self.timer {
                Some(t) => t.as_mut().reset(by),
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(by))),
            }
        }
        let Some(timer) = &mut self.timer else {
            return Poll::Pending;
        };
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing for too long",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<R>(
        &mut self,
        r: Poll<io::Result<R>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<R>> {
        match r {
            Poll::Pending => self.waited(cx),
            ready => {
                self.waiting = false;
                ready
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteStall<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteStall<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, buf);
        self.progressed(r, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.progressed(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.io).poll_flush(cx);
        self.progressed(r, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A reader that never reads: the writer fails after the limit, not
    /// before, and a reader that reads keeps the writer going.
    #[tokio::test(start_paused = true)]
    async fn a_write_that_waits_past_the_limit_fails() {
        let (a, b) = tokio::io::duplex(64);
        let mut w = WriteStall::new(a, Duration::from_secs(5));
        let started = Instant::now();
        let chunk = [7u8; 32];
        let err = loop {
            if let Err(e) = w.write_all(&chunk).await {
                break e;
            }
        };
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
        drop(b);
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_but_steady_reader_is_not_cut() {
        use tokio::io::AsyncReadExt;
        let (a, mut b) = tokio::io::duplex(64);
        let mut w = WriteStall::new(a, Duration::from_secs(5));
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 16];
            let mut got = 0;
            while got < 4096 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                got += b.read(&mut buf).await.unwrap();
            }
        });
        for _ in 0..128 {
            w.write_all(&[1u8; 32]).await.expect("never stalled 5 s");
        }
        reader.await.unwrap();
    }
}
