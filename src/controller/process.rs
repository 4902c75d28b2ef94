//! The standard process metrics (`process_resident_memory_bytes`,
//! `process_cpu_seconds_total`, `process_open_fds`, `process_max_fds`,
//! `process_virtual_memory_bytes`, `process_start_time_seconds`), read from
//! `/proc/self` on every scrape. Where `/proc` is missing or unreadable the
//! metric is left out rather than reported as 0.

use std::path::Path;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// Clock ticks per second of the times in `/proc/<pid>/stat`: the kernel's
/// `USER_HZ`, 100 on every architecture Ferry is built for (the value
/// Prometheus's own procfs library assumes too).
const USER_HZ: f64 = 100.0;

/// Reads the process metrics at each scrape.
#[derive(Debug)]
pub(crate) struct ProcessCollector;

/// One reading of the process's figures; `None` where `/proc` said nothing.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ProcessStats {
    pub resident_bytes: Option<f64>,
    pub virtual_bytes: Option<f64>,
    pub cpu_seconds: Option<f64>,
    pub start_time_seconds: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
}

impl ProcessStats {
    /// Reads `/proc/self` (and `/proc/stat` for the boot time).
    pub(crate) fn read() -> Self {
        let proc = Path::new("/proc");
        let read = |path: &str| std::fs::read_to_string(proc.join(path)).ok();
        let mut stats = ProcessStats::default();
        if let Some(status) = read("self/status") {
            stats.resident_bytes = status_kib(&status, "VmRSS:").map(|k| k * 1024.0);
            stats.virtual_bytes = status_kib(&status, "VmSize:").map(|k| k * 1024.0);
        }
        if let Some(stat) = read("self/stat") {
            let fields = stat_fields(&stat);
            let ticks = |n: usize| fields.get(n).and_then(|f| f.parse::<f64>().ok());
            stats.cpu_seconds = ticks(13)
                .zip(ticks(14))
                .map(|(user, system)| (user + system) / USER_HZ);
            let boot = read("stat").as_deref().and_then(boot_time);
            stats.start_time_seconds = ticks(21)
                .zip(boot)
                .map(|(start, boot)| boot + start / USER_HZ);
        }
        stats.open_fds = std::fs::read_dir(proc.join("self/fd"))
            .ok()
            .map(|entries| entries.count() as f64);
        stats.max_fds = read("self/limits").as_deref().and_then(max_open_files);
        stats
    }
}

/// A `Name:   1234 kB` line of `/proc/self/status`, in KiB.
fn status_kib(status: &str, name: &str) -> Option<f64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The fields of `/proc/self/stat`, numbered from 0 as in `proc(5)` minus
/// one. The command name (field 2) may hold spaces and parentheses, so the
/// fields after it are counted from its last `)`.
fn stat_fields(stat: &str) -> Vec<&str> {
    let Some(close) = stat.rfind(')') else {
        return Vec::new();
    };
    let mut fields = vec!["pid", "comm"];
    fields.extend(stat[close + 1..].split_whitespace());
    fields
}

/// `btime` of `/proc/stat`: the boot time, in seconds since the epoch.
fn boot_time(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<f64> {
    limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let stats = ProcessStats::read();
        let gauges = [
            (
                "process_resident_memory",
                "Resident memory size",
                Some(Unit::Bytes),
                stats.resident_bytes,
            ),
            (
                "process_virtual_memory",
                "Virtual memory size",
                Some(Unit::Bytes),
                stats.virtual_bytes,
            ),
            (
                "process_start_time",
                "Start time of the process since the Unix epoch",
                Some(Unit::Seconds),
                stats.start_time_seconds,
            ),
            (
                "process_open_fds",
                "Open file descriptors",
                None,
                stats.open_fds,
            ),
            (
                "process_max_fds",
                "Most file descriptors the process may open",
                None,
                stats.max_fds,
            ),
        ];
        for (name, help, unit, value) in gauges {
            if let Some(value) = value {
                let gauge = ConstGauge::new(value);
                let metric =
                    encoder.encode_descriptor(name, help, unit.as_ref(), gauge.metric_type())?;
                gauge.encode(metric)?;
            }
        }
        if let Some(seconds) = stats.cpu_seconds {
            let counter = ConstCounter::new(seconds);
            let metric = encoder.encode_descriptor(
                "process_cpu",
                "User and system CPU time spent",
                Some(&Unit::Seconds),
                counter.metric_type(),
            )?;
            counter.encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_survive_a_command_name_with_spaces_and_parentheses() {
        let stat =
            "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 12345 1000 200";
        let fields = stat_fields(stat);
        assert_eq!(fields[2], "S");
        assert_eq!(fields[13], "250");
        assert_eq!(fields[14], "50");
        assert_eq!(fields[21], "12345");
    }

    #[test]
    fn status_limits_and_boot_time_lines_are_read() {
        assert_eq!(
            status_kib("Name:\tferry\nVmRSS:\t  2048 kB\n", "VmRSS:"),
            Some(2048.0)
        );
        assert_eq!(
            max_open_files(
                "Max open files            1024                 524288               files\n"
            ),
            Some(1024.0)
        );
        assert_eq!(
            boot_time("cpu 1 2\nbtime 1700000000\n"),
            Some(1_700_000_000.0)
        );
    }

    /// On Linux every figure is there and plausible.
    #[test]
    fn this_process_has_every_figure() {
        let stats = ProcessStats::read();
        assert!(stats.resident_bytes.is_some_and(|b| b > 1e6), "{stats:?}");
        assert!(stats.virtual_bytes.is_some_and(|b| b > 1e6), "{stats:?}");
        assert!(stats.cpu_seconds.is_some_and(|s| s >= 0.0), "{stats:?}");
        assert!(stats.open_fds.is_some_and(|n| n >= 3.0), "{stats:?}");
        assert!(stats.max_fds.is_some_and(|n| n >= 3.0), "{stats:?}");
        let now = jiff::Timestamp::now().as_second() as f64;
        assert!(
            stats
                .start_time_seconds
                .is_some_and(|t| t <= now + 1.0 && t > now - 86_400.0 * 30.0),
            "{stats:?}"
        );
    }
}
