//! Function attributes, kernel launch attributes and dependency types in the driver's own
//! terms: read from a function or a node, set on one, given to `cuLaunchKernelEx`. What
//! the format records of them is `crate::translate`'s business.

use cudarc::driver::sys::{self, CUlaunchAttributeID as Id};

use super::{check, Result};
use crate::errors::CudaError;

use sys::CUfunction_attribute as F;

/// A function attribute the harness reads or sets (`CUfunction_attribute`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FunctionAttribute {
    MaxDynamicSharedSizeBytes,
    PreferredSharedMemoryCarveout,
    RequiredClusterWidth,
    RequiredClusterHeight,
    RequiredClusterDepth,
    NonPortableClusterSizeAllowed,
    ClusterSchedulingPolicyPreference,
}

impl FunctionAttribute {
    fn raw(self) -> F {
        match self {
            Self::MaxDynamicSharedSizeBytes => F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            Self::PreferredSharedMemoryCarveout => F::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            Self::RequiredClusterWidth => F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
            Self::RequiredClusterHeight => F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
            Self::RequiredClusterDepth => F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
            Self::NonPortableClusterSizeAllowed => F::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
            Self::ClusterSchedulingPolicyPreference => F::CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
        }
    }

    /// The driver's name in kebab case, for errors.
    pub fn name(self) -> &'static str {
        match self {
            Self::MaxDynamicSharedSizeBytes => "max-dynamic-shared-size-bytes",
            Self::PreferredSharedMemoryCarveout => "preferred-shared-memory-carveout",
            Self::RequiredClusterWidth => "required-cluster-width",
            Self::RequiredClusterHeight => "required-cluster-height",
            Self::RequiredClusterDepth => "required-cluster-depth",
            Self::NonPortableClusterSizeAllowed => "non-portable-cluster-size-allowed",
            Self::ClusterSchedulingPolicyPreference => "cluster-scheduling-policy-preference",
        }
    }
}

pub(super) fn get_function(f: sys::CUfunction, attribute: FunctionAttribute) -> Result<i32> {
    let mut value = 0;
    // SAFETY: `f` is a live function; writes one int.
    check("cuFuncGetAttribute", unsafe { sys::cuFuncGetAttribute(&mut value, attribute.raw(), f) })?;
    Ok(value)
}

pub(super) fn set_function(f: sys::CUfunction, function: &str, attribute: FunctionAttribute, value: i32) -> Result<()> {
    // SAFETY: `f` is a live function.
    let status = unsafe { sys::cuFuncSetAttribute(f, attribute.raw(), value) };
    status.result().map_err(|e| CudaError::Attribute {
        call: "cuFuncSetAttribute",
        target: format!("function `{function}`"),
        attribute: attribute.name(),
        value: value.to_string(),
        code: super::describe(e),
    })
}

/// `CUclusterSchedulingPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulingPolicy {
    Default,
    Spread,
    LoadBalancing,
}

impl SchedulingPolicy {
    /// The policy of a value the driver reports (a function attribute's int, a launch
    /// attribute's enum).
    pub fn from_value(value: u32) -> Result<Self> {
        match value {
            0 => Ok(Self::Default),
            1 => Ok(Self::Spread),
            2 => Ok(Self::LoadBalancing),
            other => Err(CudaError::Unsupported(format!("cluster scheduling policy {other} is not one CUDA 13 names"))),
        }
    }

    pub fn value(self) -> u32 {
        self.raw() as u32
    }

    fn raw(self) -> sys::CUclusterSchedulingPolicy {
        use sys::CUclusterSchedulingPolicy as P;
        match self {
            Self::Default => P::CU_CLUSTER_SCHEDULING_POLICY_DEFAULT,
            Self::Spread => P::CU_CLUSTER_SCHEDULING_POLICY_SPREAD,
            Self::LoadBalancing => P::CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING,
        }
    }
}

/// `CUlaunchMemSyncDomain`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncDomain {
    Default,
    Remote,
}

impl SyncDomain {
    fn raw(self) -> sys::CUlaunchMemSyncDomain {
        use sys::CUlaunchMemSyncDomain as D;
        match self {
            Self::Default => D::CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT,
            Self::Remote => D::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE,
        }
    }

    fn from_value(value: u32) -> Result<Self> {
        match value {
            0 => Ok(Self::Default),
            1 => Ok(Self::Remote),
            other => Err(CudaError::Unsupported(format!("memory sync domain {other} is not one CUDA 13 names"))),
        }
    }
}

/// The launch attributes of a kernel launch or kernel node (`CUlaunchAttribute`) that the
/// harness sets or reads: `None` leaves the driver's default. A node read back has every
/// one set, to what the driver reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelAttributes {
    pub priority: Option<i32>,
    pub cluster_dim: Option<[u32; 3]>,
    pub cluster_scheduling: Option<SchedulingPolicy>,
    pub cooperative: Option<bool>,
    pub mem_sync_domain: Option<SyncDomain>,
}

/// A launch attribute value with one member set and every other byte zero.
fn value(set: impl FnOnce(&mut sys::CUlaunchAttributeValue)) -> sys::CUlaunchAttributeValue {
    // SAFETY: the union is plain data; zero is a valid value of every member.
    let mut value: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
    set(&mut value);
    value
}

/// One attribute to set: the driver's id and value, and its name and value, for errors.
struct LaunchValue {
    id: Id,
    name: &'static str,
    shown: String,
    value: sys::CUlaunchAttributeValue,
}

fn launch_values(a: &KernelAttributes) -> Vec<LaunchValue> {
    let one = |id, name, shown: String, value| LaunchValue { id, name, shown, value };
    let mut values = Vec::new();
    if let Some(priority) = a.priority {
        let set = value(|v| v.priority = priority);
        values.push(one(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY, "priority", priority.to_string(), set));
    }
    if let Some([x, y, z]) = a.cluster_dim {
        let dim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x, y, z };
        let set = value(|v| v.clusterDim = dim);
        values.push(one(Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, "cluster-dim", format!("{:?}", [x, y, z]), set));
    }
    if let Some(p) = a.cluster_scheduling {
        let set = value(|v| v.clusterSchedulingPolicyPreference = p.raw());
        let id = Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
        values.push(one(id, "cluster-scheduling-policy", format!("{p:?}"), set));
    }
    if let Some(cooperative) = a.cooperative {
        let set = value(|v| v.cooperative = cooperative.into());
        values.push(one(Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE, "cooperative", cooperative.to_string(), set));
    }
    if let Some(domain) = a.mem_sync_domain {
        let set = value(|v| v.memSyncDomain = domain.raw());
        values.push(one(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, "mem-sync-domain", format!("{domain:?}"), set));
    }
    values
}

/// The attributes for `cuLaunchKernelEx`; `programmatic` lets the launch overlap the
/// previous kernel on its stream (programmatic dependent launch).
pub(super) fn launch_attribute_list(a: &KernelAttributes, programmatic: bool) -> Vec<sys::CUlaunchAttribute> {
    let serialization = value(|v| v.programmaticStreamSerializationAllowed = 1);
    let extra = programmatic.then_some((Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, serialization));
    let recorded = launch_values(a).into_iter().map(|v| (v.id, v.value));
    recorded.chain(extra).map(|(id, value)| sys::CUlaunchAttribute { id, pad: [0; 4], value }).collect()
}

/// Every launch attribute of a kernel node, as the driver reports it.
pub(super) fn node_launch_attributes(node: sys::CUgraphNode) -> Result<KernelAttributes> {
    let get = |id: Id| {
        let mut read = value(|_| ());
        // SAFETY: `node` is a kernel node of a live graph; writes one union.
        check("cuGraphKernelNodeGetAttribute", unsafe { sys::cuGraphKernelNodeGetAttribute(node, id, &mut read) })?;
        Ok::<_, CudaError>(read)
    };
    // SAFETY (each read below): the member read is the one the attribute fills.
    let priority = unsafe { get(Id::CU_LAUNCH_ATTRIBUTE_PRIORITY)?.priority };
    let dim = unsafe { get(Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)?.clusterDim };
    let scheduling =
        unsafe { get(Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE)?.clusterSchedulingPolicyPreference };
    let cooperative = unsafe { get(Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE)?.cooperative };
    let domain = unsafe { get(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN)?.memSyncDomain };
    Ok(KernelAttributes {
        priority: Some(priority),
        cluster_dim: Some([dim.x, dim.y, dim.z]),
        cluster_scheduling: Some(SchedulingPolicy::from_value(scheduling as u32)?),
        cooperative: Some(cooperative != 0),
        mem_sync_domain: Some(SyncDomain::from_value(domain as u32)?),
    })
}

/// Sets launch attributes on a rebuilt kernel node.
///
/// # Safety
/// `node` must be a kernel node of a live graph used by this thread alone.
pub(super) unsafe fn set_node_launch_attributes(node: sys::CUgraphNode, a: &KernelAttributes) -> Result<()> {
    for LaunchValue { id, name, shown, value } in launch_values(a) {
        sys::cuGraphKernelNodeSetAttribute(node, id, &value).result().map_err(|e| CudaError::Attribute {
            call: "cuGraphKernelNodeSetAttribute",
            target: "the rebuilt node".into(),
            attribute: name,
            value: shown,
            code: super::describe(e),
        })?;
    }
    Ok(())
}

/// What a graph edge waits for (`CUgraphEdgeData`: its type and ports).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dependency {
    /// The upstream node completes (the default type and port).
    Full,
    /// A programmatic edge from the kernel port `PROGRAMMATIC`.
    Programmatic,
    /// A programmatic edge from the kernel port `LAUNCH_ORDER`.
    LaunchOrder,
}

pub(super) fn dependency(data: &sys::CUgraphEdgeData) -> Result<Dependency> {
    match (data.type_ as u32, data.from_port as u32, data.to_port) {
        (0, 0, 0) => Ok(Dependency::Full),
        (1, sys::CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, 0) => Ok(Dependency::Programmatic),
        (1, sys::CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER, 0) => Ok(Dependency::LaunchOrder),
        (ty, from, to) => Err(CudaError::Unsupported(format!(
            "an edge of type {ty} from port {from} to port {to} is not a dependency Gnomon knows"
        ))),
    }
}

pub(super) fn edge_data(dependency: Dependency) -> sys::CUgraphEdgeData {
    let (type_, from_port) = match dependency {
        Dependency::Full => (0, sys::CU_GRAPH_KERNEL_NODE_PORT_DEFAULT),
        Dependency::Programmatic => (1, sys::CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC),
        Dependency::LaunchOrder => (1, sys::CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER),
    };
    sys::CUgraphEdgeData { from_port: from_port as u8, to_port: 0, type_, reserved: [0; 5] }
}
