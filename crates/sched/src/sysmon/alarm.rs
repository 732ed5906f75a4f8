//! The clock sysmon sleeps on: one deadline that any thread may set, reached by a blocking
//! [`Alarm::wait`].
//!
//! On Linux it is a blocking `timerfd`: setting it is one syscall and wakes nobody, so the Ms
//! that take a P while sysmon is parked can keep pushing sysmon's look later without a
//! context switch each time (`sysmon.rs`, "Parking"). Elsewhere a condition variable stands
//! in, and every [`Alarm::set`] wakes sysmon (correct, only costlier).

use std::io;
use std::time::Duration;

#[cfg(target_os = "linux")]
pub(super) use timerfd::Alarm;

#[cfg(not(target_os = "linux"))]
pub(super) use condvar::Alarm;

#[cfg(target_os = "linux")]
mod timerfd {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    /// A blocking, one-shot, monotonic `timerfd`.
    pub(crate) struct Alarm(OwnedFd);

    impl Alarm {
        pub(crate) fn new() -> io::Result<Alarm> {
            // SAFETY: plain syscall; the result is checked before use.
            let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a fresh descriptor that nothing else owns.
            Ok(Alarm(unsafe { OwnedFd::from_raw_fd(fd) }))
        }

        /// Rings the alarm `after` from now (at once for zero), replacing any earlier setting.
        pub(crate) fn set(&self, after: Duration) {
            // A zero `it_value` would disarm the timer: one nanosecond rings it at once.
            let after = after.max(Duration::from_nanos(1));
            let spec = libc::itimerspec {
                it_interval: libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: libc::timespec {
                    tv_sec: after.as_secs() as libc::time_t,
                    tv_nsec: after.subsec_nanos() as _,
                },
            };
            // SAFETY: a valid fd and a fully initialised itimerspec; no old value asked for.
            let rc = unsafe {
                libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut())
            };
            debug_assert_eq!(rc, 0, "gort: timerfd_settime failed");
        }

        /// Blocks until the alarm rings (at once if it rang since the last wait).
        pub(crate) fn wait(&self) {
            let mut expirations = 0u64;
            loop {
                // SAFETY: reads 8 bytes into a live, aligned u64 owned by this frame.
                let n = unsafe {
                    libc::read(
                        self.0.as_raw_fd(),
                        (&mut expirations as *mut u64).cast(),
                        std::mem::size_of::<u64>(),
                    )
                };
                if n >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    return;
                }
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod condvar {
    use super::*;
    use parking_lot::{Condvar, Mutex};
    use std::time::Instant;

    /// The alarm's deadline (`None`: not set) under a lock, and a condition variable.
    pub(crate) struct Alarm {
        at: Mutex<Option<Instant>>,
        cv: Condvar,
    }

    impl Alarm {
        pub(crate) fn new() -> io::Result<Alarm> {
            Ok(Alarm {
                at: Mutex::new(None),
                cv: Condvar::new(),
            })
        }

        /// Rings the alarm `after` from now, replacing any earlier setting.
        pub(crate) fn set(&self, after: Duration) {
            *self.at.lock() = Some(Instant::now() + after);
            self.cv.notify_one();
        }

        /// Blocks until the alarm rings.
        pub(crate) fn wait(&self) {
            let mut at = self.at.lock();
            loop {
                match *at {
                    Some(t) if Instant::now() >= t => {
                        *at = None;
                        return;
                    }
                    Some(t) => {
                        self.cv.wait_until(&mut at, t);
                    }
                    None => self.cv.wait(&mut at),
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn rings_after_its_delay_and_a_later_setting_replaces_an_earlier_one() {
        let alarm = Alarm::new().unwrap();
        let t0 = Instant::now();
        alarm.set(Duration::from_millis(5));
        alarm.set(Duration::from_millis(30));
        alarm.wait();
        assert!(t0.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_zero_delay_rings_at_once_and_a_ring_before_the_wait_is_kept() {
        let alarm = Alarm::new().unwrap();
        alarm.set(Duration::ZERO);
        std::thread::sleep(Duration::from_millis(2));
        let t0 = Instant::now();
        alarm.wait();
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}
