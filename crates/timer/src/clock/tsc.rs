//! The clock's fast path: `CLOCK_MONOTONIC` extrapolated by the CPU's time-stamp counter for
//! at most [`WINDOW_NS`] after a real reading, on the same thread.
//!
//! A vDSO `clock_gettime` costs ~30 ns on the machines gort is measured on, and it is most of
//! a timer reset (Go pays the same read in `nanotime`). `rdtsc` costs ~12 ns. The kernel's own
//! vDSO is this arithmetic (counter, anchor, multiplier) behind a sequence lock; here each
//! thread keeps its own anchor, a real reading and the counter just after it, and extrapolates
//! from it for a short window only, so the rate never needs the kernel's corrections:
//!
//! - The rate is measured once, over at least [`CALIBRATE_AFTER_NS`] (2 ms) of real time,
//!   between two real readings each bracketed by the counter within [`TIGHT_TICKS`] (under
//!   1 µs): an error below 1/2,000 at worst and ~1/30,000 typically. It is then lowered by
//!   [`SLOWER_BY`] (1/512, ~2,000 ppm), more than that error plus NTP's largest slew of
//!   `CLOCK_MONOTONIC` (500 ppm). An extrapolated reading therefore trails the real clock,
//!   by at most ~100 ns at the window's end (50 µs), and never leads it:
//!   [`nanotime`](super::nanotime) keeps its promises of never running ahead of `std`'s
//!   `Instant` and of never decreasing.
//! - It is used only where the kernel itself keeps time by the counter (current clocksource
//!   `tsc`) and the CPU says the counter is invariant (constant rate, running in sleep
//!   states): the kernel has then checked that the CPUs' counters agree.
//! - A counter that reads below the anchor (a thread moved to a CPU whose counter trails) or
//!   past the window falls back to a real reading, which becomes the new anchor.

use super::Nanos;
use std::arch::x86_64::{__cpuid, _mm_lfence, _rdtsc};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Longest extrapolation from a real reading.
const WINDOW_NS: u64 = 50_000;
/// Span of real time over which the counter's rate is measured before it is used.
const CALIBRATE_AFTER_NS: Nanos = 2_000_000;
/// The measured rate is lowered by `1 / SLOWER_BY` (see the module docs).
const SLOWER_BY: u64 = 512;
/// Widest bracket (counter before and after a real reading) accepted as an anchor or for
/// the calibration: a vDSO read takes ~100 ticks; a wider one was preempted or interrupted,
/// and pairing its reading with the counter after it would make extrapolations trail by the
/// delay. (2,000 ticks is under 1 µs at the 2-5 GHz of today's counters.)
const TIGHT_TICKS: u64 = 2_000;
/// Fixed-point shift of the multiplier (nanoseconds per tick, times 2^32).
const SHIFT: u32 = 32;

/// A thread's last real reading, with what it needs to extrapolate from it.
#[derive(Clone, Copy)]
struct Anchor {
    /// The counter just after the reading (0: no anchor yet).
    tsc: u64,
    nanos: Nanos,
    /// Nanoseconds per tick, times 2^SHIFT (already lowered by `SLOWER_BY`).
    mult: u64,
    /// `WINDOW_NS` in ticks.
    window: u64,
}

thread_local! {
    static ANCHOR: Cell<Anchor> = const {
        Cell::new(Anchor { tsc: 0, nanos: 0, mult: 0, window: 0 })
    };
}

/// The process-wide calibration: where it started, and the multiplier once measured.
pub(super) struct Calibration {
    /// Whether the counter may be used at all (see [`usable`]).
    usable: bool,
    base_tsc: u64,
    base_nanos: Nanos,
    /// 0 until measured (or forever, when the measurement was not sane).
    mult: AtomicU64,
}

impl Calibration {
    /// Starts the measurement from the tightest of a few real readings bracketed by the
    /// counter (`read` takes one).
    pub(super) fn start(read: impl Fn() -> Nanos) -> Calibration {
        let mut best: Option<(u64, u64, Nanos)> = None;
        if usable() {
            for _ in 0..16 {
                let (width, tsc, nanos) = bracket(&read);
                if best.map_or(true, |(w, _, _)| width < w) {
                    best = Some((width, tsc, nanos));
                }
                if width <= TIGHT_TICKS {
                    break;
                }
            }
        }
        let base = best.filter(|&(width, _, _)| width <= TIGHT_TICKS);
        Calibration {
            usable: base.is_some(),
            base_tsc: base.map_or(0, |b| b.1),
            base_nanos: base.map_or(0, |b| b.2),
            mult: AtomicU64::new(0),
        }
    }

    /// The multiplier and window, once the counter has run long enough to be measured.
    fn rate(&self, tsc: u64, nanos: Nanos) -> Option<(u64, u64)> {
        if !self.usable {
            return None;
        }
        let mut mult = self.mult.load(Relaxed);
        if mult == 0 {
            let span = nanos - self.base_nanos;
            let ticks = tsc.wrapping_sub(self.base_tsc);
            if span < CALIBRATE_AFTER_NS || ticks == 0 || ticks > i64::MAX as u64 {
                return None;
            }
            let exact = ((span as u128) << SHIFT) / ticks as u128;
            let lowered = exact - exact / SLOWER_BY as u128;
            // A counter between 50 MHz and 20 GHz; anything else is not a TSC to trust.
            if !((1u128 << SHIFT) / 20..=(1u128 << SHIFT) * 20).contains(&lowered) {
                return None;
            }
            mult = lowered as u64;
            // Racing threads measure nearly the same rate; any of them may win.
            self.mult.store(mult, Relaxed);
        }
        Some((
            mult,
            ((WINDOW_NS as u128) << SHIFT).div_ceil(mult as u128) as u64,
        ))
    }
}

/// Whether the CPU's counter is invariant and the kernel keeps time by it.
fn usable() -> bool {
    // Leaf 0x8000_0000 gives the highest extended leaf; 0x8000_0007 is read only if it exists.
    let invariant =
        __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0;
    invariant
        && std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .is_ok_and(|s| s.trim() == "tsc")
}

/// The counter, read after every earlier instruction has completed (so after the real
/// reading it is paired with: extrapolating from a later count can only trail).
#[inline]
fn counter_after() -> u64 {
    // SAFETY: `lfence` and `rdtsc` exist on every x86_64 CPU and touch no memory.
    unsafe {
        _mm_lfence();
        _rdtsc()
    }
}

/// Now, extrapolated from this thread's anchor; `None` when there is none or it is stale.
#[inline]
pub(super) fn extrapolate() -> Option<Nanos> {
    let a = ANCHOR.get();
    // SAFETY: `rdtsc` exists on every x86_64 CPU and touches no memory.
    let ticks = unsafe { _rdtsc() }.wrapping_sub(a.tsc);
    // `a.window` is 0 without an anchor; a counter below the anchor wraps to a huge `ticks`.
    // ticks < window <= 2^21 and mult < 2^37 (the sanity range in `rate`): the product fits.
    (ticks < a.window).then(|| a.nanos + ((ticks * a.mult) >> SHIFT) as Nanos)
}

/// A real reading (`read`) bracketed by the counter: (bracket width, counter after, reading).
#[inline]
fn bracket(read: impl FnOnce() -> Nanos) -> (u64, u64, Nanos) {
    // SAFETY: `rdtsc` exists on every x86_64 CPU and touches no memory. The vDSO read fences
    // before its own counter read, so this one cannot be reordered after it.
    let before = unsafe { _rdtsc() };
    let nanos = read();
    let after = counter_after();
    (after.wrapping_sub(before), after, nanos)
}

/// Takes a real reading with `read` and, when it was quick and the rate is known (or can be
/// measured now), makes it this thread's anchor.
#[inline]
pub(super) fn read_and_anchor(cal: &Calibration, read: impl Fn() -> Nanos) -> Nanos {
    if !cal.usable {
        return read();
    }
    if cal.mult.load(Relaxed) == 0 {
        // Until the rate is measured, only the reading that measures it pays for a bracket.
        let nanos = read();
        if nanos - cal.base_nanos < CALIBRATE_AFTER_NS {
            return nanos;
        }
    }
    let (width, tsc, nanos) = bracket(read);
    if width <= TIGHT_TICKS {
        if let Some((mult, window)) = cal.rate(tsc, nanos) {
            ANCHOR.set(Anchor {
                tsc,
                nanos,
                mult,
                window,
            });
        }
    }
    nanos
}

/// Whether this thread's readings are being extrapolated (for tests).
#[cfg(all(test, not(loom)))]
pub(super) fn anchored() -> bool {
    ANCHOR.get().window != 0
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Where the counter is usable, readings are extrapolated once the rate is measured, and
    /// an extrapolated reading sits between two real ones taken around it.
    #[test]
    fn readings_are_extrapolated_once_the_rate_is_measured() {
        let _ = super::super::nanotime();
        std::thread::sleep(std::time::Duration::from_millis(30));
        if !usable() {
            return; // a machine whose kernel does not keep time by the counter
        }
        // The first read after a sleep is slow (cold caches) and too wide to anchor.
        for _ in 0..10 {
            let _ = super::super::nanotime();
        }
        assert!(anchored(), "no anchor after the calibration span");
        let before = super::super::read_and_anchor();
        let mid = extrapolate().expect("a fresh anchor extrapolates");
        let after = super::super::read_and_anchor();
        assert!(
            before <= mid && mid <= after,
            "{before} <= {mid} <= {after}"
        );
    }
}
