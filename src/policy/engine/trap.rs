//! Turning a failed evaluation into a [`PolicyError`]: a deadline, fuel or
//! memory limit reached, or a trap with the guest's backtrace and the end
//! of its stderr. Reads what the store kept; runs nothing.

use wasmtime::{Trap, WasmBacktrace};

use crate::policy::error::PolicyError;
use crate::policy::limits::Limits;
use crate::policy::store::StoreState;

/// The whole error chain on one line, the way a person reads it.
pub(super) fn err_text(err: &wasmtime::Error) -> String {
    format!("{err:#}")
}

/// The error of an evaluation that did not answer: the limit it reached,
/// or else the trap as a person reads it.
pub(super) fn classify(err: &wasmtime::Error, state: &StoreState, limits: &Limits) -> PolicyError {
    match err.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            return PolicyError::Timeout {
                limit: limits.timeout,
            };
        }
        Some(Trap::OutOfFuel) => {
            return PolicyError::OutOfFuel {
                fuel: limits.fuel.unwrap_or(u64::MAX),
            };
        }
        _ => {}
    }
    if state.limiter.refused {
        return PolicyError::OutOfMemory {
            limit: limits.memory_bytes,
        };
    }
    let mut message = match err.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{err:#}"),
    };
    if let Some(backtrace) = err.downcast_ref::<WasmBacktrace>() {
        message.push_str("\nguest backtrace:");
        message.push_str(&backtrace_text(backtrace));
    }
    // A Rust guest's panic message is the last thing it wrote to stderr.
    let stderr = state.stderr_tail(5);
    if !stderr.is_empty() {
        message.push_str("\nguest stderr:\n");
        message.push_str(&stderr);
    }
    PolicyError::Trap { message }
}

/// One line per frame, with runs of the same function (deep recursion)
/// folded into one.
fn backtrace_text(backtrace: &WasmBacktrace) -> String {
    let mut out = String::new();
    let mut frames = backtrace.frames().iter().peekable();
    let mut index = 0;
    while let Some(frame) = frames.next() {
        let name = frame.func_name().unwrap_or("<unnamed>");
        let mut repeats = 1;
        while frames
            .peek()
            .is_some_and(|next| next.func_name() == frame.func_name())
        {
            frames.next();
            repeats += 1;
        }
        let module = frame.module().name().unwrap_or("<module>");
        let name = rustc_demangle::demangle(name);
        out.push_str(&format!("\n  {index}: {module}!{name:#}"));
        if repeats > 1 {
            out.push_str(&format!(" (×{repeats})"));
        }
        index += repeats;
    }
    out
}
