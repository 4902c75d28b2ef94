//! The canonical ABI layout of the records lowered by hand: each field's
//! offset and each record's size, for the records of contract v1
//! (`policies/wit/policy.wit`) and contract v2 (`policies/wit/v2/policy.wit`),
//! whose records start with v1's fields and append their own. The tests pin them to wasmtime's own layout.
//! Constants only: nothing here touches a guest.

/// Offsets of the fields of `workload`, and its size.
pub(super) mod workload_at {
    pub const NAMESPACE: usize = 0;
    pub const NAME: usize = 8;
    pub const KIND: usize = 16;
    pub const CLUSTER: usize = 24;
    pub const REPLICAS: usize = 32;
    pub const REQUESTS: usize = 40;
    pub const CPU_USAGE_MILLIS: usize = 56;
    pub const MEMORY_USAGE_BYTES: usize = 72;
    pub const HOURLY_COST: usize = 88;
    pub const LABELS: usize = 104;
    pub const SECONDS_SINCE_MIGRATION: usize = 112;
    /// The end of a contract v1 `workload`.
    pub const SIZE: usize = 128;
    // Contract v2 appends these.
    pub const LAST_MOVE_MS: usize = 128;
    pub const MOVES_LAST_DAY: usize = 144;
    pub const MOVES_LAST_WEEK: usize = 148;
    pub const DISRUPTION_COST: usize = 152;
    pub const SIZE_V2: usize = 168;
}

/// Offsets of the fields of `cluster`, and its size.
pub(super) mod cluster_at {
    pub const NAME: usize = 0;
    pub const REGION: usize = 8;
    pub const LABELS: usize = 16;
    pub const READY: usize = 24;
    pub const ALLOCATABLE: usize = 32;
    pub const REQUESTED: usize = 48;
    pub const CPU_UTILIZATION: usize = 64;
    pub const MEMORY_UTILIZATION: usize = 80;
    pub const CPU_CORE_HOUR_PRICE: usize = 96;
    pub const MEMORY_GIB_HOUR_PRICE: usize = 112;
    /// The end of a contract v1 `cluster`.
    pub const SIZE: usize = 128;
    // Contract v2 appends this.
    pub const CARBON_INTENSITY: usize = 128;
    pub const SIZE_V2: usize = 144;
}

/// A `label` is two strings: key at 0, value at 8.
pub(super) const LABEL_SIZE: usize = 16;

/// The block's alignment: enough for a `labels` array.
pub(super) const BLOCK_ALIGN: u32 = 4;

/// The layout above must be the one wasmtime derives from the WIT types.
#[cfg(test)]
mod tests {
    use wasmtime::component::ComponentType;

    use super::super::abi::CanonicalAbiInfo;
    use super::super::v1::{ClusterShape, WorkloadShape};
    use super::*;
    use crate::contract::{Cluster, Label, Resources, Workload};

    /// Offsets of consecutive fields with the given ABIs, and the size.
    fn layout(fields: &[CanonicalAbiInfo]) -> Vec<usize> {
        let mut offset = 0;
        let mut out: Vec<usize> = fields
            .iter()
            .map(|abi| abi.next_field32_size(&mut offset))
            .collect();
        out.push(offset.next_multiple_of(8));
        out
    }

    #[test]
    fn workload_layout_is_the_canonical_one() {
        let abi = [
            String::ABI,
            String::ABI,
            String::ABI,
            String::ABI,
            u32::ABI,
            Resources::ABI,
            Option::<u64>::ABI,
            Option::<u64>::ABI,
            Option::<f64>::ABI,
            Vec::<Label>::ABI,
            Option::<u64>::ABI,
            Option::<u64>::ABI,
            u32::ABI,
            u32::ABI,
            Option::<f64>::ABI,
        ];
        use workload_at as at;
        let ours = [
            at::NAMESPACE,
            at::NAME,
            at::KIND,
            at::CLUSTER,
            at::REPLICAS,
            at::REQUESTS,
            at::CPU_USAGE_MILLIS,
            at::MEMORY_USAGE_BYTES,
            at::HOURLY_COST,
            at::LABELS,
            at::SECONDS_SINCE_MIGRATION,
            at::LAST_MOVE_MS,
            at::MOVES_LAST_DAY,
            at::MOVES_LAST_WEEK,
            at::DISRUPTION_COST,
            at::SIZE_V2,
        ];
        assert_eq!(layout(&abi), ours);
        assert_eq!(Workload::SIZE32, at::SIZE_V2);
        // Contract v1's record is the first eleven fields.
        let v1 = layout(&abi[..11]);
        assert_eq!(v1[..11], ours[..11]);
        assert_eq!(v1[11], at::SIZE);
        assert_eq!(WorkloadShape::SIZE32, at::SIZE);
    }

    #[test]
    fn cluster_layout_is_the_canonical_one() {
        let abi = [
            String::ABI,
            String::ABI,
            Vec::<Label>::ABI,
            bool::ABI,
            Resources::ABI,
            Resources::ABI,
            Option::<f64>::ABI,
            Option::<f64>::ABI,
            Option::<f64>::ABI,
            Option::<f64>::ABI,
            Option::<f64>::ABI,
        ];
        use cluster_at as at;
        let ours = [
            at::NAME,
            at::REGION,
            at::LABELS,
            at::READY,
            at::ALLOCATABLE,
            at::REQUESTED,
            at::CPU_UTILIZATION,
            at::MEMORY_UTILIZATION,
            at::CPU_CORE_HOUR_PRICE,
            at::MEMORY_GIB_HOUR_PRICE,
            at::CARBON_INTENSITY,
            at::SIZE_V2,
        ];
        assert_eq!(layout(&abi), ours);
        assert_eq!(Cluster::SIZE32, at::SIZE_V2);
        // Contract v1's record is the first ten fields.
        let v1 = layout(&abi[..10]);
        assert_eq!(v1[..10], ours[..10]);
        assert_eq!(v1[10], at::SIZE);
        assert_eq!(ClusterShape::SIZE32, at::SIZE);
    }

    #[test]
    fn label_layout_is_the_canonical_one() {
        assert_eq!(layout(&[String::ABI, String::ABI]), [0, 8, LABEL_SIZE]);
        assert_eq!(Label::SIZE32, LABEL_SIZE);
    }
}
