//! The contract's types, laid out as the canonical ABI lays them out in a
//! 32-bit memory.
//!
//! Ferry writes the snapshot into the module's memory in that layout. With
//! wit-bindgen's own types every workload would then be copied into a Rust
//! value of a different shape before the policy saw it; for a large
//! snapshot that copy costs as much as a simple policy's whole decision.
//! These types have the canonical layout themselves (`#[repr(C)]`, checked
//! field by field at compile time below), so the module reads the snapshot
//! where Ferry wrote it, and hands its decisions back the same way.
//!
//! [`Text`] and [`List`] own their memory like `Box<str>` and `Box<[T]>`,
//! which is what the canonical ABI's ownership of strings and lists amounts
//! to. Natively they are ordinary owned values, so the logic can be built
//! and unit tested on the host.

use std::alloc::{self, Layout};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::ops::Deref;

/// A `string`: UTF-8 bytes, as a pointer and a length.
#[repr(C)]
pub struct Text {
    ptr: *mut u8,
    len: usize,
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
    ptr: *mut T,
    len: usize,
    owns: PhantomData<T>,
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

/// CPU in millicores, memory in bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
}

#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Label {
    pub key: Text,
    pub value: Text,
}

/// A cluster Ferry may move workloads to. Utilisations are fractions;
/// prices are per core-hour and per GiB-hour.
#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cluster {
    pub name: Text,
    pub region: Text,
    pub labels: List<Label>,
    pub ready: bool,
    pub allocatable: Resources,
    pub requested: Resources,
    pub cpu_utilization: Maybe<f64>,
    pub memory_utilization: Maybe<f64>,
    pub cpu_core_hour_price: Maybe<f64>,
    pub memory_gib_hour_price: Maybe<f64>,
}

/// A workload, with its requests summed over its replicas.
#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Workload {
    pub namespace: Text,
    pub name: Text,
    pub kind: Text,
    pub cluster: Text,
    pub replicas: u32,
    pub requests: Resources,
    pub cpu_usage_millis: Maybe<u64>,
    pub memory_usage_bytes: Maybe<u64>,
    pub hourly_cost: Maybe<f64>,
    pub labels: List<Label>,
    pub seconds_since_migration: Maybe<u64>,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Thresholds {
    pub min_hourly_savings: f64,
    pub min_savings_ratio: f64,
    pub max_target_cpu_utilization: f64,
    pub max_target_memory_utilization: f64,
    pub cooldown_seconds: u64,
    pub max_migrations_per_cycle: u32,
}

/// What a policy sees in one cycle.
#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub timestamp_ms: u64,
    pub clusters: List<Cluster>,
    pub workloads: List<Workload>,
    pub thresholds: Thresholds,
    pub parameters: Text,
}

/// One proposed move. `hourly_savings` is the plain price difference.
#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decision {
    pub namespace: Text,
    pub name: Text,
    pub from_cluster: Text,
    pub to_cluster: Text,
    pub hourly_savings: f64,
    pub reason: Text,
}

/// The export of `decide`, by hand: it reads the snapshot in place and
/// returns the decisions in place, as `result<list<decision>, string>`.
#[cfg(target_arch = "wasm32")]
pub mod export {
    use super::{Decision, List, Snapshot, Text};
    use std::cell::RefCell;
    use std::marker::PhantomData;

    /// Where `decide` returns its answer: a discriminant byte, then the
    /// list's or the string's pointer and length.
    #[repr(C)]
    struct ReturnArea {
        is_err: u8,
        ptr: *mut u8,
        len: usize,
    }

    /// The answer, alive until the host has read it, and the return area
    /// that points into it.
    struct Answer {
        area: ReturnArea,
        _kept: Result<List<Decision>, Text>,
    }

    thread_local! {
        static ANSWER: RefCell<Option<Box<Answer>>> = const { RefCell::new(None) };
    }

    unsafe extern "Rust" {
        /// The module's decision function, which `policy!` names.
        fn __ferry_policy_decide(snapshot: &Snapshot) -> Result<Vec<Decision>, String>;
        /// Tells the module's `InputArena` that the input is in place.
        fn __ferry_policy_input_read();
    }

    /// `decide: func(input: snapshot) -> result<list<decision>, string>` in
    /// the canonical ABI: the snapshot arrives flat, as a record of up to 16
    /// values does, its lists and strings as pointers and lengths; the
    /// answer goes back as the address of a return area.
    ///
    /// # Safety
    /// The arguments must be a snapshot lowered by a canonical-ABI host.
    #[unsafe(export_name = "decide")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe extern "C" fn export_decide(
        timestamp_ms: i64,
        clusters: *mut u8,
        cluster_count: usize,
        workloads: *mut u8,
        workload_count: usize,
        min_hourly_savings: f64,
        min_savings_ratio: f64,
        max_target_cpu_utilization: f64,
        max_target_memory_utilization: f64,
        cooldown_seconds: i64,
        max_migrations_per_cycle: i32,
        parameters: *mut u8,
        parameters_len: usize,
    ) -> *mut u8 {
        // SAFETY: `policy!` defines both; the policy's own memory is
        // reusable from here on.
        unsafe { __ferry_policy_input_read() };
        wit_bindgen::rt::run_ctors_once();
        // The snapshot is the host's gift: it is read where it lies and
        // never freed, as the instance ends after this call.
        let snapshot = std::mem::ManuallyDrop::new(Snapshot {
            timestamp_ms: timestamp_ms as u64,
            clusters: List {
                ptr: clusters.cast(),
                len: cluster_count,
                owns: PhantomData,
            },
            workloads: List {
                ptr: workloads.cast(),
                len: workload_count,
                owns: PhantomData,
            },
            thresholds: super::Thresholds {
                min_hourly_savings,
                min_savings_ratio,
                max_target_cpu_utilization,
                max_target_memory_utilization,
                cooldown_seconds: cooldown_seconds as u64,
                max_migrations_per_cycle: max_migrations_per_cycle as u32,
            },
            parameters: Text {
                ptr: parameters,
                len: parameters_len,
            },
        });
        // SAFETY: `policy!` defines it, with this signature.
        let mut answer = Box::new(match unsafe { __ferry_policy_decide(&snapshot) } {
            Ok(decisions) => {
                let decisions = List::from(decisions);
                Answer {
                    area: ReturnArea {
                        is_err: 0,
                        ptr: decisions.ptr.cast(),
                        len: decisions.len,
                    },
                    _kept: Ok(decisions),
                }
            }
            Err(message) => {
                let message = Text::from(message);
                Answer {
                    area: ReturnArea {
                        is_err: 1,
                        ptr: message.ptr,
                        len: message.len,
                    },
                    _kept: Err(message),
                }
            }
        });
        let area = (&raw mut answer.area).cast::<u8>();
        ANSWER.with(|kept| *kept.borrow_mut() = Some(answer));
        area
    }

    /// Frees the answer once the host has read it.
    #[unsafe(export_name = "cabi_post_decide")]
    pub extern "C" fn post_decide(_area: *mut u8) {
        drop(ANSWER.with(|kept| kept.borrow_mut().take()));
    }

    // The layouts must be the canonical ABI's for wasm32; see `layout`.
    const _: () = {
        assert!(size_of::<ReturnArea>() == 12);
        assert!(std::mem::offset_of!(ReturnArea, ptr) == 4);
        assert!(std::mem::offset_of!(ReturnArea, len) == 8);
    };
}

/// The canonical ABI's layout of each record in a 32-bit memory: its size,
/// alignment and the offset of every field. A type whose Rust layout
/// differed would not compile for wasm32.
#[cfg(target_arch = "wasm32")]
mod layout {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    const _: () = {
        assert!(size_of::<Text>() == 8 && align_of::<Text>() == 4);
        assert!(size_of::<List<Label>>() == 8 && align_of::<List<Label>>() == 4);
        assert!(size_of::<Maybe<u64>>() == 16 && align_of::<Maybe<u64>>() == 8);
        assert!(size_of::<Maybe<f64>>() == 16 && align_of::<Maybe<f64>>() == 8);
        assert!(size_of::<bool>() == 1);

        assert!(size_of::<Resources>() == 16 && align_of::<Resources>() == 8);
        assert!(offset_of!(Resources, memory_bytes) == 8);

        assert!(size_of::<Label>() == 16 && align_of::<Label>() == 4);
        assert!(offset_of!(Label, value) == 8);

        assert!(size_of::<Cluster>() == 128 && align_of::<Cluster>() == 8);
        assert!(offset_of!(Cluster, region) == 8);
        assert!(offset_of!(Cluster, labels) == 16);
        assert!(offset_of!(Cluster, ready) == 24);
        assert!(offset_of!(Cluster, allocatable) == 32);
        assert!(offset_of!(Cluster, requested) == 48);
        assert!(offset_of!(Cluster, cpu_utilization) == 64);
        assert!(offset_of!(Cluster, memory_utilization) == 80);
        assert!(offset_of!(Cluster, cpu_core_hour_price) == 96);
        assert!(offset_of!(Cluster, memory_gib_hour_price) == 112);

        assert!(size_of::<Workload>() == 128 && align_of::<Workload>() == 8);
        assert!(offset_of!(Workload, name) == 8);
        assert!(offset_of!(Workload, kind) == 16);
        assert!(offset_of!(Workload, cluster) == 24);
        assert!(offset_of!(Workload, replicas) == 32);
        assert!(offset_of!(Workload, requests) == 40);
        assert!(offset_of!(Workload, cpu_usage_millis) == 56);
        assert!(offset_of!(Workload, memory_usage_bytes) == 72);
        assert!(offset_of!(Workload, hourly_cost) == 88);
        assert!(offset_of!(Workload, labels) == 104);
        assert!(offset_of!(Workload, seconds_since_migration) == 112);

        assert!(size_of::<Thresholds>() == 48 && align_of::<Thresholds>() == 8);
        assert!(offset_of!(Thresholds, min_savings_ratio) == 8);
        assert!(offset_of!(Thresholds, max_target_cpu_utilization) == 16);
        assert!(offset_of!(Thresholds, max_target_memory_utilization) == 24);
        assert!(offset_of!(Thresholds, cooldown_seconds) == 32);
        assert!(offset_of!(Thresholds, max_migrations_per_cycle) == 40);

        assert!(size_of::<Snapshot>() == 80 && align_of::<Snapshot>() == 8);
        assert!(offset_of!(Snapshot, clusters) == 8);
        assert!(offset_of!(Snapshot, workloads) == 16);
        assert!(offset_of!(Snapshot, thresholds) == 24);
        assert!(offset_of!(Snapshot, parameters) == 72);

        assert!(size_of::<Decision>() == 48 && align_of::<Decision>() == 8);
        assert!(offset_of!(Decision, name) == 8);
        assert!(offset_of!(Decision, from_cluster) == 16);
        assert!(offset_of!(Decision, to_cluster) == 24);
        assert!(offset_of!(Decision, hourly_savings) == 32);
        assert!(offset_of!(Decision, reason) == 40);
    };
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn maybe_is_an_option() {
        assert_eq!(Maybe::from(Some(3u64)).get(), Some(3));
        assert_eq!(Maybe::<f64>::from(None).get(), None);
        assert!(Maybe::Some(0.0).is_some() && Maybe::<u64>::None.is_none());
    }
}
