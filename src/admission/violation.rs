//! Why the receiver refuses an incoming request: a reason from a small fixed
//! set (for `status.reason` and a metric label), the field at fault, and a
//! sentence that says what was wrong and what is allowed. Never carries
//! secret values: only names, paths and numbers.

/// A refused request. `reason` is one of [`reasons::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason} at {field}: {message}")]
pub struct Violation {
    /// CamelCase, one of [`reasons::ALL`]: for `status.reason` and metric
    /// labels.
    pub reason: &'static str,
    /// Where, as a path into the request: `spec.template.spec.containers[1].image`,
    /// or `secrets[0].type` for an object travelling with the workload.
    pub field: String,
    /// What was wrong there, and what is allowed.
    pub message: String,
}

impl Violation {
    pub(crate) fn new(
        reason: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Violation {
            reason,
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The reasons a [`Violation`] carries.
pub mod reasons {
    /// The workload is not an `apps/v1` Deployment, or a travelling object
    /// is of a kind that does not travel.
    pub const UNSUPPORTED_KIND: &str = "UnsupportedKind";
    /// A field has the wrong JSON type, or a required one is missing.
    pub const INVALID_MANIFEST: &str = "InvalidManifest";
    /// A Pod Security Standards `baseline` control.
    pub const POD_SECURITY_BASELINE: &str = "PodSecurityBaseline";
    /// A Pod Security Standards `restricted` control (beyond baseline).
    pub const POD_SECURITY_RESTRICTED: &str = "PodSecurityRestricted";
    /// The pod's ServiceAccount, its token, or a travelling ServiceAccount.
    pub const SERVICE_ACCOUNT_NOT_ALLOWED: &str = "ServiceAccountNotAllowed";
    /// `nodeName`, a toleration, a PriorityClass or a RuntimeClass.
    pub const SCHEDULING_NOT_ALLOWED: &str = "SchedulingNotAllowed";
    /// A volume kind, a claim, a CSI driver or a projected source.
    pub const VOLUME_NOT_ALLOWED: &str = "VolumeNotAllowed";
    /// A `resourceClaims` entry (devices through dynamic resource allocation).
    pub const RESOURCE_CLAIM_NOT_ALLOWED: &str = "ResourceClaimNotAllowed";
    /// A Secret or ConfigMap that neither travels nor is allow-listed.
    pub const REFERENCE_NOT_ALLOWED: &str = "ReferenceNotAllowed";
    /// A travelling Secret that is not `Opaque`.
    pub const SECRET_TYPE_NOT_ALLOWED: &str = "SecretTypeNotAllowed";
    /// An image outside the registry allow-list, or not a valid reference.
    pub const IMAGE_NOT_ALLOWED: &str = "ImageNotAllowed";
    /// Replicas, CPU or memory over a cap, per request or in total.
    pub const CAP_EXCEEDED: &str = "CapExceeded";
    /// A CPU or memory cap is set and a container requests none.
    pub const RESOURCES_MISSING: &str = "ResourcesMissing";
    /// The peer sent more requests than its rate limit.
    pub const RATE_LIMITED: &str = "RateLimited";
    /// The receiver's own `spec.admission` cannot be read (fails closed).
    pub const INVALID_ADMISSION_CONFIG: &str = "InvalidAdmissionConfig";
    /// A travelling Service with `externalIPs`, of type `ExternalName`, or
    /// of a type the receiver does not allow.
    pub const SERVICE_NOT_ALLOWED: &str = "ServiceNotAllowed";
    /// A travelling object's selector may pick pods that are not the moved
    /// workload's, or none of them.
    pub const SELECTOR_NOT_ALLOWED: &str = "SelectorNotAllowed";
    /// A travelling object that reaches beyond the moved workload: an
    /// autoscaler of another target, a budget that forbids every eviction,
    /// NetworkPolicy egress rules not allowed, or too many objects.
    pub const DEPENDENT_NOT_ALLOWED: &str = "DependentNotAllowed";
    /// A stateful workload, a claim or an import hook from a peer whose
    /// `admission.claims.allow` is off.
    pub const CLAIMS_NOT_ALLOWED: &str = "ClaimsNotAllowed";

    /// Every reason, for metrics that register their label values up front.
    pub const ALL: &[&str] = &[
        UNSUPPORTED_KIND,
        INVALID_MANIFEST,
        POD_SECURITY_BASELINE,
        POD_SECURITY_RESTRICTED,
        SERVICE_ACCOUNT_NOT_ALLOWED,
        SCHEDULING_NOT_ALLOWED,
        VOLUME_NOT_ALLOWED,
        RESOURCE_CLAIM_NOT_ALLOWED,
        REFERENCE_NOT_ALLOWED,
        SECRET_TYPE_NOT_ALLOWED,
        IMAGE_NOT_ALLOWED,
        CAP_EXCEEDED,
        RESOURCES_MISSING,
        RATE_LIMITED,
        INVALID_ADMISSION_CONFIG,
        SERVICE_NOT_ALLOWED,
        SELECTOR_NOT_ALLOWED,
        DEPENDENT_NOT_ALLOWED,
        CLAIMS_NOT_ALLOWED,
    ];
}
