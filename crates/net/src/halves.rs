//! The methods every half of a split stream ([`TcpStream`](crate::TcpStream) or
//! [`UnixStream`](crate::UnixStream), any [`Stream`](crate::Stream) `S`) shares, borrowed
//! ([`ReadHalf`](crate::ReadHalf), [`WriteHalf`](crate::WriteHalf)) or owned
//! ([`OwnedReadHalf`](crate::OwnedReadHalf), [`OwnedWriteHalf`](crate::OwnedWriteHalf)):
//! each forwards to the connection of the stream its `stream` field reaches (`&S` or
//! `Arc<S>`), so one definition serves both kinds of half and both kinds of stream.

/// A read half's methods: `read`, `read_exact`, `set_read_deadline`, the addresses, and the
/// crate's `conn()` accessor for the I/O trait implementations.
macro_rules! read_half_methods {
    () => {
        /// As [`TcpStream::read`].
        ///
        /// # Errors
        ///
        /// As [`TcpStream::read`].
        pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
            self.stream.conn().read(buf).await
        }

        /// As [`TcpStream::read_exact`].
        ///
        /// # Errors
        ///
        /// As [`TcpStream::read_exact`].
        pub async fn read_exact(&self, buf: &mut [u8]) -> io::Result<()> {
            self.stream.conn().read_exact(buf).await
        }

        /// As [`TcpStream::set_read_deadline`].
        ///
        /// # Errors
        ///
        /// On a thread of no gort runtime, for a deadline still to come (its timer needs one:
        /// enter the runtime with `Handle::enter`); the deadline is then left as it was.
        /// Clearing it or setting a passed one works from any thread.
        pub fn set_read_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
            self.stream.conn().set_read_deadline(deadline)
        }

        half_common_methods!();
    };
}

/// A write half's methods: `write`, `write_all`, `set_write_deadline`, the addresses, and
/// the `conn()` accessor. `close_write` is each half's own (its example differs).
macro_rules! write_half_methods {
    () => {
        /// As [`TcpStream::write`].
        ///
        /// # Errors
        ///
        /// As [`TcpStream::write`].
        pub async fn write(&self, buf: &[u8]) -> io::Result<usize> {
            self.stream.conn().write(buf).await
        }

        /// As [`TcpStream::write_all`].
        ///
        /// # Errors
        ///
        /// As [`TcpStream::write_all`].
        pub async fn write_all(&self, buf: &[u8]) -> io::Result<()> {
            self.stream.conn().write_all(buf).await
        }

        /// As [`TcpStream::set_write_deadline`].
        ///
        /// # Errors
        ///
        /// On a thread of no gort runtime, for a deadline still to come (its timer needs one:
        /// enter the runtime with `Handle::enter`); the deadline is then left as it was.
        /// Clearing it or setting a passed one works from any thread.
        pub fn set_write_deadline(&self, deadline: Option<Instant>) -> io::Result<()> {
            self.stream.conn().set_write_deadline(deadline)
        }

        half_common_methods!();
    };
}

/// The methods of both directions' halves.
macro_rules! half_common_methods {
    () => {
        /// As [`TcpStream::local_addr`].
        ///
        /// # Errors
        ///
        /// The OS's.
        pub fn local_addr(&self) -> io::Result<S::Addr> {
            self.stream.conn().local_addr()
        }

        /// As [`TcpStream::peer_addr`].
        ///
        /// # Errors
        ///
        /// The OS's.
        pub fn peer_addr(&self) -> io::Result<S::Addr> {
            self.stream.conn().peer_addr()
        }

        /// The stream's connection (for the I/O trait implementations).
        #[cfg(any(feature = "tokio-io", feature = "futures-io"))]
        pub(crate) fn conn(&self) -> &crate::stream::Conn<S::Source> {
            self.stream.conn()
        }
    };
}
