//! The cluster's state: every object, the cluster-wide resource version and a
//! bounded history of change events that watches read from.
//!
//! Invariants: the resource version rises by one per committed change, every
//! change produces exactly one event, and the history holds the most recent
//! events in version order (so a watcher that resumes from a retained version
//! sees every later change once, in order). The state is guarded by one mutex;
//! nothing here awaits while holding it.
//!
//! It only stores: what a change leads to (garbage collection, namespace
//! finalization) is decided in `controllers.rs` from the events this file queues,
//! never here.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use crate::object::{self, meta_mut, meta_str};
use crate::registry::Registry;

/// The key of the CRD resource in the store.
pub(crate) const CRD_KEY: &str = "apiextensions.k8s.io/customresourcedefinitions";
/// The key of namespaces in the store.
pub(crate) const NAMESPACE_KEY: &str = "/namespaces";
/// The key prefix of the RBAC kinds. Changes to them are counted, so that the
/// cluster knows when the authorizer must re-read them.
pub(crate) const RBAC_PREFIX: &str = "rbac.authorization.k8s.io/";
/// The keys of the RBAC kinds in the store.
pub(crate) const ROLES_KEY: &str = "rbac.authorization.k8s.io/roles";
pub(crate) const ROLE_BINDINGS_KEY: &str = "rbac.authorization.k8s.io/rolebindings";
pub(crate) const CLUSTER_ROLES_KEY: &str = "rbac.authorization.k8s.io/clusterroles";
pub(crate) const CLUSTER_ROLE_BINDINGS_KEY: &str = "rbac.authorization.k8s.io/clusterrolebindings";

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change. The object is serialized once, when committed.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) resource: String,
    pub(crate) namespace: String,
    pub(crate) type_: EventType,
    pub(crate) object: Arc<Value>,
    /// The object before the change (for selector transitions).
    pub(crate) old: Option<Arc<Value>>,
    pub(crate) json: Bytes,
}

/// (namespace, name); namespace is "" for cluster-scoped objects.
pub(crate) type ObjectKey = (String, String);

/// One stored object: (resource key, namespace, name).
pub(crate) type ObjectRef = (String, String, String);

/// Objects, history and the served resource types of one cluster.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) registry: Registry,
    rv: u64,
    objects: HashMap<String, BTreeMap<ObjectKey, Arc<Value>>>,
    history: VecDeque<Arc<Event>>,
    history_limit: usize,
    /// Events committed since the built-in controllers last looked, oldest
    /// first; independent of `history`, which may be shorter.
    pending: Vec<Arc<Event>>,
    /// Owner uid -> the objects whose ownerReferences name it, so that the
    /// garbage collector finds dependents without scanning every object.
    dependents: HashMap<String, BTreeSet<ObjectRef>>,
    /// Changes to RBAC objects so far.
    rbac_changes: u64,
}

impl State {
    pub(crate) fn new(history_limit: usize) -> Self {
        Self {
            registry: Registry::with_builtins(),
            rv: 0,
            objects: HashMap::new(),
            history: VecDeque::with_capacity(history_limit.min(1 << 16)),
            history_limit: history_limit.max(1),
            pending: Vec::new(),
            dependents: HashMap::new(),
            rbac_changes: 0,
        }
    }

    /// How many changes RBAC objects have had; a new count means the
    /// authorizer's view is out of date.
    pub(crate) fn rbac_changes(&self) -> u64 {
        self.rbac_changes
    }

    /// The current cluster-wide resource version.
    pub(crate) fn resource_version(&self) -> u64 {
        self.rv
    }

    pub(crate) fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<&Arc<Value>> {
        self.objects
            .get(resource)?
            .get(&(namespace.to_string(), name.to_string()))
    }

    /// Objects of a resource in key order, from `after` (exclusive), in one
    /// namespace or all.
    pub(crate) fn range<'a>(
        &'a self,
        resource: &str,
        namespace: Option<&'a str>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Arc<Value>)> + 'a {
        use std::ops::Bound;
        let lower = match (after, namespace) {
            (Some(key), _) => Bound::Excluded(key.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        self.objects
            .get(resource)
            .into_iter()
            .flat_map(move |m| m.range((lower.clone(), Bound::Unbounded)))
            .take_while(move |((ns, _), _)| namespace.is_none_or(|want| want == ns))
    }

    /// Every resource key that has held an object.
    pub(crate) fn resources(&self) -> Vec<String> {
        self.objects.keys().cloned().collect()
    }

    /// The objects whose ownerReferences name `uid`, in key order.
    pub(crate) fn dependents_of(&self, uid: &str) -> Vec<ObjectRef> {
        self.dependents
            .get(uid)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The events committed since the last call, oldest first.
    pub(crate) fn take_pending(&mut self) -> Vec<Arc<Event>> {
        std::mem::take(&mut self.pending)
    }

    /// Store `object` (added or replacing), stamping the next resource version.
    pub(crate) fn put(&mut self, resource: &str, mut object: Value) -> Arc<Event> {
        let namespace = meta_str(&object, "namespace").to_string();
        let name = meta_str(&object, "name").to_string();
        self.rv += 1;
        if let Some(meta) = meta_mut(&mut object) {
            meta.insert("resourceVersion".into(), Value::String(self.rv.to_string()));
        }
        let object = Arc::new(object);
        let old = self
            .objects
            .entry(resource.to_string())
            .or_default()
            .insert((namespace.clone(), name.clone()), object.clone());
        let at = (resource.to_string(), namespace.clone(), name);
        self.index_owners(at, old.as_deref(), Some(&object));
        let type_ = if old.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(resource, namespace, type_, object, old)
    }

    /// Remove an object for good; `last` is its final state (as the DELETED
    /// event shows it).
    pub(crate) fn remove(&mut self, resource: &str, last: Value) -> Option<Arc<Event>> {
        let namespace = meta_str(&last, "namespace").to_string();
        let name = meta_str(&last, "name").to_string();
        let old = self
            .objects
            .get_mut(resource)?
            .remove(&(namespace.clone(), name.clone()))?;
        let at = (resource.to_string(), namespace.clone(), name);
        self.index_owners(at, Some(&old), None);
        self.rv += 1;
        let mut last = last;
        if let Some(meta) = meta_mut(&mut last) {
            meta.insert("resourceVersion".into(), Value::String(self.rv.to_string()));
        }
        Some(self.record(
            resource,
            namespace,
            EventType::Deleted,
            Arc::new(last),
            Some(old),
        ))
    }

    fn record(
        &mut self,
        resource: &str,
        namespace: String,
        type_: EventType,
        object: Arc<Value>,
        old: Option<Arc<Value>>,
    ) -> Arc<Event> {
        if resource.starts_with(RBAC_PREFIX) {
            self.rbac_changes += 1;
        }
        // Serializing a Value cannot fail: its keys are strings.
        let json = Bytes::from(serde_json::to_vec(&*object).unwrap_or_default());
        let event = Arc::new(Event {
            rv: self.rv,
            resource: resource.to_string(),
            namespace,
            type_,
            object,
            old,
            json,
        });
        if self.history.len() >= self.history_limit {
            self.history.pop_front();
        }
        self.history.push_back(event.clone());
        self.pending.push(event.clone());
        event
    }

    /// Keep `dependents` in step with the ownerReferences of the object at
    /// `at`, which changed from `old` to `new`.
    fn index_owners(&mut self, at: ObjectRef, old: Option<&Value>, new: Option<&Value>) {
        let uids = |v: Option<&Value>| -> BTreeSet<String> {
            v.map(|v| object::owner_uids(v).map(String::from).collect())
                .unwrap_or_default()
        };
        let (before, after) = (uids(old), uids(new));
        if before == after {
            return;
        }
        for uid in before.difference(&after) {
            if let Some(set) = self.dependents.get_mut(uid) {
                set.remove(&at);
                if set.is_empty() {
                    self.dependents.remove(uid);
                }
            }
        }
        for uid in after.difference(&before) {
            self.dependents
                .entry(uid.clone())
                .or_default()
                .insert(at.clone());
        }
    }

    /// Events after `rv` (exclusive), at most `max`; `Err(oldest)` when the
    /// history no longer reaches back that far.
    pub(crate) fn events_after(&self, rv: u64, max: usize) -> Result<Vec<Arc<Event>>, u64> {
        let oldest = self.history.front().map_or(self.rv + 1, |e| e.rv);
        if rv + 1 < oldest && rv < self.rv {
            return Err(oldest);
        }
        let start = self.history.partition_point(|e| e.rv <= rv);
        Ok(self.history.range(start..).take(max).cloned().collect())
    }
}
