//! The export of `decide`, by hand: it reads the snapshot in place and
//! returns the decisions in place, as `result<list<decision>, string>`.
//! Built for wasm32 only. It must never free the snapshot, which lives in
//! the host's gift of memory until the instance ends.
//!
//! Invariant, on which every `unsafe` here rests: `policy!` defines
//! `__ferry_policy_decide` and `__ferry_policy_input_read` with exactly the
//! signatures declared below, and the host calls `decide` only with a
//! snapshot that the canonical ABI lowered, so the lists and strings handed
//! in meet the invariant in `owned`.

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
