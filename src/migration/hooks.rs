//! The Jobs that hand a stateful workload's data over (pure, no client):
//! each side builds its hook's Job itself from the image, command and
//! arguments of the signed request, so a hook can ask for nothing beyond a
//! plain, unprivileged container with the workload's claims mounted.
//!
//! What a hook sees:
//! - each claim mounted at `/ferry/claims/<claim>` (read only for export);
//! - `FERRY_HOOK` (`export` or `import`), `FERRY_REQUEST_ID` (the same on
//!   both sides, a key for the data), `FERRY_MIGRATION`, `FERRY_NAMESPACE`,
//!   `FERRY_WORKLOAD`, `FERRY_WORKLOAD_KIND`, `FERRY_SOURCE_CLUSTER`,
//!   `FERRY_TARGET_CLUSTER`, `FERRY_CLAIMS` (the claim names, space
//!   separated) and `FERRY_CLAIMS_DIR`.

use serde_json::{Value, json};

use crate::crd::{DataHook, HookKind, HookState, WorkloadMigrationSpec};

/// Where the claims are mounted in a hook's container.
pub const CLAIMS_DIR: &str = "/ferry/claims";

/// How often a hook's pod is retried before the Job fails.
const BACKOFF_LIMIT: u32 = 2;

/// How long a finished hook Job stays for its logs.
const KEEP_FINISHED_SECONDS: u32 = 3600;

/// The Job name of a move's hook: the move's name with `-export` or
/// `-import`, within the 63 characters a Job's pods' labels allow.
pub fn job_name(migration: &str, kind: HookKind) -> String {
    let suffix = match kind {
        HookKind::Export => "-export",
        HookKind::Import => "-import",
    };
    let room = 63 - suffix.len();
    let stem: String = migration.chars().take(room).collect();
    format!("{}{suffix}", stem.trim_end_matches('-'))
}

/// The hook `kind` of `spec`'s move, if it has one.
pub fn hook(spec: &WorkloadMigrationSpec, kind: HookKind) -> Option<&DataHook> {
    let hooks = spec.hooks.as_ref()?;
    match kind {
        HookKind::Export => hooks.export.as_ref(),
        HookKind::Import => hooks.import.as_ref(),
    }
}

/// The Job that runs `hook` for the move `migration` described by `spec`,
/// mounting the claims the move carries (`spec.claims`): one restricted container (non-root, no privilege
/// escalation, every capability dropped, the runtime's seccomp profile),
/// no ServiceAccount token, a deadline of the hook's timeout.
pub fn job(
    spec: &WorkloadMigrationSpec,
    migration: &str,
    kind: HookKind,
    hook: &DataHook,
) -> Value {
    let claims: Vec<&str> = spec
        .claims
        .iter()
        .filter_map(|c| c.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    let workload = &spec.workload;
    let field = |pointer: &str| {
        workload
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let read_only = kind == HookKind::Export;
    let volumes: Vec<Value> = claims
        .iter()
        .enumerate()
        .map(|(i, claim)| {
            json!({"name": format!("claim-{i}"),
                   "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only}})
        })
        .collect();
    let mounts: Vec<Value> = claims
        .iter()
        .enumerate()
        .map(|(i, claim)| {
            json!({"name": format!("claim-{i}"), "mountPath": format!("{CLAIMS_DIR}/{claim}"),
                   "readOnly": read_only})
        })
        .collect();
    let env = [
        (
            "FERRY_HOOK",
            match kind {
                HookKind::Export => "export".to_owned(),
                HookKind::Import => "import".to_owned(),
            },
        ),
        ("FERRY_REQUEST_ID", spec.request_id.clone()),
        ("FERRY_MIGRATION", migration.to_owned()),
        ("FERRY_NAMESPACE", spec.target_namespace.clone()),
        ("FERRY_WORKLOAD", field("/metadata/name")),
        ("FERRY_WORKLOAD_KIND", field("/kind")),
        ("FERRY_SOURCE_CLUSTER", spec.source_cluster.clone()),
        ("FERRY_TARGET_CLUSTER", spec.target_cluster.clone()),
        ("FERRY_CLAIMS", claims.join(" ")),
        ("FERRY_CLAIMS_DIR", CLAIMS_DIR.to_owned()),
    ]
    .map(|(name, value)| json!({"name": name, "value": value}));
    let mut container = json!({
        "name": "hook",
        "image": hook.image,
        "env": env,
        "volumeMounts": mounts,
        "securityContext": {
            "runAsNonRoot": true,
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    });
    if !hook.command.is_empty() {
        container["command"] = json!(hook.command);
    }
    if !hook.args.is_empty() {
        container["args"] = json!(hook.args);
    }
    let name = job_name(migration, kind);
    json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": BACKOFF_LIMIT,
            "activeDeadlineSeconds": hook.timeout().as_secs().max(1),
            "ttlSecondsAfterFinished": KEEP_FINISHED_SECONDS,
            "template": {
                "metadata": {"labels": {"ferry.dev/hook": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": false,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    })
}

/// Where a hook's Job stands, from its conditions; a failure carries the
/// Job's own words.
pub fn state(job: &Value) -> (HookState, Option<String>) {
    let conditions = job
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    let holds = |type_: &str| {
        conditions.iter().find(|c| {
            c.get("type").and_then(Value::as_str) == Some(type_)
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
    };
    if holds("Complete").is_some() {
        return (HookState::Succeeded, None);
    }
    if let Some(failed) = holds("Failed").or_else(|| holds("FailureTarget")) {
        let text = |key: &str| failed.get(key).and_then(Value::as_str).unwrap_or_default();
        let message = match (text("reason"), text("message")) {
            ("", "") => "the Job failed".to_owned(),
            (reason, "") => format!("the Job failed: {reason}"),
            ("", message) => format!("the Job failed: {message}"),
            (reason, message) => format!("the Job failed: {reason}: {message}"),
        };
        return (HookState::Failed, Some(message));
    }
    (HookState::Running, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> WorkloadMigrationSpec {
        serde_json::from_value(json!({
            "requestId": "abc", "sourceCluster": "a", "targetCluster": "b",
            "targetNamespace": "shop", "deadline": "2030-01-01T00:00:00Z",
            "role": "Source", "nonce": "n",
            "workload": {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}},
            "claims": [
                {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data-db-0"}},
                {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data-db-1"}},
            ],
        }))
        .unwrap()
    }

    #[test]
    fn a_hook_runs_restricted_with_the_claims_mounted() {
        let hook = DataHook {
            image: "registry.example/backup:1".into(),
            command: vec!["/bin/copy".into()],
            ..DataHook::default()
        };
        let job = job(&spec(), "db-123", HookKind::Export, &hook);
        assert_eq!(job["metadata"]["name"], "db-123-export");
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["automountServiceAccountToken"], false);
        let container = &pod["containers"][0];
        assert_eq!(container["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            container["volumeMounts"][1]["mountPath"],
            "/ferry/claims/data-db-1"
        );
        assert_eq!(container["volumeMounts"][1]["readOnly"], true);
        assert_eq!(
            pod["volumes"][0]["persistentVolumeClaim"]["claimName"],
            "data-db-0"
        );
        let env: Vec<(String, String)> = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().into(),
                    e["value"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert!(env.contains(&("FERRY_CLAIMS".into(), "data-db-0 data-db-1".into())));
        assert!(env.contains(&("FERRY_REQUEST_ID".into(), "abc".into())));
        assert!(env.contains(&("FERRY_WORKLOAD_KIND".into(), "StatefulSet".into())));
        assert_eq!(job["spec"]["activeDeadlineSeconds"], 600);
        let import = super::job(&spec(), "db-123", HookKind::Import, &hook);
        assert_eq!(
            import["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"]["readOnly"],
            false
        );
    }

    #[test]
    fn long_names_keep_their_suffix_within_a_label() {
        let name = job_name(&"m".repeat(63), HookKind::Import);
        assert_eq!(name.len(), 63);
        assert!(name.ends_with("-import"));
    }

    #[test]
    fn a_job_is_running_until_a_condition_says_otherwise() {
        let mut job = json!({"status": {"active": 1}});
        assert_eq!(state(&job), (HookState::Running, None));
        job["status"]["conditions"] = json!([{"type": "Failed", "status": "True",
            "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"}]);
        let (state_now, message) = state(&job);
        assert_eq!(state_now, HookState::Failed);
        assert!(message.unwrap().contains("BackoffLimitExceeded"));
        job["status"]["conditions"] = json!([{"type": "Complete", "status": "True"}]);
        assert_eq!(state(&job).0, HookState::Succeeded);
    }
}
