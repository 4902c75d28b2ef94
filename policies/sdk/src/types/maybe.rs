//! `Maybe`: an `option<T>` as the canonical ABI lays it out, so that a
//! snapshot's optional numbers are read in place. It must stay a plain
//! `#[repr(C, u8)]` enum, with no state beyond the discriminant and value.

/// An `option<T>`: a discriminant byte, then the value at `T`'s alignment.
/// `None` means no data, never a zero. [`Maybe::get`] turns it into an
/// `Option`.
#[repr(C, u8)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Maybe<T> {
    #[default]
    None,
    Some(T),
}

impl<T: Copy> Maybe<T> {
    pub fn get(self) -> Option<T> {
        match self {
            Maybe::None => None,
            Maybe::Some(value) => Some(value),
        }
    }
}

impl<T> Maybe<T> {
    pub fn is_some(&self) -> bool {
        matches!(self, Maybe::Some(_))
    }

    pub fn is_none(&self) -> bool {
        !self.is_some()
    }
}

impl<T> From<Option<T>> for Maybe<T> {
    fn from(value: Option<T>) -> Self {
        match value {
            None => Maybe::None,
            Some(value) => Maybe::Some(value),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maybe_is_an_option() {
        assert_eq!(Maybe::from(Some(3u64)).get(), Some(3));
        assert_eq!(Maybe::<f64>::from(None).get(), None);
        assert!(Maybe::Some(0.0).is_some() && Maybe::<u64>::None.is_none());
    }
}
