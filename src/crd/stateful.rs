//! Moves that carry state (`spec.stateful` of a `MigrationPolicy`): whether
//! StatefulSets and Deployments that mount PersistentVolumeClaims may move,
//! and the Jobs that hand their data over. The hooks travel in each
//! `WorkloadMigration` the policy starts and are signed with it.
//!
//! Pure: the types, their schema and their field checks. Ferry builds each
//! hook's Job itself from the image, command and arguments given here, so
//! a hook can ask for nothing a plain container cannot do.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Duration;

/// The longest a hook may run.
pub const MAX_HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// How long a hook may run when its `timeout` is unset.
pub const DEFAULT_HOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Whether the policy's moves may carry state, and how the data travels.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatefulMoves {
    /// Let StatefulSets, and Deployments that mount PersistentVolumeClaims,
    /// move. Off by default: such a workload is refused with
    /// `StatefulNotAllowed`. Their claims are created empty in the target
    /// (with the target's default StorageClass); the hooks move the data.
    #[serde(default)]
    pub enabled: bool,
    /// Jobs that hand the data over. Without them the claims arrive empty.
    #[serde(default, skip_serializing_if = "DataHooks::is_empty")]
    pub hooks: DataHooks,
}

/// The two hooks of a stateful move. Each runs as a Job with the
/// workload's claims mounted at `/ferry/claims/<claim>` and the move
/// described in `FERRY_*` environment variables.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataHooks {
    /// Runs in the source cluster, with the source's claims mounted read
    /// only, before the request is sent. A failure ends the move before
    /// anything reaches the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<DataHook>,
    /// Runs in the target cluster, with the fresh claims mounted, before
    /// the workload is created there. A failure rolls the move back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<DataHook>,
}

impl DataHooks {
    /// Whether neither hook is set.
    pub fn is_empty(&self) -> bool {
        self.export.is_none() && self.import.is_none()
    }
}

/// One hook: a single container, run once.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataHook {
    /// The container image. In the target, the receiver's image rules
    /// apply to it as to the workload's own images.
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// The entrypoint (the image's own when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub command: Vec<String>,
    /// Arguments to the entrypoint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub args: Vec<String>,
    /// How long the Job may run before it counts as failed (`"10m"`, the
    /// default; at most `24h`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
}

impl DataHook {
    /// The hook's time limit.
    pub fn timeout(&self) -> std::time::Duration {
        self.timeout
            .as_ref()
            .and_then(|t| t.to_std().ok())
            .unwrap_or(DEFAULT_HOOK_TIMEOUT)
    }

    /// Every problem with this hook, as `(field, message)`.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.image.trim().is_empty() {
            out.push(("image".into(), "must name an image".into()));
        }
        if let Some(timeout) = &self.timeout {
            match timeout.to_std() {
                Err(error) => out.push(("timeout".into(), error.to_string())),
                Ok(t) if t.is_zero() || t > MAX_HOOK_TIMEOUT => out.push((
                    "timeout".into(),
                    format!("{} is not between 1s and 24h", timeout.as_str()),
                )),
                Ok(_) => {}
            }
        }
        out
    }
}

impl StatefulMoves {
    /// Every problem, as `(field under spec.stateful, message)`.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, hook) in [
            ("export", &self.hooks.export),
            ("import", &self.hooks.import),
        ] {
            if let Some(hook) = hook {
                for (field, message) in hook.problems() {
                    out.push((format!("hooks.{name}.{field}"), message));
                }
            }
        }
        if !self.enabled && !self.hooks.is_empty() {
            out.push((
                "enabled".into(),
                "hooks are set but stateful moves are not enabled".into(),
            ));
        }
        out
    }
}

/// Which hook a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum HookKind {
    /// In the source, before the request is sent.
    Export,
    /// In the target, before the workload is created.
    Import,
}

/// Where a hook's Job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum HookState {
    /// The Job is created and has not ended.
    Running,
    /// The Job completed.
    Succeeded,
    /// The Job failed, ran past its timeout or was removed.
    Failed,
}

/// One hook's run, as the side that ran it reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookRun {
    /// Which hook.
    pub hook: HookKind,
    /// The Job's name, in the workload's namespace.
    pub job: String,
    /// Where it stands.
    pub state: HookState,
    /// Why it failed, from the Job's condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_are_checked_field_by_field_and_need_the_switch() {
        let bad = StatefulMoves {
            enabled: false,
            hooks: DataHooks {
                export: Some(DataHook {
                    image: " ".into(),
                    timeout: Some(Duration::new("48h")),
                    ..DataHook::default()
                }),
                import: None,
            },
        };
        let fields: Vec<String> = bad.problems().into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            ["hooks.export.image", "hooks.export.timeout", "enabled"]
        );
        let good = StatefulMoves {
            enabled: true,
            hooks: DataHooks {
                export: None,
                import: Some(DataHook {
                    image: "restic/restic:0.17".into(),
                    ..DataHook::default()
                }),
            },
        };
        assert!(good.problems().is_empty());
        assert_eq!(good.hooks.import.unwrap().timeout(), DEFAULT_HOOK_TIMEOUT);
    }
}
