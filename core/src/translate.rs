//! The format's terms in the driver's, both ways, in one place: function and launch
//! attributes, edge kinds, parameter slots, and the flags contract at instantiation.
//! `cuda/` knows only the driver; export records through here and replay restores
//! through here.

use gnomon_format::{
    contract::GraphExecutable,
    flags::{InstantiateFlags, ReportsFlags},
    ClusterScheduling, EdgeKind, FunctionAttributes, LaunchAttributes, MemSyncDomain, ParamSlot,
};

use crate::cuda::{
    CudaError, Dependency, Function, FunctionAttribute as A, GraphExec, KernelAttributes, ParamInfo, RetainedGraph,
    SchedulingPolicy, SyncDomain,
};

type Result<T> = std::result::Result<T, CudaError>;

impl From<ParamInfo> for ParamSlot {
    fn from(ParamInfo { offset, size }: ParamInfo) -> Self {
        ParamSlot { offset, size }
    }
}

/// A function's parameter layout as the format records it.
pub fn param_slots(layout: &[ParamInfo]) -> Vec<ParamSlot> {
    layout.iter().map(|&p| p.into()).collect()
}

/// Instantiation under the flags contract: flags it refuses never reach the driver and
/// create no executable.
pub trait Instantiate {
    fn instantiate(&self, flags: u64) -> Result<GraphExec>;
}

impl Instantiate for RetainedGraph {
    fn instantiate(&self, flags: u64) -> Result<GraphExec> {
        self.instantiate_as_given(InstantiateFlags::new(flags)?.bits())
    }
}

impl ReportsFlags for GraphExec {
    fn instantiated_flags(&self) -> u64 {
        self.flags()
    }

    fn reported_flags(&self) -> u64 {
        GraphExec::reported_flags(self)
    }
}

impl GraphExecutable for GraphExec {
    fn template_name(&self) -> &str {
        self.template()
    }

    fn flags(&self) -> u64 {
        GraphExec::flags(self)
    }
}

const CLUSTER: [A; 3] = [A::RequiredClusterWidth, A::RequiredClusterHeight, A::RequiredClusterDepth];

/// What the format records of a function: the dynamic shared memory it allows always, the
/// others where they differ from the driver's default.
pub fn function_attributes(f: &Function) -> Result<FunctionAttributes> {
    let mut cluster = [0u32; 3];
    for (dim, attribute) in cluster.iter_mut().zip(CLUSTER) {
        *dim = f.attribute(attribute)? as u32;
    }
    let carveout = f.attribute(A::PreferredSharedMemoryCarveout)?;
    let non_portable = f.attribute(A::NonPortableClusterSizeAllowed)?;
    let scheduling = f.attribute(A::ClusterSchedulingPolicyPreference)?;
    Ok(FunctionAttributes {
        max_dynamic_shared_size_bytes: Some(f.attribute(A::MaxDynamicSharedSizeBytes)? as u32),
        preferred_shared_memory_carveout: (carveout != -1).then_some(carveout),
        required_cluster_dim: (cluster != [0; 3]).then_some(cluster),
        non_portable_cluster_size_allowed: (non_portable != 0).then_some(true),
        cluster_scheduling_policy: (scheduling != 0)
            .then(|| SchedulingPolicy::from_value(scheduling as u32).map(cluster_scheduling))
            .transpose()?,
    })
}

/// Sets every recorded attribute whose value the driver does not already report (a
/// cluster shape compiled into the kernel cannot be set again, only matched).
pub fn set_function_attributes(f: &Function, a: &FunctionAttributes) -> Result<()> {
    let cluster = a.required_cluster_dim.map(|dim| dim.map(|d| d as i32));
    let scheduling = a.cluster_scheduling_policy.map(|p| scheduling_policy(p).value() as i32);
    let wanted = [
        (A::MaxDynamicSharedSizeBytes, a.max_dynamic_shared_size_bytes.map(|v| v as i32)),
        (A::PreferredSharedMemoryCarveout, a.preferred_shared_memory_carveout),
        (CLUSTER[0], cluster.map(|c| c[0])),
        (CLUSTER[1], cluster.map(|c| c[1])),
        (CLUSTER[2], cluster.map(|c| c[2])),
        (A::NonPortableClusterSizeAllowed, a.non_portable_cluster_size_allowed.map(i32::from)),
        (A::ClusterSchedulingPolicyPreference, scheduling),
    ];
    for (attribute, value) in wanted {
        let Some(value) = value else { continue };
        if f.attribute(attribute)? != value {
            f.set_attribute(attribute, value)?;
        }
    }
    Ok(())
}

/// The attributes to set on a launch or rebuilt node for what the format recorded.
pub fn kernel_attributes(a: &LaunchAttributes) -> KernelAttributes {
    KernelAttributes {
        priority: a.priority,
        cluster_dim: a.cluster_dim,
        cluster_scheduling: a.cluster_scheduling_policy.map(scheduling_policy),
        cooperative: a.cooperative,
        mem_sync_domain: a.mem_sync_domain.map(|d| match d {
            MemSyncDomain::Default => SyncDomain::Default,
            MemSyncDomain::Remote => SyncDomain::Remote,
        }),
    }
}

/// What the format records of a node's launch attributes read back: each where it
/// differs from the driver's default.
pub fn recorded_launch(read: &KernelAttributes) -> LaunchAttributes {
    let cluster = read.cluster_dim.unwrap_or([0; 3]);
    let clustered = cluster != [0; 3] && cluster != [1; 3];
    LaunchAttributes {
        priority: read.priority.filter(|&p| p != 0),
        cluster_dim: clustered.then_some(cluster),
        // Captured nodes report `spread` whether or not a cluster was asked for; the policy
        // means something only with a cluster, so it is kept only with one.
        cluster_scheduling_policy: read.cluster_scheduling.filter(|_| clustered).map(cluster_scheduling),
        cooperative: read.cooperative.filter(|&c| c),
        mem_sync_domain: read.mem_sync_domain.filter(|&d| d == SyncDomain::Remote).map(|_| MemSyncDomain::Remote),
    }
}

fn cluster_scheduling(p: SchedulingPolicy) -> ClusterScheduling {
    match p {
        SchedulingPolicy::Default => ClusterScheduling::Default,
        SchedulingPolicy::Spread => ClusterScheduling::Spread,
        SchedulingPolicy::LoadBalancing => ClusterScheduling::LoadBalancing,
    }
}

fn scheduling_policy(p: ClusterScheduling) -> SchedulingPolicy {
    match p {
        ClusterScheduling::Default => SchedulingPolicy::Default,
        ClusterScheduling::Spread => SchedulingPolicy::Spread,
        ClusterScheduling::LoadBalancing => SchedulingPolicy::LoadBalancing,
    }
}

pub fn edge_kind(d: Dependency) -> EdgeKind {
    match d {
        Dependency::Full => EdgeKind::Full,
        Dependency::Programmatic => EdgeKind::Programmatic,
        Dependency::LaunchOrder => EdgeKind::LaunchOrder,
    }
}

pub fn dependency(kind: EdgeKind) -> Dependency {
    match kind {
        EdgeKind::Full => Dependency::Full,
        EdgeKind::Programmatic => Dependency::Programmatic,
        EdgeKind::LaunchOrder => Dependency::LaunchOrder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a node without attributes reads back records nothing; what the format records
    /// reads back as itself.
    #[test]
    fn launch_attributes_read_back_record_only_what_differs_from_the_default() {
        let plain = KernelAttributes {
            priority: Some(0),
            cluster_dim: Some([1, 1, 1]),
            cluster_scheduling: Some(SchedulingPolicy::Spread),
            cooperative: Some(false),
            mem_sync_domain: Some(SyncDomain::Default),
        };
        assert_eq!(recorded_launch(&plain), LaunchAttributes::default());
        let recorded = LaunchAttributes {
            priority: Some(-3),
            cluster_dim: Some([2, 1, 1]),
            cluster_scheduling_policy: Some(ClusterScheduling::LoadBalancing),
            cooperative: Some(true),
            mem_sync_domain: Some(MemSyncDomain::Remote),
        };
        assert_eq!(recorded_launch(&kernel_attributes(&recorded)), recorded);
    }

    #[test]
    fn edge_kinds_and_dependencies_map_one_to_one() {
        for kind in [EdgeKind::Full, EdgeKind::Programmatic, EdgeKind::LaunchOrder] {
            assert_eq!(edge_kind(dependency(kind)), kind);
        }
    }
}
