//! Attributes on communicators (MPI 4.1 §7.7.2 caching, in rsmpi's shape): a value of any
//! type that implements [`CommAttribute`] hangs on a communicator handle, one per type, and
//! is found again by its type. On `duplicate` the values whose type says `CLONE_ON_DUP` are
//! cloned onto the copy (MPI's copy callback); the others are not. A value is dropped when
//! it is replaced or when its communicator is (MPI's delete callback).
//!
//! The values live in the handle, not in the communicator it shares with other handles, so
//! that `get_attr` can lend a plain `&A` that `set_attr` (taking `&mut self`) cannot pull
//! away: no interior mutability, no `unsafe`.

use std::any::{Any, TypeId};

/// A type whose values can hang on a communicator (rsmpi's `CommAttribute`).
pub trait CommAttribute: 'static + Sized + Clone {
    /// Whether `duplicate` copies the value to the new communicator (by `Clone`); by
    /// default it does not.
    const CLONE_ON_DUP: bool = false;
}

/// A stored value, with what `duplicate` needs to know of its type.
trait Stored: Any {
    fn copy_for_duplicate(&self) -> Option<Box<dyn Stored>>;
    fn as_any(&self) -> &dyn Any;
}

impl<A: CommAttribute> Stored for A {
    fn copy_for_duplicate(&self) -> Option<Box<dyn Stored>> {
        A::CLONE_ON_DUP.then(|| Box::new(self.clone()) as Box<dyn Stored>)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The attributes of one communicator handle, by type.
#[derive(Default)]
pub struct Attributes {
    values: Vec<(TypeId, Box<dyn Stored>)>,
}

impl std::fmt::Debug for Attributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Attributes({} set)", self.values.len())
    }
}

impl Attributes {
    /// The value of type `A`, if one is set.
    pub(crate) fn get<A: CommAttribute>(&self) -> Option<&A> {
        self.values
            .iter()
            .find(|(t, _)| *t == TypeId::of::<A>())
            .and_then(|(_, v)| v.as_any().downcast_ref::<A>())
    }

    /// Sets the value of type `A`, dropping the one it replaces.
    pub(crate) fn set<A: CommAttribute>(&mut self, value: A) {
        let boxed: Box<dyn Stored> = Box::new(value);
        match self
            .values
            .iter_mut()
            .find(|(t, _)| *t == TypeId::of::<A>())
        {
            Some(slot) => slot.1 = boxed,
            None => self.values.push((TypeId::of::<A>(), boxed)),
        }
    }

    /// Removes the value of type `A` (dropping it); whether there was one.
    pub(crate) fn delete<A: CommAttribute>(&mut self) -> bool {
        let before = self.values.len();
        self.values.retain(|(t, _)| *t != TypeId::of::<A>());
        self.values.len() != before
    }

    /// What a duplicate of this communicator starts with: clones of the values whose type
    /// asks for it.
    pub(crate) fn for_duplicate(&self) -> Attributes {
        Attributes {
            values: self
                .values
                .iter()
                .filter_map(|(t, v)| Some((*t, v.copy_for_duplicate()?)))
                .collect(),
        }
    }
}

/// Attribute access on any communicator, trait objects included (rsmpi's
/// `AnyCommunicator`).
pub trait AnyCommunicator {
    /// The attribute of type `A` on this communicator, if set (MPI_Comm_get_attr).
    fn get_attr<A: CommAttribute>(&self) -> Option<&A>;
    /// Sets the attribute of type `A`, replacing any (MPI_Comm_set_attr).
    fn set_attr<A: CommAttribute>(&mut self, value: A);
    /// Removes the attribute of type `A`; whether one was set (MPI_Comm_delete_attr).
    fn delete_attr<A: CommAttribute>(&mut self) -> bool;
}

impl<C: ?Sized + super::Communicator> AnyCommunicator for C {
    fn get_attr<A: CommAttribute>(&self) -> Option<&A> {
        self.attributes().get()
    }
    fn set_attr<A: CommAttribute>(&mut self, value: A) {
        self.attributes_mut().set(value)
    }
    fn delete_attr<A: CommAttribute>(&mut self) -> bool {
        self.attributes_mut().delete::<A>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Copied(u32);
    impl CommAttribute for Copied {
        const CLONE_ON_DUP: bool = true;
    }

    #[derive(Clone, Debug, PartialEq)]
    struct Kept(&'static str);
    impl CommAttribute for Kept {}

    #[test]
    fn values_are_found_by_type_replaced_and_copied_to_duplicates_when_asked() {
        let mut a = Attributes::default();
        assert_eq!(a.get::<Copied>(), None);
        a.set(Copied(1));
        a.set(Kept("here"));
        a.set(Copied(2));
        assert_eq!(a.get::<Copied>(), Some(&Copied(2)));
        assert_eq!(a.get::<Kept>(), Some(&Kept("here")));
        let d = a.for_duplicate();
        assert_eq!(d.get::<Copied>(), Some(&Copied(2)));
        assert_eq!(d.get::<Kept>(), None);
        assert!(a.delete::<Kept>());
        assert!(!a.delete::<Kept>());
        assert_eq!(a.get::<Kept>(), None);
    }
}
