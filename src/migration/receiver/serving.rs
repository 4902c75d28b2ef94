//! The receiver's last checks before it reports a move `Ready`, after which
//! the sender takes the source down: every Service that travelled must
//! have a ready endpoint here, so traffic sent to it has somewhere to go;
//! and where the cluster serves the Multi-Cluster Services API
//! (`multicluster.x-k8s.io`), each is exported, so other clusters of the
//! clusterset find the workload where it now runs.
//!
//! A ServiceExport is created like every other object of the move (never
//! over a foreign one, recorded by uid, removed on a rollback).

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use super::steps::Request;
use crate::crd::{AppliedObject, WorkloadMigration, WorkloadMigrationStatus};
use crate::migration::applied::SERVICE_EXPORT;
use crate::migration::error::{Error, Result, is_not_found};

/// The label an EndpointSlice names its Service with.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

impl Request<'_> {
    /// The first Service of the move, among those that select pods, with no
    /// ready endpoint yet; `None` when every one has one.
    pub(super) async fn service_without_endpoints(
        &self,
        wm: &WorkloadMigration,
        status: &WorkloadMigrationStatus,
    ) -> Result<Option<String>> {
        let namespace = &wm.spec.target_namespace;
        let services: Api<Service> = Api::namespaced(self.ctx.client.clone(), namespace);
        let slices: Api<EndpointSlice> = Api::namespaced(self.ctx.client.clone(), namespace);
        for applied in status.applied.iter().filter(|o| o.kind == "Service") {
            let Some(service) = services
                .get_opt(&applied.name)
                .await
                .map_err(|e| Error::kube(format!("read Service {}", applied.name), e))?
                .filter(|s| s.uid().as_deref() == Some(applied.uid.as_str()))
            else {
                continue; // gone: the move's own check of its objects reports it
            };
            if !selects_pods(&service) {
                continue;
            }
            let list = slices
                .list(
                    &ListParams::default()
                        .labels(&format!("{SERVICE_NAME_LABEL}={}", applied.name)),
                )
                .await
                .map_err(|e| {
                    Error::kube(
                        format!("list the EndpointSlices of Service {}", applied.name),
                        e,
                    )
                })?;
            // As kube-proxy reads it: an endpoint without a ready condition
            // counts as ready.
            let ready = list
                .items
                .iter()
                .flat_map(|s| s.endpoints.iter().flatten())
                .any(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true));
            if !ready {
                return Ok(Some(applied.name.clone()));
            }
        }
        Ok(None)
    }

    /// Exports every Service of the move where the Multi-Cluster Services
    /// API is served; records each export in `status.applied`. Returns the
    /// names it could not export because a foreign ServiceExport holds them.
    pub(super) async fn export_services(
        &self,
        wm: &WorkloadMigration,
        status: &mut WorkloadMigrationStatus,
    ) -> Result<Vec<String>> {
        let uid = wm.uid().unwrap_or_default();
        let mover = self.mover(wm, &uid);
        let services: Vec<String> = status
            .applied
            .iter()
            .filter(|o| o.kind == "Service")
            .map(|o| o.name.clone())
            .collect();
        let mut foreign = Vec::new();
        for name in services {
            if status
                .applied
                .iter()
                .any(|o| o.kind == SERVICE_EXPORT && o.name == name)
            {
                continue;
            }
            let export = serde_json::json!({
                "apiVersion": "multicluster.x-k8s.io/v1alpha1",
                "kind": SERVICE_EXPORT,
                "metadata": {"name": name},
            });
            match mover.create(SERVICE_EXPORT, export).await {
                Ok(Some(uid)) => status.applied.push(AppliedObject {
                    kind: SERVICE_EXPORT.to_owned(),
                    name,
                    uid,
                }),
                Ok(None) => foreign.push(name),
                // No such resource here: the cluster has no MCS API.
                Err(Error::Kube { source, .. }) if is_not_found(&source) => return Ok(foreign),
                Err(e) => return Err(e),
            }
        }
        Ok(foreign)
    }
}

/// Whether the Service routes to pods by a selector (an ExternalName or a
/// selector-less Service has no endpoints of its own to wait for).
fn selects_pods(service: &Service) -> bool {
    let Some(spec) = &service.spec else {
        return false;
    };
    spec.type_.as_deref() != Some("ExternalName")
        && spec.selector.as_ref().is_some_and(|s| !s.is_empty())
}
