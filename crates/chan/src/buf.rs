//! A channel's buffer: a FIFO of values with the room for a capacity-1 channel's one value in
//! place, so that such a channel (a timer's, a ping-pong's) needs no second allocation and
//! its value shares the core's cache lines. Any other buffer lives behind one word, so that
//! the room kept for it in every core is a pointer, not a `VecDeque`'s four words.

use std::collections::VecDeque;

/// How many values a bounded buffer is allocated for at creation, at most.
pub(crate) const PREALLOCATED: usize = 4096;

/// The values buffered in a channel, oldest first.
pub(crate) enum Buf<T> {
    /// A capacity-1 channel's buffer. It holds a second value only after a bounce (invariant
    /// 4 of [`crate::core`]), which turns it into `Many` for good.
    One(Option<T>),
    /// Any other capacity (unbounded, unbuffered, or more than one): allocated at creation
    /// for a bounded buffer, with the first value otherwise (an unbuffered channel's buffer
    /// holds only values bounced back, so most never allocate one).
    // Boxed on purpose: one word in every core (a timer's channel above all), against a
    // second allocation and a pointer hop in a channel of any other capacity.
    #[allow(clippy::box_collection)]
    Many(Option<Box<VecDeque<T>>>),
}

impl<T> Buf<T> {
    /// An empty buffer for a channel of capacity `cap` (`None`: unbounded); a bounded buffer
    /// is allocated here, once, for up to [`PREALLOCATED`] values (a larger one grows as
    /// values come: `bounded(1 << 40)` asked the allocator for 8 TiB at once and aborted the
    /// process, and `bounded(usize::MAX - 1)` panicked on a capacity overflow).
    pub(crate) fn new(cap: Option<usize>) -> Self {
        match cap {
            Some(1) => Buf::One(None),
            Some(0) | None => Buf::Many(None),
            Some(cap) => Buf::Many(Some(Box::new(VecDeque::with_capacity(
                cap.min(PREALLOCATED),
            )))),
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Buf::One(v) => usize::from(v.is_some()),
            Buf::Many(q) => q.as_ref().map_or(0, |q| q.len()),
        }
    }

    pub(crate) fn push_back(&mut self, v: T) {
        match self {
            Buf::One(slot @ None) => *slot = Some(v),
            Buf::One(Some(_)) => self.spill().push_back(v),
            Buf::Many(q) => q.get_or_insert_with(Box::default).push_back(v),
        }
    }

    pub(crate) fn push_front(&mut self, v: T) {
        match self {
            Buf::One(slot @ None) => *slot = Some(v),
            Buf::One(Some(_)) => self.spill().push_front(v),
            Buf::Many(q) => q.get_or_insert_with(Box::default).push_front(v),
        }
    }

    pub(crate) fn pop_front(&mut self) -> Option<T> {
        match self {
            Buf::One(v) => v.take(),
            Buf::Many(q) => q.as_mut()?.pop_front(),
        }
    }

    /// Takes every value out (for dropping after unlocking), leaving an empty buffer of the
    /// same kind.
    pub(crate) fn take(&mut self) -> Buf<T> {
        match self {
            Buf::One(v) => Buf::One(v.take()),
            Buf::Many(q) => Buf::Many(q.take()),
        }
    }

    /// Turns a full `One` into `Many` holding its value.
    #[cold]
    fn spill(&mut self) -> &mut VecDeque<T> {
        if let Buf::One(v) = self {
            *self = Buf::Many(Some(Box::new(v.take().into_iter().collect())));
        }
        match self {
            Buf::Many(Some(q)) => q,
            _ => unreachable!("spilled just above"),
        }
    }
}

/// A channel's capacity in one word: `usize::MAX` stands for unbounded. Only a zero-sized `T`
/// can have a bounded buffer of `usize::MAX` values, which is unbounded in effect; its
/// `capacity()` says `None`.
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

    pub(crate) fn is_bounded(self) -> bool {
        self.0 != usize::MAX
    }

    /// Whether a buffer holding `len` values has room for one more.
    pub(crate) fn has_room(self, len: usize) -> bool {
        len < self.0
    }
}

impl<T> Default for Buf<T> {
    /// An empty unbounded buffer (allocates nothing).
    fn default() -> Self {
        Buf::Many(None)
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
        assert_eq!(drain(&mut b.take()), [7]);
        assert!(matches!(b, Buf::One(None)));
        let mut b = Buf::new(Some(4));
        b.push_back(1);
        b.push_back(2);
        assert_eq!(drain(&mut b.take()), [1, 2]);
        assert_eq!(b.len(), 0);
    }

    #[test]
    fn capacity_in_one_word() {
        use super::Capacity;
        assert_eq!(Capacity::new(None).get(), None);
        assert!(Capacity::new(None).has_room(usize::MAX - 1));
        assert!(!Capacity::new(None).is_bounded());
        assert_eq!(Capacity::new(Some(0)).get(), Some(0));
        assert!(!Capacity::new(Some(0)).has_room(0));
        assert!(Capacity::new(Some(2)).has_room(1));
        assert!(!Capacity::new(Some(2)).has_room(2));
        assert_eq!(std::mem::size_of::<Capacity>(), 8);
    }

    #[test]
    fn a_buffer_of_a_word_is_two_words() {
        assert_eq!(std::mem::size_of::<Buf<i64>>(), 16);
    }

    #[test]
    fn many_allocates_with_its_first_value_unless_bounded() {
        assert!(matches!(Buf::<u8>::new(None), Buf::Many(None)));
        assert!(matches!(Buf::<u8>::new(Some(0)), Buf::Many(None)));
        assert!(matches!(Buf::<u8>::new(Some(3)), Buf::Many(Some(_))));
        let mut b = Buf::new(None);
        assert_eq!(b.pop_front(), None);
        b.push_front(2);
        b.push_back(3);
        b.push_front(1);
        assert_eq!(drain(&mut b), [1, 2, 3]);
        assert_eq!(b.len(), 0);
    }
}
