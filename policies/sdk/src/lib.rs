//! Contract v2 (`ferry:policy@2.0.0`) for policy modules written in Rust, and
//! the arithmetic that every cost policy needs, so each module holds only its
//! own decision logic.
//!
//! A module writes `fn decide(&Snapshot) -> Result<Vec<Decision>, String>`
//! and exports it with [`policy!`]. The logic is plain Rust over the
//! contract's types, so it can be unit tested and benchmarked natively.

/// The generated bindings, for the imports (`host.log`) and the world's
/// type, which the component is built from. The export of `decide` is the
/// SDK's own, in `types::export`: it reads the snapshot in place.
#[doc(hidden)]
#[allow(clippy::too_many_arguments)] // Generated code: WIT records lowered flat.
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit/v2",
        world: "migration-policy",
        default_bindings_module: "ferry_policy_sdk::bindings",
    });
}

pub use bindings::ferry::policy::host::{Level, log};

mod arena;
mod cost;
mod plan;
pub mod testing;
pub mod types;
pub use cost::{Capacity, hourly_cost_at, projected_utilization};
pub use plan::{Fixed, Pricing, plan_moves, settling};
pub use types::{
    Cluster, Decision, Label, List, Maybe, Reasons, Resources, Snapshot, Strategy, Text,
    Thresholds, Workload,
};

pub use arena::InputArena;

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
/// `fn(&Snapshot) -> Result<Vec<Decision>, String>`. The snapshot is read
/// where the host wrote it and never freed; the module's global allocator is
/// an `InputArena` (so it may not declare one of its own); and the module is
/// marked with [`KEEPS_INPUT_SECTION`] so that Ferry can lower it faster.
/// Natively the macro expands to nothing, so the crate still builds and
/// tests on the host.
#[macro_export]
macro_rules! policy {
    ($decide:path) => {
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            #[global_allocator]
            static ALLOCATOR: $crate::InputArena = $crate::InputArena::new();

            // The export of `decide` (in `types::export`) calls these two.
            #[unsafe(no_mangle)]
            fn __ferry_policy_decide(
                snapshot: &$crate::Snapshot,
            ) -> Result<Vec<$crate::Decision>, String> {
                $decide(snapshot)
            }

            #[unsafe(no_mangle)]
            fn __ferry_policy_input_read() {
                ALLOCATOR.close();
            }

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
