//! The two contracts the host serves, as wasmtime bindings: contract v1
//! (`ferry:policy@0.1.0`, `policies/wit/policy.wit`) and contract v2
//! (`ferry:policy@2.0.0`, `policies/wit/v2/policy.wit`). A module implements
//! one of them; [`Contract`] says which. Declarations only: nothing here runs
//! a guest.

/// Which contract a module implements, found by type checking its `decide`
/// export against each world when it is linked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Contract {
    /// `ferry:policy@0.1.0`.
    #[serde(rename = "v1")]
    V1,
    /// `ferry:policy@2.0.0`.
    #[serde(rename = "v2")]
    V2,
}

impl Contract {
    /// Every contract the host serves, newest first.
    pub const ALL: [Contract; 2] = [Contract::V2, Contract::V1];

    /// The WIT package version. These are not the keeps-input promise
    /// versions of [`KEEPS_INPUT_SECTION`](crate::policy::KEEPS_INPUT_SECTION)
    /// ("0.1.0", "0.2.0"), and a test keeps the two sets apart.
    pub fn version(self) -> &'static str {
        match self {
            Contract::V1 => "0.1.0",
            Contract::V2 => "2.0.0",
        }
    }

    /// The WIT package with its version, as components name it.
    pub fn package(self) -> String {
        format!("ferry:policy@{}", self.version())
    }
}

impl std::fmt::Display for Contract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Contract::V1 => f.write_str("contract v1"),
            Contract::V2 => f.write_str("contract v2"),
        }
    }
}

/// What bindgen would generate for a `types` interface, which holds records
/// only: the records are given, and the interface exports nothing the host
/// must provide.
macro_rules! types_interface {
    ($version:literal, $($record:tt)*) => {
        pub mod types {
            // The generated code names only the records the world uses.
            pub use $($record)*;
            use wasmtime::component::{HasData, Linker};

            pub trait Host {}
            impl<H: Host + ?Sized> Host for &mut H {}
            pub trait HostWithStore<T>: HasData {}
            impl<H: ?Sized + HasData, T> HostWithStore<T> for H {}

            /// Declares the (empty) instance a component imports for the types.
            pub fn add_to_linker<T: 'static, D>(
                linker: &mut Linker<T>,
                _host_getter: fn(&mut T) -> D::Data<'_>,
            ) -> wasmtime::Result<()>
            where
                D: HostWithStore<T>,
                for<'a> D::Data<'a>: Host,
            {
                linker.instance(concat!("ferry:policy/types@", $version))?;
                Ok(())
            }
        }
    };
}

/// Contract v1. Its records are the shapes of `lower::v1`, used to type
/// check a module; the snapshot a v1 module gets is a view of the contract
/// v2 values with the v1 fields only.
pub(crate) mod v1 {
    wasmtime::component::bindgen!({
        path: "policies/wit",
        world: "migration-policy",
        with: { "ferry:policy/types": crate::policy::bindings::v1::types },
    });

    types_interface!("0.1.0", crate::policy::lower::v1::{Decision, Snapshot});
}

/// Contract v2. Its records are [`contract`]'s own, lowered into the guest
/// as they are: no copy of the snapshot per evaluation.
///
/// [`contract`]: crate::contract
pub(crate) mod v2 {
    wasmtime::component::bindgen!({
        path: "policies/wit/v2",
        world: "migration-policy",
        with: { "ferry:policy/types": crate::policy::bindings::v2::types },
    });

    types_interface!("2.0.0", crate::contract::{Decision, Snapshot});
}

#[cfg(test)]
mod tests {
    use super::Contract;
    use crate::policy::Keeps;

    /// A contract must never be named like a keeps-input promise, nor the
    /// other way round: they number different things. Contracts are named
    /// by their package (`ferry:policy@…`) and called "contract v1/v2"; the
    /// bare number of v1, `0.1.0`, predates the promises and happens to be
    /// the first promise's token, which is why v2 skips to `2.0.0`.
    #[test]
    fn contract_versions_and_keeps_input_tokens_are_disjoint() {
        let promises = Keeps::TOKENS;
        assert_eq!(promises, ["0.1.0", "0.2.0"]);
        for contract in Contract::ALL {
            for name in [contract.package(), contract.to_string()] {
                assert!(
                    !promises.contains(&name.as_str()),
                    "{name} reads like a keeps-input token"
                );
            }
        }
        assert!(!promises.contains(&Contract::V2.version()));
        assert_eq!(Contract::V1.package(), "ferry:policy@0.1.0");
        assert_eq!(Contract::V2.package(), "ferry:policy@2.0.0");
    }

    /// The versions here are the ones the WIT files declare.
    #[test]
    fn contract_versions_are_the_wit_packages() {
        let v1 = include_str!("../../policies/wit/policy.wit");
        let v2 = include_str!("../../policies/wit/v2/policy.wit");
        for (contract, wit) in [(Contract::V1, v1), (Contract::V2, v2)] {
            let declared = format!("package {};", contract.package());
            assert!(wit.contains(&declared), "{contract}: {declared} not found");
        }
    }
}
