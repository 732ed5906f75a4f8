//! A channel's buffer: a FIFO of values with the room for a capacity-1 channel's one value in
//! place, so that such a channel (a timer's, a ping-pong's) needs no second allocation and
//! its value shares the core's cache lines. Any other buffer lives behind one word, so that
//! the room kept for it in every core is a pointer, not a `VecDeque`'s four words.

use std::collections::VecDeque;

/// How many values a bounded buffer is allocated for at creation, at most.
pub(crate) const PREALLOCATED: usize = 4096;

/// The values buffered in a channel, oldest first, and the channel's capacity: a capacity-1
/// channel's is implied by its kind, any other bounded one's sits in its boxed buffer, so the
/// core keeps no word for it (every channel 16 bytes smaller: a plain channel's allocation a
/// 160-byte glibc chunk instead of 176, a channel timer's 128 with its arming:
/// design/TIMERS.md, "Memory").
// Boxed on purpose (`Unbuffered`, `Unbounded`): one word in every core (a timer's channel
// above all), against a second allocation and a pointer hop in a channel of such a capacity.
#[allow(clippy::box_collection)]
pub(crate) enum Buf<T> {
    /// A capacity-1 channel's buffer. It holds a second value only after a bounce (invariant
    /// 4 of [`crate::core`]), which turns it into a `Bounded` of capacity 1 for good.
    One(Option<T>),
    /// An unbuffered channel's: it holds only values bounced back, so most never allocate it.
    Unbuffered(Option<Box<VecDeque<T>>>),
    /// An unbounded channel's, allocated with its first value.
    Unbounded(Option<Box<VecDeque<T>>>),
    /// Any other capacity's, allocated at creation, with the capacity.
    Bounded(Box<Bounded<T>>),
}

/// A bounded buffer of a capacity other than 0 and 1 (or a capacity-1 one after a bounce).
pub(crate) struct Bounded<T> {
    cap: Capacity,
    values: VecDeque<T>,
}

impl<T> Buf<T> {
    /// An empty buffer for a channel of capacity `cap` (`None`: unbounded); a bounded buffer
    /// is allocated here, once, for up to [`PREALLOCATED`] values (a larger one grows as
    /// values come: `bounded(1 << 40)` asked the allocator for 8 TiB at once and aborted the
    /// process, and `bounded(usize::MAX - 1)` panicked on a capacity overflow).
    pub(crate) fn new(cap: Option<usize>) -> Self {
        match cap {
            Some(1) => Buf::One(None),
            Some(0) => Buf::Unbuffered(None),
            None => Buf::Unbounded(None),
            Some(cap) => Buf::Bounded(Box::new(Bounded {
                cap: Capacity::new(Some(cap)),
                values: VecDeque::with_capacity(cap.min(PREALLOCATED)),
            })),
        }
    }

    /// The capacity (`None`: unbounded).
    pub(crate) fn capacity(&self) -> Option<usize> {
        match self {
            Buf::One(_) => Some(1),
            Buf::Unbuffered(_) => Some(0),
            Buf::Unbounded(_) => None,
            Buf::Bounded(b) => b.cap.get(),
        }
    }

    /// Whether the channel is bounded (its senders may have to wait for room).
    pub(crate) fn is_bounded(&self) -> bool {
        match self {
            Buf::Unbounded(_) => false,
            Buf::Bounded(b) => b.cap.get().is_some(),
            Buf::One(_) | Buf::Unbuffered(_) => true,
        }
    }

    // The operations below test for `One` first, then match the rest: a capacity-1 channel
    // (a timer's, a ping-pong's) pays one compare, as when `Buf` had two kinds (a four-way
    // match cost R3 3 instructions a receive).

    /// Whether one more value fits within the capacity.
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        if let Buf::One(v) = self {
            return v.is_none();
        }
        match self {
            Buf::Unbuffered(_) => false,
            Buf::Bounded(b) => b.cap.has_room(b.values.len()),
            Buf::One(_) | Buf::Unbounded(_) => true,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        if let Buf::One(v) = self {
            return usize::from(v.is_some());
        }
        match self {
            Buf::Unbuffered(q) | Buf::Unbounded(q) => q.as_ref().map_or(0, |q| q.len()),
            Buf::Bounded(b) => b.values.len(),
            Buf::One(_) => unreachable!("tested above"),
        }
    }

    #[inline]
    pub(crate) fn push_back(&mut self, v: T) {
        if let Buf::One(slot @ None) = self {
            *slot = Some(v);
            return;
        }
        self.deque().push_back(v);
    }

    #[inline]
    pub(crate) fn push_front(&mut self, v: T) {
        if let Buf::One(slot @ None) = self {
            *slot = Some(v);
            return;
        }
        self.deque().push_front(v);
    }

    #[inline]
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        if let Buf::One(v) = self {
            return v.take();
        }
        match self {
            Buf::Unbuffered(q) | Buf::Unbounded(q) => q.as_mut()?.pop_front(),
            Buf::Bounded(b) => b.values.pop_front(),
            Buf::One(_) => unreachable!("tested above"),
        }
    }

    /// The `VecDeque` to push a value into: a full `One` spills into one, an unbounded or
    /// unbuffered buffer allocates its own with its first value.
    fn deque(&mut self) -> &mut VecDeque<T> {
        match self {
            Buf::One(_) => self.spill(),
            Buf::Unbuffered(q) | Buf::Unbounded(q) => q.get_or_insert_with(Box::default),
            Buf::Bounded(b) => &mut b.values,
        }
    }

    /// Takes every value out, for dropping after unlocking; the buffer keeps its capacity.
    pub(crate) fn take(&mut self) -> Taken<T> {
        match self {
            Buf::One(v) => Taken::One(v.take()),
            Buf::Unbuffered(q) | Buf::Unbounded(q) => Taken::Boxed(q.take()),
            Buf::Bounded(b) => Taken::Values(std::mem::take(&mut b.values)),
        }
    }

    /// Turns a full `One` into a `Bounded` of capacity 1 holding its value.
    #[cold]
    #[inline(never)]
    fn spill(&mut self) -> &mut VecDeque<T> {
        if let Buf::One(v) = self {
            *self = Buf::Bounded(Box::new(Bounded {
                cap: Capacity::new(Some(1)),
                values: v.take().into_iter().collect(),
            }));
        }
        match self {
            Buf::Bounded(b) => &mut b.values,
            _ => unreachable!("spilled just above"),
        }
    }
}

/// The values [`Buf::take`] took out, to drop once the lock is released (held only to be
/// dropped, hence never read).
#[allow(dead_code, clippy::box_collection)]
pub(crate) enum Taken<T> {
    /// Nothing taken.
    None,
    One(Option<T>),
    Boxed(Option<Box<VecDeque<T>>>),
    Values(VecDeque<T>),
}

impl<T> Taken<T> {
    #[cfg(test)]
    fn len(&self) -> usize {
        match self {
            Taken::None => 0,
            Taken::One(v) => usize::from(v.is_some()),
            Taken::Boxed(q) => q.as_ref().map_or(0, |q| q.len()),
            Taken::Values(q) => q.len(),
        }
    }
}

/// A bounded channel's capacity in one word: `usize::MAX` stands for unbounded. Only a
/// zero-sized `T` can have a bounded buffer of `usize::MAX` values, which is unbounded in
/// effect; its `capacity()` says `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Capacity(usize);

impl Capacity {
    pub(crate) fn new(cap: Option<usize>) -> Self {
        Capacity(cap.unwrap_or(usize::MAX))
    }

    /// `None`: unbounded.
    pub(crate) fn get(self) -> Option<usize> {
        (self.0 != usize::MAX).then_some(self.0)
    }

    /// Whether a buffer holding `len` values has room for one more.
    pub(crate) fn has_room(self, len: usize) -> bool {
        len < self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Buf;

    fn drain<T>(b: &mut Buf<T>) -> Vec<T> {
        std::iter::from_fn(|| b.pop_front()).collect()
    }

    #[test]
    fn one_holds_its_value_in_place() {
        let mut b = Buf::new(Some(1));
        assert!(matches!(b, Buf::One(None)));
        b.push_back(1);
        assert_eq!(b.len(), 1);
        assert_eq!(b.pop_front(), Some(1));
        assert_eq!(b.pop_front(), None);
        assert!(matches!(b, Buf::One(None)));
    }

    #[test]
    fn a_bounce_into_a_full_one_keeps_fifo_order() {
        let mut b = Buf::new(Some(1));
        b.push_back(2);
        b.push_front(1);
        b.push_back(3);
        assert_eq!(b.len(), 3);
        assert_eq!(drain(&mut b), [1, 2, 3]);
        let mut b = Buf::new(Some(1));
        b.push_back(2);
        b.push_back(3);
        assert_eq!(drain(&mut b), [2, 3]);
    }

    #[test]
    fn take_empties_and_keeps_the_kind() {
        let mut b = Buf::new(Some(1));
        b.push_back(7);
        assert_eq!(b.take().len(), 1);
        assert!(matches!(b, Buf::One(None)));
        let mut b = Buf::new(Some(4));
        b.push_back(1);
        b.push_back(2);
        assert_eq!(b.take().len(), 2);
        assert_eq!(b.len(), 0);
        assert_eq!(b.capacity(), Some(4));
    }

    #[test]
    fn capacity_in_one_word() {
        use super::Capacity;
        assert_eq!(Capacity::new(None).get(), None);
        assert!(Capacity::new(None).has_room(usize::MAX - 1));
        assert_eq!(Capacity::new(Some(0)).get(), Some(0));
        assert!(!Capacity::new(Some(0)).has_room(0));
        assert!(Capacity::new(Some(2)).has_room(1));
        assert!(!Capacity::new(Some(2)).has_room(2));
        assert_eq!(std::mem::size_of::<Capacity>(), 8);
    }

    /// The capacity lives in the buffer's kind or box, and the kind in the spare values of
    /// the one value's `Option` tag: a word-sized value's buffer is still two words.
    #[test]
    fn a_buffer_of_a_word_is_two_words() {
        assert_eq!(std::mem::size_of::<Buf<i64>>(), 16);
    }

    #[test]
    fn each_kind_knows_its_capacity_and_room() {
        let caps = [Some(0), Some(1), Some(3), None, Some(usize::MAX)];
        let want = [Some(0), Some(1), Some(3), None, None];
        for (cap, want) in caps.into_iter().zip(want) {
            let b = Buf::<u8>::new(cap);
            assert_eq!(b.capacity(), want, "{cap:?}");
            assert_eq!(b.is_bounded(), want.is_some(), "{cap:?}");
            assert_eq!(b.has_room(), want != Some(0), "{cap:?}");
        }
        let mut one = Buf::new(Some(1));
        one.push_back(1);
        assert!(!one.has_room());
        one.push_front(0); // a bounce spills it
        assert_eq!(
            (one.capacity(), one.len(), one.has_room()),
            (Some(1), 2, false)
        );
        let mut three = Buf::new(Some(3));
        (0..3).for_each(|v| three.push_back(v));
        assert!(!three.has_room());
    }

    #[test]
    fn many_allocates_with_its_first_value_unless_bounded() {
        assert!(matches!(Buf::<u8>::new(None), Buf::Unbounded(None)));
        assert!(matches!(Buf::<u8>::new(Some(0)), Buf::Unbuffered(None)));
        assert!(matches!(Buf::<u8>::new(Some(3)), Buf::Bounded(_)));
        let mut b = Buf::new(None);
        assert_eq!(b.pop_front(), None);
        b.push_front(2);
        b.push_back(3);
        b.push_front(1);
        assert_eq!(drain(&mut b), [1, 2, 3]);
        assert_eq!(b.len(), 0);
    }
}
