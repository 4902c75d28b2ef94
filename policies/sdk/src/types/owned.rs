//! `Text` and `List`: a string and a list as the canonical ABI holds them,
//! a pointer and a length that own their memory like `Box<str>` and
//! `Box<[T]>`. This is where the SDK's raw memory is read and freed; it must
//! never hand out a pointer that outlives its value, nor build one from raw
//! parts except as the invariant below allows.
//!
//! Invariant, on which every `unsafe` block here rests: a `Text` or `List`
//! whose `len` is not zero owns a live allocation at `ptr`, made by the
//! global allocator with the layout of an array of `len` elements (bytes,
//! for a `Text`), holding `len` initialised elements (valid UTF-8, for a
//! `Text`). Such a value is made only by `From<String>` and `From<Vec<T>>`
//! here, or from memory the host lowered through `cabi_realloc`, which only
//! `export` wraps (hence the `pub(super)` fields). With `len` zero the
//! pointer means nothing and is never read.

use std::alloc::{self, Layout};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::ops::Deref;

/// A `string`: UTF-8 bytes, as a pointer and a length.
#[repr(C)]
pub struct Text {
    pub(super) ptr: *mut u8,
    pub(super) len: usize,
}

// SAFETY: a `Text` owns its bytes, like a `Box<str>`.
unsafe impl Send for Text {}
unsafe impl Sync for Text {}

impl Text {
    pub const fn new() -> Self {
        Text {
            ptr: std::ptr::null_mut(),
            len: 0,
        }
    }

    pub fn as_str(&self) -> &str {
        if self.len == 0 {
            // The host may give an empty string any pointer, even null.
            return "";
        }
        // SAFETY: the bytes are a live allocation of `len` bytes of UTF-8:
        // made from a `String` here, or lowered from a string by the host.
        unsafe { std::str::from_utf8_unchecked(std::slice::from_raw_parts(self.ptr, self.len)) }
    }
}

impl Default for Text {
    fn default() -> Self {
        Text::new()
    }
}

impl Drop for Text {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: the bytes were allocated with this layout, by
            // `From<String>` or by the host through `cabi_realloc`.
            unsafe { alloc::dealloc(self.ptr, Layout::array::<u8>(self.len).unwrap()) }
        }
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        if text.is_empty() {
            return Text::new();
        }
        let len = text.len();
        let boxed: Box<str> = text.into_boxed_str();
        Text {
            ptr: Box::into_raw(boxed).cast::<u8>(),
            len,
        }
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Text::from(text.to_owned())
    }
}

impl From<&Text> for String {
    fn from(text: &Text) -> Self {
        text.as_str().to_owned()
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl Clone for Text {
    fn clone(&self) -> Self {
        Text::from(self.as_str())
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        self == other.as_str()
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Text) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Text) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

/// A `list<T>`: elements in one array, as a pointer and a length.
#[repr(C)]
pub struct List<T> {
    pub(super) ptr: *mut T,
    pub(super) len: usize,
    pub(super) owns: PhantomData<T>,
}

// SAFETY: a `List` owns its elements, like a `Box<[T]>`.
unsafe impl<T: Send> Send for List<T> {}
unsafe impl<T: Sync> Sync for List<T> {}

impl<T> List<T> {
    pub const fn new() -> Self {
        List {
            ptr: std::ptr::null_mut(),
            len: 0,
            owns: PhantomData,
        }
    }

    pub fn as_slice(&self) -> &[T] {
        if self.len == 0 {
            // The host may give an empty list any pointer, even null.
            return &[];
        }
        // SAFETY: `len` initialised elements live at `ptr`: moved in from a
        // `Vec` here, or lowered by the host.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T> Default for List<T> {
    fn default() -> Self {
        List::new()
    }
}

impl<T> Drop for List<T> {
    fn drop(&mut self) {
        if self.len != 0 && size_of::<T>() != 0 {
            // SAFETY: the array was allocated for `len` elements of `T`, by
            // `From<Vec<T>>` or by the host through `cabi_realloc`, and each
            // element is dropped exactly once, here.
            unsafe {
                std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len));
                alloc::dealloc(self.ptr.cast(), Layout::array::<T>(self.len).unwrap());
            }
        }
    }
}

impl<T> From<Vec<T>> for List<T> {
    fn from(items: Vec<T>) -> Self {
        if items.is_empty() {
            return List::new();
        }
        let len = items.len();
        let boxed: Box<[T]> = items.into_boxed_slice();
        List {
            ptr: Box::into_raw(boxed).cast::<T>(),
            len,
            owns: PhantomData,
        }
    }
}

impl<T> FromIterator<T> for List<T> {
    fn from_iter<I: IntoIterator<Item = T>>(items: I) -> Self {
        List::from(items.into_iter().collect::<Vec<T>>())
    }
}

impl<T> Deref for List<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<'a, T> IntoIterator for &'a List<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl<T: Clone> Clone for List<T> {
    fn clone(&self) -> Self {
        List::from(self.as_slice().to_vec())
    }
}

impl<T: fmt::Debug> fmt::Debug for List<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

impl<T: PartialEq> PartialEq for List<T> {
    fn eq(&self, other: &List<T>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Label;
    use std::rc::Rc;

    #[test]
    fn text_holds_its_string_and_compares_as_one() {
        let text = Text::from(format!("cluster-{}", 7));
        assert_eq!(text, "cluster-7");
        assert_eq!(text.as_str(), "cluster-7");
        assert_eq!(text.clone(), text);
        assert_eq!(String::from(&text), "cluster-7");
        assert_eq!(format!("{text}/{text:?}"), "cluster-7/\"cluster-7\"");
        assert_eq!(Text::new(), "");
        assert_eq!(Text::from(String::new()).len(), 0);
    }

    #[test]
    fn a_list_drops_each_element_once() {
        let counted = Rc::new(());
        let list: List<Rc<()>> = (0..5).map(|_| counted.clone()).collect();
        assert_eq!(Rc::strong_count(&counted), 6);
        let copy = list.clone();
        assert_eq!(Rc::strong_count(&counted), 11);
        drop(list);
        drop(copy);
        assert_eq!(Rc::strong_count(&counted), 1);
        assert!(List::<Label>::new().is_empty());
    }
}
