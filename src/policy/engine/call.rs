//! Calling `decide` on a fresh instance, in the contract the module
//! implements. A contract v1 module gets the v1 view of the snapshot, and
//! its decisions come back as contract decisions with no v2 additions.

use wasmtime::Store;

use super::runtime::Pre;
use crate::contract::{Decision, Snapshot};
use crate::policy::lower::v1;
use crate::policy::store::StoreState;

/// What `decide` returned, or why the call failed.
pub(super) type Answer = wasmtime::Result<Result<Vec<Decision>, String>>;

/// Instantiates `pre` in `store` and calls its `decide` with `snapshot`.
pub(super) fn decide(pre: &Pre, store: &mut Store<StoreState>, snapshot: &Snapshot) -> Answer {
    match pre {
        Pre::V2(pre) => pre
            .instantiate(&mut *store)
            .and_then(|instance| instance.call_decide(&mut *store, snapshot)),
        Pre::V1(pre) => {
            let instance = pre.instance_pre().instantiate(&mut *store)?;
            // Checked at link time against the same v1 records.
            let decide = instance
                .get_typed_func::<(v1::SnapshotView<'_>,), (Result<Vec<v1::Decision>, String>,)>(
                    &mut *store,
                    "decide",
                )?;
            let (answer,) = decide.call(&mut *store, (v1::SnapshotView::of(snapshot),))?;
            Ok(answer.map(|decisions| decisions.into_iter().map(Decision::from).collect()))
        }
    }
}
