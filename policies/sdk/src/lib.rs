//! Bindings for the `ferry:policy@0.1.0` contract and the arithmetic that
//! every cost policy needs, so each module holds only its own decision logic.
//!
//! A module implements [`Guest`] and exports it with
//! `ferry_policy_sdk::export!(MyPolicy with_types_in ferry_policy_sdk::bindings);`.
//! The logic itself is plain Rust over the contract types, so it can be unit
//! tested and benchmarked natively.

/// The generated bindings. They live in a module of their own because the
/// exported `export!` macro lands at the crate root.
#[doc(hidden)]
#[allow(clippy::too_many_arguments)] // Generated code: WIT records lowered flat.
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "migration-policy",
        pub_export_macro: true,
        default_bindings_module: "ferry_policy_sdk::bindings",
    });
}

// `Snapshot` and `Decision` are at the bindings' root: the world `use`s them.
pub use bindings::ferry::policy::host::{Level, log};
pub use bindings::ferry::policy::types::{Cluster, Label, Resources, Thresholds, Workload};
pub use bindings::{Decision, Guest, Snapshot, export};

mod arena;
mod cost;
mod plan;
pub mod testing;
pub use cost::{Capacity, hourly_cost_at, projected_utilization};
pub use plan::{Pricing, plan_moves};

pub use arena::InputArena;

/// Answers one call: runs `decide` on the input, then leaks the input
/// instead of freeing it. Ferry instantiates a module afresh for every
/// evaluation and throws the instance away after the one call, so freeing
/// a large snapshot's strings one by one would be wasted work. [`policy!`]
/// uses it; call it yourself only in a hand-written `Guest` implementation.
pub fn answer(
    input: Snapshot,
    decide: impl FnOnce(&Snapshot) -> Result<Vec<Decision>, String>,
) -> Result<Vec<Decision>, String> {
    let answer = decide(&input);
    std::mem::forget(input);
    answer
}

/// The name of the custom section by which a module tells Ferry that it
/// keeps its input until the instance ends. [`policy!`] writes it; Ferry then
/// packs the input into one allocation instead of asking the module's
/// allocator for each string and list in turn. A module without it gets the
/// component model's lowering, one allocation each.
pub const KEEPS_INPUT_SECTION: &str = "ferry-policy-keeps-input";

/// What the section holds: which promise the module makes.
/// - `0.1.0`: it never frees the input's strings, so they may share one block.
/// - `0.2.0`: nor does any free of input memory reach its allocator (the
///   [`InputArena`] sees to that), so the list arrays may share the block too.
pub const KEEPS_INPUT_VERSION: &str = "0.2.0";

/// Exports a decision function as the module's `decide`.
///
/// `ferry_policy_sdk::policy!(decide);` at the crate root, where `decide` is
/// `fn(&Snapshot) -> Result<Vec<Decision>, String>`. The input goes through
/// [`answer`], so it is never freed; the module's global allocator is an
/// `InputArena` (so it may not declare one of its own); and the module is
/// marked with [`KEEPS_INPUT_SECTION`] so that Ferry can lower it faster.
/// Natively the macro expands to nothing, so the crate still builds and
/// tests on the host.
#[macro_export]
#[rustfmt::skip] // rustfmt cannot parse `with_types_in` and dedents the line.
macro_rules! policy {
    ($decide:path) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            struct Policy;

            #[global_allocator]
            static ALLOCATOR: $crate::InputArena = $crate::InputArena::new();

            impl $crate::Guest for Policy {
                fn decide(input: $crate::Snapshot) -> Result<Vec<$crate::Decision>, String> {
                    // The input is read: the policy's own memory is reusable.
                    ALLOCATOR.close();
                    $crate::answer(input, $decide)
                }
            }

            $crate::export!(Policy with_types_in $crate::bindings);

            // The section's name and content must be literals; a test in the
            // SDK keeps them equal to `KEEPS_INPUT_SECTION` and
            // `KEEPS_INPUT_VERSION`.
            #[used]
            #[unsafe(link_section = "ferry-policy-keeps-input")]
            static KEEPS_INPUT: [u8; 5] = *b"0.2.0";
        };
    };
}

/// Logs through the host when running as a component; a no-op natively, where
/// there is no host to receive it.
pub fn host_log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    log(level, message);
    #[cfg(not(target_arch = "wasm32"))]
    let _ = (level, message);
}

/// Parses `snapshot.parameters` into `T`, treating an empty string as `{}`.
pub fn parameters<T: serde::de::DeserializeOwned + Default>(text: &str) -> Result<T, String> {
    if text.trim().is_empty() {
        return Ok(T::default());
    }
    serde_json::from_str(text).map_err(|err| format!("invalid parameters: {err}"))
}

/// The value of a label, if present.
pub fn label<'a>(labels: &'a [Label], key: &str) -> Option<&'a str> {
    labels
        .iter()
        .find(|label| label.key == key)
        .map(|label| label.value.as_str())
}

#[cfg(test)]
mod tests {
    /// `policy!` must spell the section's name as a literal; it must be
    /// the name Ferry looks for.
    #[test]
    fn the_macro_writes_the_documented_section() {
        let source = include_str!("lib.rs");
        let attribute = format!("link_section = \"{}\"", super::KEEPS_INPUT_SECTION);
        assert_eq!(source.matches(&attribute).count(), 1);
        let content = format!("= *b\"{}\";", super::KEEPS_INPUT_VERSION);
        assert_eq!(source.matches(&content).count(), 1);
    }
}
