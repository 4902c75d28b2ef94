//! The cluster's state: every object, the cluster-wide resource version and a
//! bounded history of change events that watches read from.
//!
//! Invariants: the resource version rises by one per committed change, every
//! change produces exactly one event, and the history holds the most recent
//! events in version order (so a watcher that resumes from a retained version
//! sees every later change once, in order). The state is guarded by one mutex;
//! nothing here awaits while holding it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::object::{self, has_finalizers, is_deleting, meta_mut, meta_str};
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

/// Objects, history and the served resource types of one cluster.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) registry: Registry,
    rv: u64,
    objects: HashMap<String, BTreeMap<ObjectKey, Arc<Value>>>,
    history: VecDeque<Arc<Event>>,
    history_limit: usize,
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

    pub(crate) fn namespace_exists(&self, namespace: &str) -> bool {
        self.get(NAMESPACE_KEY, "", namespace).is_some()
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
            .insert((namespace.clone(), name), object.clone());
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
            .remove(&(namespace.clone(), name))?;
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
        event
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

    /// Delete as the API server does: with finalizers the object only gets a
    /// deletionTimestamp; otherwise it is removed and its dependents (by
    /// ownerReferences), namespace contents or custom resources follow.
    /// Returns the object's state after the call.
    pub(crate) fn delete(
        &mut self,
        resource: &str,
        namespace: &str,
        name: &str,
        cascade: bool,
    ) -> Option<Value> {
        let current = self.get(resource, namespace, name)?.clone();
        if has_finalizers(&current) {
            if is_deleting(&current) {
                return Some((*current).clone());
            }
            let mut marked = (*current).clone();
            if let Some(meta) = meta_mut(&mut marked) {
                meta.insert("deletionTimestamp".into(), Value::String(object::now()));
                meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            }
            let event = self.put(resource, marked);
            return Some((*event.object).clone());
        }
        let event = self.remove(resource, (*current).clone())?;
        self.after_removal(resource, &event.object, cascade);
        Some((*event.object).clone())
    }

    /// The consequences of an object being gone.
    pub(crate) fn after_removal(&mut self, resource: &str, gone: &Value, cascade: bool) {
        if resource == CRD_KEY {
            let group = gone
                .pointer("/spec/group")
                .and_then(Value::as_str)
                .unwrap_or("");
            let plural = gone
                .pointer("/spec/names/plural")
                .and_then(Value::as_str)
                .unwrap_or("");
            let key = format!("{group}/{plural}");
            self.registry.unregister_crd(gone);
            let doomed: Vec<Value> = self
                .range(&key, None, None)
                .map(|(_, o)| (**o).clone())
                .collect();
            for object in doomed {
                self.remove(&key, object);
            }
        }
        if resource == NAMESPACE_KEY {
            let namespace = meta_str(gone, "name").to_string();
            let resources: Vec<String> = self.objects.keys().cloned().collect();
            for key in resources {
                let doomed: Vec<String> = self
                    .range(&key, Some(&namespace), None)
                    .map(|((_, name), _)| name.clone())
                    .collect();
                for name in doomed {
                    self.delete(&key, &namespace, &name, true);
                }
            }
        }
        if cascade {
            let uid = meta_str(gone, "uid").to_string();
            if !uid.is_empty() {
                self.delete_dependents(&uid);
            }
        }
    }

    /// Background cascading deletion: remove every object owned by `uid`.
    fn delete_dependents(&mut self, uid: &str) {
        let mut dependents = Vec::new();
        for (resource, objects) in &self.objects {
            for ((namespace, name), object) in objects {
                if object::owner_uids(object).any(|owner| owner == uid) {
                    dependents.push((resource.clone(), namespace.clone(), name.clone()));
                }
            }
        }
        for (resource, namespace, name) in dependents {
            self.delete(&resource, &namespace, &name, true);
        }
    }
}
