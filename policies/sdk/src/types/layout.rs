//! The canonical ABI's layout of each record in a 32-bit memory: its size,
//! alignment and the offset of every field. A type whose Rust layout
//! differed would not compile for wasm32. Built for wasm32 only; it holds
//! assertions and must never hold code.

use super::*;
use std::mem::{align_of, offset_of, size_of};

const _: () = {
    assert!(size_of::<Text>() == 8 && align_of::<Text>() == 4);
    assert!(size_of::<List<Label>>() == 8 && align_of::<List<Label>>() == 4);
    assert!(size_of::<Maybe<u64>>() == 16 && align_of::<Maybe<u64>>() == 8);
    assert!(size_of::<Maybe<f64>>() == 16 && align_of::<Maybe<f64>>() == 8);
    assert!(size_of::<bool>() == 1);

    assert!(size_of::<Resources>() == 16 && align_of::<Resources>() == 8);
    assert!(offset_of!(Resources, memory_bytes) == 8);

    assert!(size_of::<Label>() == 16 && align_of::<Label>() == 4);
    assert!(offset_of!(Label, value) == 8);

    assert!(size_of::<Maybe<u32>>() == 8 && align_of::<Maybe<u32>>() == 4);
    assert!(size_of::<Maybe<Strategy>>() == 2 && align_of::<Maybe<Strategy>>() == 1);

    assert!(size_of::<Cluster>() == 144 && align_of::<Cluster>() == 8);
    assert!(offset_of!(Cluster, region) == 8);
    assert!(offset_of!(Cluster, labels) == 16);
    assert!(offset_of!(Cluster, ready) == 24);
    assert!(offset_of!(Cluster, allocatable) == 32);
    assert!(offset_of!(Cluster, requested) == 48);
    assert!(offset_of!(Cluster, cpu_utilization) == 64);
    assert!(offset_of!(Cluster, memory_utilization) == 80);
    assert!(offset_of!(Cluster, cpu_core_hour_price) == 96);
    assert!(offset_of!(Cluster, memory_gib_hour_price) == 112);
    assert!(offset_of!(Cluster, carbon_intensity) == 128);

    assert!(size_of::<Workload>() == 168 && align_of::<Workload>() == 8);
    assert!(offset_of!(Workload, name) == 8);
    assert!(offset_of!(Workload, kind) == 16);
    assert!(offset_of!(Workload, cluster) == 24);
    assert!(offset_of!(Workload, replicas) == 32);
    assert!(offset_of!(Workload, requests) == 40);
    assert!(offset_of!(Workload, cpu_usage_millis) == 56);
    assert!(offset_of!(Workload, memory_usage_bytes) == 72);
    assert!(offset_of!(Workload, hourly_cost) == 88);
    assert!(offset_of!(Workload, labels) == 104);
    assert!(offset_of!(Workload, seconds_since_migration) == 112);
    assert!(offset_of!(Workload, last_move_ms) == 128);
    assert!(offset_of!(Workload, moves_last_day) == 144);
    assert!(offset_of!(Workload, moves_last_week) == 148);
    assert!(offset_of!(Workload, disruption_cost) == 152);

    assert!(size_of::<Thresholds>() == 48 && align_of::<Thresholds>() == 8);
    assert!(offset_of!(Thresholds, min_savings_ratio) == 8);
    assert!(offset_of!(Thresholds, max_target_cpu_utilization) == 16);
    assert!(offset_of!(Thresholds, max_target_memory_utilization) == 24);
    assert!(offset_of!(Thresholds, cooldown_seconds) == 32);
    assert!(offset_of!(Thresholds, max_migrations_per_cycle) == 40);

    assert!(size_of::<Snapshot>() == 80 && align_of::<Snapshot>() == 8);
    assert!(offset_of!(Snapshot, clusters) == 8);
    assert!(offset_of!(Snapshot, workloads) == 16);
    assert!(offset_of!(Snapshot, thresholds) == 24);
    assert!(offset_of!(Snapshot, parameters) == 72);

    assert!(size_of::<Reasons>() == 48 && align_of::<Reasons>() == 8);
    assert!(offset_of!(Reasons, target_hourly_cost) == 8);
    assert!(offset_of!(Reasons, hourly_savings) == 16);
    assert!(offset_of!(Reasons, payback_hours) == 24);
    assert!(offset_of!(Reasons, detail) == 40);
    assert!(size_of::<Maybe<Reasons>>() == 56 && align_of::<Maybe<Reasons>>() == 8);

    assert!(size_of::<Decision>() == 120 && align_of::<Decision>() == 8);
    assert!(offset_of!(Decision, name) == 8);
    assert!(offset_of!(Decision, from_cluster) == 16);
    assert!(offset_of!(Decision, to_cluster) == 24);
    assert!(offset_of!(Decision, hourly_savings) == 32);
    assert!(offset_of!(Decision, reason) == 40);
    assert!(offset_of!(Decision, replicas) == 48);
    assert!(offset_of!(Decision, strategy) == 56);
    assert!(offset_of!(Decision, reasons) == 64);
};
