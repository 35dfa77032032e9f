//! An answer's body, holding its share of the server's answer budget until hyper has
//! handed all but its last buffer to the socket: a client that does not read keeps
//! its share, so memory held for slow readers stays within the budget.

use hyper::body::{Body, Bytes, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::OwnedSemaphorePermit;

/// A whole body, given to hyper in one frame.
pub(super) struct AnswerBody {
    data: Option<Bytes>,
    share: Option<OwnedSemaphorePermit>,
}

impl AnswerBody {
    /// A body that holds no share of the budget (small, or shared like the OpenAPI
    /// document).
    pub(super) fn unbudgeted(data: Bytes) -> Self {
        Self::holding(data, None)
    }

    /// A body that holds `share` until it has been written.
    pub(super) fn budgeted(data: Bytes, share: OwnedSemaphorePermit) -> Self {
        Self::holding(data, Some(share))
    }

    fn holding(data: Bytes, share: Option<OwnedSemaphorePermit>) -> Self {
        AnswerBody {
            data: (!data.is_empty()).then_some(data),
            share,
        }
    }
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = Infallible;

    /// The data, then the end. hyper asks for the end only once its write buffer has
    /// room again (once the data has mostly reached the socket), so the share is
    /// released then rather than when the data was merely queued.
    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        match this.data.take() {
            Some(data) => Poll::Ready(Some(Ok(Frame::data(data)))),
            None => {
                this.share = None;
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.share.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn poll(body: &mut AnswerBody) -> Option<Bytes> {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        match Pin::new(body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => frame.into_data().ok(),
            _ => None,
        }
    }

    #[test]
    fn the_share_is_held_until_the_end_is_asked_for() {
        let budget = Arc::new(tokio::sync::Semaphore::new(4));
        let share = budget.clone().try_acquire_many_owned(3).unwrap();
        let mut body = AnswerBody::budgeted(Bytes::from_static(b"abc"), share);
        assert_eq!(body.size_hint().exact(), Some(3));
        assert_eq!(poll(&mut body).as_deref(), Some(&b"abc"[..]));
        assert!(!body.is_end_stream(), "hyper must come back for the end");
        assert_eq!(budget.available_permits(), 1);
        assert_eq!(poll(&mut body), None);
        assert!(body.is_end_stream());
        assert_eq!(budget.available_permits(), 4);
    }

    #[test]
    fn an_empty_unbudgeted_body_is_over_at_once() {
        let body = AnswerBody::unbudgeted(Bytes::new());
        assert!(body.is_end_stream());
        assert_eq!(body.size_hint().exact(), Some(0));
    }
}
