//! The input-size estimate checked before a snapshot is lowered, and the
//! exact measure of what a packed placement puts in one block. Pure
//! arithmetic over the snapshot: it must never touch a guest.

use super::layout::{BLOCK_ALIGN, LABEL_SIZE, cluster_at, workload_at};
use crate::contract::{self, Label};

/// What the snapshot occupies once lowered into guest memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InputSize {
    /// Roughly the whole: every string plus the fixed part of every record.
    pub total: usize,
    /// Exactly the strings of workloads and clusters, labels included: the
    /// ones lowered by hand, which `Placement::Packed` can place in one block.
    pub strings: usize,
    /// The `labels` arrays of workloads and clusters, each with room to be
    /// aligned, for a block that holds them too.
    pub arrays: usize,
}

pub(crate) fn input_size(s: &contract::Snapshot) -> InputSize {
    let labels = |labels: &[Label]| -> (usize, usize) {
        let strings = labels.iter().map(|l| l.key.len() + l.value.len()).sum();
        (labels.len() * LABEL_SIZE, strings)
    };
    let (mut fixed, mut strings, mut arrays) = (0, 0, 0);
    for c in &s.clusters {
        let (label_fixed, label_strings) = labels(&c.labels);
        fixed += cluster_at::SIZE_V2 + label_fixed;
        arrays += label_fixed + BLOCK_ALIGN as usize - 1;
        strings += c.name.len() + c.region.len() + label_strings;
    }
    for w in &s.workloads {
        let (label_fixed, label_strings) = labels(&w.labels);
        fixed += workload_at::SIZE_V2 + label_fixed;
        arrays += label_fixed + BLOCK_ALIGN as usize - 1;
        strings +=
            w.namespace.len() + w.name.len() + w.kind.len() + w.cluster.len() + label_strings;
    }
    InputSize {
        total: 64 + fixed + strings + s.parameters.len(),
        strings,
        arrays,
    }
}
