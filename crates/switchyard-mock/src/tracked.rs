//! Response bodies that count being dropped before their end: a client that
//! went away mid-answer (for a gateway, one that stopped the upstream call).

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body as HttpBody, Frame, SizeHint};

use crate::faults::Body;

/// `body`, counting into `abandoned` if it is dropped before its end.
pub fn tracked(body: Body, abandoned: Arc<AtomicUsize>) -> Body {
    Tracked {
        inner: body,
        ended: false,
        abandoned,
    }
    .boxed()
}

struct Tracked {
    inner: Body,
    ended: bool,
    abandoned: Arc<AtomicUsize>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        // An error is the mock's own fault injection (a cut), not the
        // client leaving: it ends the body too.
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if !self.ended && !self.inner.is_end_stream() {
            self.abandoned.fetch_add(1, Ordering::Relaxed);
        }
    }
}
