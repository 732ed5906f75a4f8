//! The TCP transport, in the shape of hashicorp/raft's `NetworkTransport`: a listener whose
//! accept loop spawns a reader task per connection (11-byte frames, a read deadline so each
//! sees the context), and on the sending side one cached connection per peer, dialled with a
//! timeout, written with a write deadline, and dropped (to be dialled again) on any error.

use super::{deliver, Letter, Msg, Shared, Stream};
use gort::chan::Sender;
use gort::context::Context;
use gort::net::{TcpListener, TcpStream};
use gort::time::Instant;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// A dial, a read or a write that takes longer fails (a lost message).
const DEADLINE: Duration = Duration::from_millis(100);

/// Accepts connections until the context is done, then waits for their readers to end.
pub async fn serve(
    sh: Arc<Shared>,
    me: usize,
    ln: TcpListener,
    inbox: Sender<Letter>,
    ctx: Context,
) {
    // Dropped with this task (a kill), the set aborts every reader.
    let mut readers = gort::JoinSet::new();
    loop {
        gort::select! {
            _ = ctx.done().recv() => break,
            r = ln.accept() => match r {
                Ok((conn, _)) => {
                    // Reap the readers of closed connections first.
                    while readers.try_join_next().is_some() {}
                    let stream = Stream::new(inbox.clone());
                    readers.spawn(read_frames(sh.clone(), me, conn, stream, ctx.clone()));
                }
                Err(e) => {
                    let what = format!("node {me}: accept: {e}");
                    sh.checks.lock().unwrap().violate(what);
                    break;
                }
            },
        }
    }
    drop(ln);
    while readers.join_next().await.is_some() {}
}

/// Reads frames until the peer closes or fails, or the context is done (seen at the latest one
/// read deadline later). A deadline in the middle of a frame keeps what was read.
async fn read_frames(sh: Arc<Shared>, me: usize, conn: TcpStream, mut inbox: Stream, ctx: Context) {
    let mut buf = [0u8; Msg::LEN];
    let mut filled = 0;
    while ctx.err().is_none() {
        conn.set_read_deadline(Some(Instant::now() + DEADLINE))
            .unwrap();
        match conn.read(&mut buf[filled..]).await {
            Ok(0) => return,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::TimedOut => continue,
            Err(_) => return, // reset by a killed peer
        }
        if filled == Msg::LEN {
            filled = 0;
            match Msg::decode(&buf) {
                Some(m) => deliver(&sh, me, m, &mut inbox),
                None => {
                    let what = format!("node {me}: a malformed frame {buf:?}");
                    sh.checks.lock().unwrap().violate(what);
                    return;
                }
            }
        }
    }
}

/// The sending side: a connection per peer, dialled on first use.
pub struct Dialer {
    conns: Vec<Option<TcpStream>>,
}

impl Dialer {
    pub fn new(n: usize) -> Dialer {
        Dialer {
            conns: (0..n).map(|_| None).collect(),
        }
    }

    /// Sends one frame to `to`; any failure drops the connection and the message.
    pub async fn send(&mut self, to: usize, addr: SocketAddr, frame: &[u8]) {
        if self.conns[to].is_none() {
            let dial = gort::time::timeout(DEADLINE, TcpStream::connect(addr));
            self.conns[to] = match dial.await {
                Ok(Ok(conn)) => Some(conn),
                _ => return, // refused (the peer is down) or timed out
            };
        }
        let conn = self.conns[to].as_ref().unwrap();
        conn.set_write_deadline(Some(Instant::now() + DEADLINE))
            .unwrap();
        if conn.write_all(frame).await.is_err() {
            // A frame may have been cut; the peer's reader then fails or ends with the
            // connection, never mis-frames a later one (a new connection starts clean).
            self.conns[to] = None;
        }
    }
}
