//! Function attributes, kernel-node launch attributes and typed edges: read from the
//! driver at export, restored at replay, given to `cuLaunchKernelEx` by fixtures. Each is
//! converted between the format's types and the driver's in one place.

use cudarc::driver::sys::{self, CUlaunchAttributeID as Id};

use super::{check, Result};
use crate::errors::CudaError;
use gnomon_format::{ClusterScheduling, EdgeKind, FunctionAttributes, LaunchAttributes, MemSyncDomain};

use sys::CUfunction_attribute as F;

fn get_function(f: sys::CUfunction, attribute: F) -> Result<i32> {
    let mut value = 0;
    // SAFETY: `f` is a live function; writes one int.
    check("cuFuncGetAttribute", unsafe { sys::cuFuncGetAttribute(&mut value, attribute, f) })?;
    Ok(value)
}

/// What the driver reports for a function: the dynamic shared memory it allows always,
/// the others where they differ from the driver's default.
pub(super) fn function_attributes(f: sys::CUfunction) -> Result<FunctionAttributes> {
    let mut cluster = [0u32; 3];
    let dims = [
        F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
        F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
        F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
    ];
    for (dim, attribute) in cluster.iter_mut().zip(dims) {
        *dim = get_function(f, attribute)? as u32;
    }
    let carveout = get_function(f, F::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT)?;
    let non_portable = get_function(f, F::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED)?;
    let scheduling = get_function(f, F::CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE)?;
    Ok(FunctionAttributes {
        max_dynamic_shared_size_bytes: Some(get_function(f, F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)? as u32),
        preferred_shared_memory_carveout: (carveout != -1).then_some(carveout),
        required_cluster_dim: (cluster != [0; 3]).then_some(cluster),
        non_portable_cluster_size_allowed: (non_portable != 0).then_some(true),
        cluster_scheduling_policy: (scheduling != 0).then(|| scheduling_of(scheduling as u32)).transpose()?,
    })
}

/// Sets every recorded attribute whose value the driver does not already report (a
/// cluster shape compiled into the kernel cannot be set again, only matched).
pub(super) fn set_function_attributes(f: sys::CUfunction, function: &str, a: &FunctionAttributes) -> Result<()> {
    let cluster = a.required_cluster_dim.unwrap_or([0; 3]);
    let wanted = [
        (
            F::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            "max-dynamic-shared-size-bytes",
            a.max_dynamic_shared_size_bytes.map(|v| v as i32),
        ),
        (
            F::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
            "preferred-shared-memory-carveout",
            a.preferred_shared_memory_carveout,
        ),
        (
            F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
            "required-cluster-dim",
            a.required_cluster_dim.map(|_| cluster[0] as i32),
        ),
        (
            F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
            "required-cluster-dim",
            a.required_cluster_dim.map(|_| cluster[1] as i32),
        ),
        (
            F::CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH,
            "required-cluster-dim",
            a.required_cluster_dim.map(|_| cluster[2] as i32),
        ),
        (
            F::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
            "non-portable-cluster-size-allowed",
            a.non_portable_cluster_size_allowed.map(i32::from),
        ),
        (
            F::CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
            "cluster-scheduling-policy",
            a.cluster_scheduling_policy.map(|p| scheduling_value(p) as i32),
        ),
    ];
    for (attribute, name, value) in wanted {
        let Some(value) = value else { continue };
        if get_function(f, attribute)? == value {
            continue;
        }
        // SAFETY: `f` is a live function.
        let status = unsafe { sys::cuFuncSetAttribute(f, attribute, value) };
        status.result().map_err(|e| CudaError::Attribute {
            call: "cuFuncSetAttribute",
            target: format!("function `{function}`"),
            attribute: name,
            value: value.to_string(),
            code: super::describe(e),
        })?;
    }
    Ok(())
}

fn scheduling_of(value: u32) -> Result<ClusterScheduling> {
    match value {
        0 => Ok(ClusterScheduling::Default),
        1 => Ok(ClusterScheduling::Spread),
        2 => Ok(ClusterScheduling::LoadBalancing),
        other => Err(CudaError::Unsupported(format!("cluster scheduling policy {other} has no name in format v2"))),
    }
}

fn scheduling_value(p: ClusterScheduling) -> u32 {
    scheduling_policy(p) as u32
}

fn scheduling_policy(p: ClusterScheduling) -> sys::CUclusterSchedulingPolicy {
    use sys::CUclusterSchedulingPolicy as P;
    match p {
        ClusterScheduling::Default => P::CU_CLUSTER_SCHEDULING_POLICY_DEFAULT,
        ClusterScheduling::Spread => P::CU_CLUSTER_SCHEDULING_POLICY_SPREAD,
        ClusterScheduling::LoadBalancing => P::CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING,
    }
}

/// A launch attribute value with one member set and every other byte zero.
fn value(set: impl FnOnce(&mut sys::CUlaunchAttributeValue)) -> sys::CUlaunchAttributeValue {
    // SAFETY: the union is plain data; zero is a valid value of every member.
    let mut value: sys::CUlaunchAttributeValue = unsafe { std::mem::zeroed() };
    set(&mut value);
    value
}

/// One recorded launch attribute: the driver's id and value, and the format's name and
/// spelling of the value, for errors.
struct LaunchValue {
    id: Id,
    name: &'static str,
    shown: String,
    value: sys::CUlaunchAttributeValue,
}

fn launch_values(a: &LaunchAttributes) -> Vec<LaunchValue> {
    use sys::CUlaunchMemSyncDomain as D;
    let one = |id, name, shown: String, value| LaunchValue { id, name, shown, value };
    let mut values = Vec::new();
    if let Some(priority) = a.priority {
        values.push(one(
            Id::CU_LAUNCH_ATTRIBUTE_PRIORITY,
            "priority",
            priority.to_string(),
            value(|v| v.priority = priority),
        ));
    }
    if let Some([x, y, z]) = a.cluster_dim {
        let dim = sys::CUlaunchAttributeValue_union__bindgen_ty_1 { x, y, z };
        let set = value(|v| v.clusterDim = dim);
        values.push(one(Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, "cluster-dim", format!("{:?}", [x, y, z]), set));
    }
    if let Some(p) = a.cluster_scheduling_policy {
        let set = value(|v| v.clusterSchedulingPolicyPreference = scheduling_policy(p));
        let id = Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
        values.push(one(id, "cluster-scheduling-policy", format!("{p:?}"), set));
    }
    if let Some(cooperative) = a.cooperative {
        let set = value(|v| v.cooperative = cooperative.into());
        values.push(one(Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE, "cooperative", cooperative.to_string(), set));
    }
    if let Some(domain) = a.mem_sync_domain {
        let driver = match domain {
            MemSyncDomain::Default => D::CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT,
            MemSyncDomain::Remote => D::CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE,
        };
        let set = value(|v| v.memSyncDomain = driver);
        values.push(one(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN, "mem-sync-domain", format!("{domain:?}"), set));
    }
    values
}

/// The attributes for `cuLaunchKernelEx`; `programmatic` lets the launch overlap the
/// previous kernel on its stream (programmatic dependent launch).
pub(super) fn launch_attribute_list(a: &LaunchAttributes, programmatic: bool) -> Vec<sys::CUlaunchAttribute> {
    let serialization = value(|v| v.programmaticStreamSerializationAllowed = 1);
    let extra = programmatic.then_some((Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, serialization));
    let recorded = launch_values(a).into_iter().map(|v| (v.id, v.value));
    recorded.chain(extra).map(|(id, value)| sys::CUlaunchAttribute { id, pad: [0; 4], value }).collect()
}

/// A kernel node's launch attributes, each where it differs from the driver's default.
pub(super) fn node_launch_attributes(node: sys::CUgraphNode) -> Result<LaunchAttributes> {
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
        unsafe { get(Id::CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE)?.clusterSchedulingPolicyPreference }
            as u32;
    let cooperative = unsafe { get(Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE)?.cooperative };
    let domain = unsafe { get(Id::CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN)?.memSyncDomain } as u32;
    let cluster = [dim.x, dim.y, dim.z];
    let clustered = cluster != [0; 3] && cluster != [1; 3];
    Ok(LaunchAttributes {
        priority: (priority != 0).then_some(priority),
        cluster_dim: clustered.then_some(cluster),
        // Captured nodes report `spread` whether or not a cluster was asked for; the policy
        // means something only with a cluster, so it is kept only with one.
        cluster_scheduling_policy: clustered.then(|| scheduling_of(scheduling)).transpose()?,
        cooperative: (cooperative != 0).then_some(true),
        mem_sync_domain: (domain != 0).then_some(MemSyncDomain::Remote),
    })
}

/// Restores recorded launch attributes on a rebuilt kernel node.
///
/// # Safety
/// `node` must be a kernel node of a live graph used by this thread alone.
pub(super) unsafe fn set_node_launch_attributes(node: sys::CUgraphNode, a: &LaunchAttributes) -> Result<()> {
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

/// The format's kind of an edge the driver reports.
pub(super) fn edge_kind(data: &sys::CUgraphEdgeData) -> Result<EdgeKind> {
    match (data.type_ as u32, data.from_port as u32, data.to_port) {
        (0, 0, 0) => Ok(EdgeKind::Full),
        (1, sys::CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, 0) => Ok(EdgeKind::Programmatic),
        (1, sys::CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER, 0) => Ok(EdgeKind::LaunchOrder),
        (ty, from, to) => Err(CudaError::Unsupported(format!(
            "an edge of type {ty} from port {from} to port {to} has no name in the format (docs/format-v3.md)"
        ))),
    }
}

pub(super) fn edge_data(kind: EdgeKind) -> sys::CUgraphEdgeData {
    let (type_, from_port) = match kind {
        EdgeKind::Full => (0, sys::CU_GRAPH_KERNEL_NODE_PORT_DEFAULT),
        EdgeKind::Programmatic => (1, sys::CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC),
        EdgeKind::LaunchOrder => (1, sys::CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER),
    };
    sys::CUgraphEdgeData { from_port: from_port as u8, to_port: 0, type_, reserved: [0; 5] }
}
