//! The evaluation memory budget of `ferry run`, checked against the memory
//! limit of the operator's own pod (its cgroup) at start-up, so that policy
//! limits that add up past what the pod may hold are refused, not run into
//! an out-of-memory kill.

use std::path::Path;

const MIB: u64 = 1 << 20;

/// The budget when the process has no memory limit and none is asked for.
pub const UNLIMITED_DEFAULT: u64 = 1024 * MIB;

/// The memory limit of this process's cgroup, if it has one: cgroup v2's
/// `memory.max`, else cgroup v1's `memory.limit_in_bytes` (whose "no limit"
/// is a huge number, treated as none).
pub fn cgroup_memory_limit() -> Option<u64> {
    read_limit(Path::new("/sys/fs/cgroup/memory.max"))
        .or_else(|| read_limit(Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes")))
}

fn read_limit(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    parse_limit(&text)
}

/// `max`, an unreadable value, or anything of 2^60 bytes or more: no limit.
fn parse_limit(text: &str) -> Option<u64> {
    let value: u64 = text.trim().parse().ok()?;
    (value < 1 << 60).then_some(value)
}

/// The evaluation memory budget in bytes: `asked_mib` if given, which must
/// leave the pod room for everything else (at most three quarters of its
/// limit); otherwise half the pod's limit, or [`UNLIMITED_DEFAULT`].
pub fn evaluation_budget(asked_mib: Option<u64>, pod_limit: Option<u64>) -> Result<u64, String> {
    match (asked_mib.map(|m| m.saturating_mul(MIB)), pod_limit) {
        (Some(0), _) => Err("--evaluation-memory-mib must be at least 1".to_owned()),
        (Some(asked), Some(limit)) if asked > limit / 4 * 3 => Err(format!(
            "--evaluation-memory-mib {} does not fit this pod: its memory limit is {} MiB, and \
             evaluations may take at most three quarters of it ({} MiB) so the operator keeps room",
            asked / MIB,
            limit / MIB,
            limit / 4 * 3 / MIB
        )),
        (Some(asked), _) => Ok(asked),
        (None, Some(limit)) => Ok((limit / 2).max(MIB)),
        (None, None) => Ok(UNLIMITED_DEFAULT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroup_files_read_as_limits() {
        assert_eq!(parse_limit("536870912\n"), Some(512 * MIB));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712"), None);
        assert_eq!(parse_limit(""), None);
    }

    #[test]
    fn the_budget_defaults_to_half_the_pod_and_must_leave_it_room() {
        let pod = Some(512 * MIB);
        assert_eq!(evaluation_budget(None, pod), Ok(256 * MIB));
        assert_eq!(evaluation_budget(None, None), Ok(UNLIMITED_DEFAULT));
        assert_eq!(evaluation_budget(Some(384), pod), Ok(384 * MIB));
        let err = evaluation_budget(Some(400), pod).unwrap_err();
        assert!(err.contains("memory limit is 512 MiB"), "{err}");
        assert!(evaluation_budget(Some(0), None).is_err());
        assert_eq!(evaluation_budget(Some(4096), None), Ok(4096 * MIB));
    }
}
