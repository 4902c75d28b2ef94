//! Create-or-update of one object, the way every join step writes: create
//! it when absent; otherwise merge-patch only the fields join owns, and
//! only when they differ. A dry run reads and reports, never writes.
//!
//! It must never replace a whole object (a user's labels, annotations and
//! fields join does not own survive every run).

use std::fmt::Debug;

use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::{JoinError, Result};
use super::{Action, Change};

/// The cluster a step writes to, and whether it may write.
pub(crate) struct Target<'a> {
    pub(crate) cluster: &'a str,
    pub(crate) dry_run: bool,
}

impl Target<'_> {
    pub(crate) fn kube_error(&self, action: String) -> impl FnOnce(kube::Error) -> JoinError {
        let cluster = self.cluster.to_owned();
        move |source| JoinError::Kube {
            cluster,
            action,
            source,
        }
    }

    pub(crate) fn change(
        &self,
        kind: &'static str,
        namespace: Option<&str>,
        name: &str,
        action: Action,
    ) -> Change {
        Change {
            cluster: self.cluster.to_owned(),
            kind,
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            action,
            dry_run: self.dry_run,
            note: None,
        }
    }
}

/// Ensures the object `name` exists: `desired()` is created when it is
/// absent; when it exists, `update` looks at it and returns the merge patch
/// that brings join's fields in line, or None when they already are (or an
/// error when the object is not join's to change). Returns what was done
/// and the object as it now is (None only when a dry run would create it).
pub(crate) async fn ensure<K>(
    target: &Target<'_>,
    api: &Api<K>,
    name: &str,
    desired: impl FnOnce() -> Result<K>,
    update: impl FnOnce(&K) -> Result<Option<serde_json::Value>>,
) -> Result<(Action, Option<K>)>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).into_owned();
    let existing = api
        .get_opt(name)
        .await
        .map_err(target.kube_error(format!("read {kind} {name}")))?;
    let Some(existing) = existing else {
        if target.dry_run {
            return Ok((Action::Created, None));
        }
        let created = api
            .create(&PostParams::default(), &desired()?)
            .await
            .map_err(target.kube_error(format!("create {kind} {name}")))?;
        return Ok((Action::Created, Some(created)));
    };
    let Some(patch) = update(&existing)? else {
        return Ok((Action::Unchanged, Some(existing)));
    };
    if target.dry_run {
        return Ok((Action::Updated, Some(existing)));
    }
    let patched = api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(target.kube_error(format!("update {kind} {name}")))?;
    Ok((Action::Updated, Some(patched)))
}
