//! Lingering close: a connection the server closes while the client is still sending
//! (a 413 for a body over the limit, refused before it is read) is drained for a
//! bounded while instead of closed at once.
//!
//! Closing a socket with unread data in its receive buffer makes the kernel send a
//! reset, and a reset makes the client's kernel throw away what it had received but
//! not yet read — often the very `413` that explains the refusal; the client sees
//! "connection reset" instead. So when hyper lets go of a connection, the write side is
//! shut down (the response is complete: FIN after its last byte) and what the client
//! still sends is read and discarded, up to [`DRAIN_BYTES`] or [`DRAIN_TIME`],
//! whichever comes first. Nothing read here is parsed or kept, and the bounds keep the
//! work one client can cause this way small.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// At most this much is read from a connection being closed.
pub const DRAIN_BYTES: u64 = 8 << 20;
/// For at most this long.
pub const DRAIN_TIME: Duration = Duration::from_secs(2);

/// A TCP stream drained on drop, with what must live until the drain ends (the
/// connection's place in the server's count of open connections).
pub struct Lingering(Option<TcpStream>, Option<Box<dyn Send>>);

impl Lingering {
    /// `stream`, keeping `hold` until it is closed and drained.
    pub fn holding(stream: TcpStream, hold: Box<dyn Send>) -> Lingering {
        Lingering(Some(stream), Some(hold))
    }

    fn stream(&mut self) -> Pin<&mut TcpStream> {
        Pin::new(self.0.as_mut().expect("the stream is only taken on drop"))
    }
}

impl AsyncRead for Lingering {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.stream().poll_read(cx, buf)
    }
}

impl AsyncWrite for Lingering {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.stream().poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream().poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.stream().poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.stream().poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.as_ref().is_some_and(|s| s.is_write_vectored())
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        let hold = self.1.take();
        let Some(mut stream) = self.0.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let _hold = hold;
            use tokio::io::AsyncReadExt;
            use tokio::io::AsyncWriteExt;
            let _ = stream.shutdown().await;
            let mut sink = [0u8; 16 << 10];
            let mut left = DRAIN_BYTES;
            let _ = tokio::time::timeout(DRAIN_TIME, async {
                while left > 0 {
                    match stream.read(&mut sink).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => left = left.saturating_sub(n as u64),
                    }
                }
            })
            .await;
        });
    }
}
