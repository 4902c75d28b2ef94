//! What the receiver creates for a move, and its removal: create, never
//! overwrite; delete only what was recorded, by uid.
//!
//! Every object is created (never applied over an existing one) with the
//! request's uid in an annotation. An existing object of the same name is
//! this move's own only if it carries that annotation (a crash between its
//! creation and its record in status); anything else is a `NameConflict`
//! and is left exactly as it is. Deletion always carries a uid precondition,
//! so an object re-created by someone else under the same name survives.
//! This part must never patch, replace or delete an object that is not this
//! move's own.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams, Preconditions,
};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::error::{Error, Result, is_already_exists, is_not_found};
use super::names::{ANNOTATION_REQUEST_UID, LABEL_MIGRATION, RECEIVER_FIELD_MANAGER};
use crate::crd::AppliedObject;

/// The Multi-Cluster Services API's export of a Service, created beside
/// a moved Service where that API is served.
pub(crate) const SERVICE_EXPORT: &str = "ServiceExport";

fn resource(kind: &str) -> Option<ApiResource> {
    match kind {
        SERVICE_EXPORT => Some(ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("multicluster.x-k8s.io", "v1alpha1", SERVICE_EXPORT),
            "serviceexports",
        )),
        "Deployment" => Some(ApiResource::erase::<Deployment>(&())),
        "StatefulSet" => Some(ApiResource::erase::<StatefulSet>(&())),
        "PersistentVolumeClaim" => Some(ApiResource::erase::<PersistentVolumeClaim>(&())),
        "Job" => Some(ApiResource::erase::<Job>(&())),
        "ConfigMap" => Some(ApiResource::erase::<ConfigMap>(&())),
        "Secret" => Some(ApiResource::erase::<Secret>(&())),
        "ServiceAccount" => Some(ApiResource::erase::<ServiceAccount>(&())),
        "NetworkPolicy" => Some(ApiResource::erase::<NetworkPolicy>(&())),
        "PodDisruptionBudget" => Some(ApiResource::erase::<PodDisruptionBudget>(&())),
        "Service" => Some(ApiResource::erase::<Service>(&())),
        "HorizontalPodAutoscaler" => Some(ApiResource::erase::<HorizontalPodAutoscaler>(&())),
        _ => None,
    }
}

fn api(client: &Client, namespace: &str, kind: &str) -> Result<Api<DynamicObject>> {
    let resource = resource(kind).ok_or_else(|| Error::InvalidRequest {
        name: kind.to_owned(),
        message: format!("{kind} is not a kind a move creates"),
    })?;
    Ok(Api::namespaced_with(client.clone(), namespace, &resource))
}

/// The receiver's handle on one move: where it creates, and the uid that
/// marks its own objects.
pub(crate) struct Move<'a> {
    pub client: &'a Client,
    pub namespace: &'a str,
    /// The request's name (the `ferry.dev/migration` label).
    pub migration: &'a str,
    /// The request's uid (the `ferry.dev/request-uid` annotation).
    pub request_uid: &'a str,
}

/// What an existing object of a wanted name is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Existing {
    /// No object of that name.
    Absent,
    /// This move created it (the uid to record).
    Own(String),
    /// Someone else's: the move must not touch it.
    Foreign,
}

impl Move<'_> {
    /// Whether an object of `kind`/`name` exists, and whose it is.
    pub(crate) async fn existing(&self, kind: &str, name: &str) -> Result<Existing> {
        let api = api(self.client, self.namespace, kind)?;
        let object = api
            .get_opt(name)
            .await
            .map_err(|e| Error::kube(format!("read {kind} {}/{name}", self.namespace), e))?;
        Ok(match object {
            None => Existing::Absent,
            Some(object) if self.is_own(&object) => Existing::Own(object.uid().unwrap_or_default()),
            Some(_) => Existing::Foreign,
        })
    }

    fn is_own(&self, object: &DynamicObject) -> bool {
        !self.request_uid.is_empty()
            && object
                .annotations()
                .get(ANNOTATION_REQUEST_UID)
                .map(String::as_str)
                == Some(self.request_uid)
    }

    /// Creates `object` (a sanitised manifest of `kind`) marked as this
    /// move's. `Ok(Some(uid))`: created, or found already created by this
    /// move. `Ok(None)`: a foreign object holds the name; nothing was changed.
    pub(crate) async fn create(&self, kind: &str, mut object: Value) -> Result<Option<String>> {
        object["metadata"]["namespace"] = self.namespace.into();
        object["metadata"]["labels"][LABEL_MIGRATION] = self.migration.into();
        object["metadata"]["annotations"][ANNOTATION_REQUEST_UID] = self.request_uid.into();
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let dynamic: DynamicObject =
            serde_json::from_value(object).map_err(|e| Error::InvalidRequest {
                name: name.clone(),
                message: format!("the {kind} manifest does not parse: {e}"),
            })?;
        let api = api(self.client, self.namespace, kind)?;
        let params = PostParams {
            field_manager: Some(RECEIVER_FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        match api.create(&params, &dynamic).await {
            Ok(created) => Ok(Some(created.uid().unwrap_or_default())),
            Err(e) if is_already_exists(&e) => match self.existing(kind, &name).await? {
                Existing::Own(uid) => Ok(Some(uid)),
                // Deleted between the 409 and the read: the retry creates it.
                Existing::Absent => Err(Error::kube(format!("create {kind} {name}"), e)),
                Existing::Foreign => Ok(None),
            },
            Err(e) => Err(Error::kube(format!("create {kind} {name}"), e)),
        }
    }

    /// Deletes the recorded object if it still has the recorded uid; gone or
    /// replaced (a uid precondition failure) is success.
    pub(crate) async fn delete(&self, object: &AppliedObject) -> Result<()> {
        let api = api(self.client, self.namespace, &object.kind)?;
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(object.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match api.delete(&object.name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(Error::kube(
                format!("delete {} {}/{}", object.kind, self.namespace, object.name),
                e,
            )),
        }
    }

    /// Deletes the recorded objects, and any object named in `wanted` that
    /// this move created but had not recorded yet (a crash between the
    /// create and the status write). Nothing else.
    pub(crate) async fn remove(
        &self,
        recorded: &[AppliedObject],
        wanted: &[(String, String)],
    ) -> Result<()> {
        for object in recorded.iter().rev() {
            self.delete(object).await?;
        }
        for (kind, name) in wanted {
            if recorded.iter().any(|o| &o.kind == kind && &o.name == name) {
                continue;
            }
            if let Existing::Own(uid) = self.existing(kind, name).await? {
                let object = AppliedObject {
                    kind: kind.clone(),
                    name: name.clone(),
                    uid,
                };
                self.delete(&object).await?;
            }
        }
        Ok(())
    }
}
