//! Collectives a core cannot hold. An NCCL kernel reads its communicator's state (channels,
//! peers' buffers, proxy flags), which NCCL allocated outside any arena and which a new
//! process rebuilds at other addresses, in a process that NCCL's bootstrap must join: no
//! replay can honour such a node, so the export refuses it by name.

use std::path::Path;

/// Why a kernel node cannot be exported as a collective, if it is one: by its kernel's
/// name (`ncclKernel_…`, `ncclDevKernel_…`) or the library that loaded its module.
pub fn refusal(kernel: &str, library: Option<&Path>) -> Option<&'static str> {
    let nccl_kernel = ["ncclKernel", "ncclDevKernel"].iter().any(|p| kernel.starts_with(p));
    let nccl_library =
        library.and_then(Path::file_name).is_some_and(|name| name.to_string_lossy().starts_with("libnccl"));
    (nccl_kernel || nccl_library).then_some(
        "an NCCL collective reads communicator state NCCL allocated outside the arena, which a new process \
         rebuilds elsewhere; keep NCCL out of the captured graph (an all-reduce over buffers in the kit's arena, \
         or the collective outside the capture)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::KitError;

    #[test]
    fn nccl_kernels_are_known_by_name_or_by_library() {
        let libnccl = Path::new("/usr/lib/x86_64-linux-gnu/libnccl.so.2");
        assert!(refusal("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", None).is_some());
        assert!(refusal("ncclKernel_AllGather_RING_LL_Sum_int8_t", None).is_some());
        assert!(refusal("some_renamed_kernel", Some(libnccl)).is_some());
        assert!(refusal("cross_device_reduce_1stage", Some(Path::new("/opt/vllm/_C.abi3.so"))).is_none());
        assert!(refusal("nvjet_sm90_tst_64x8", Some(Path::new("libcublasLt.so.13"))).is_none());
        let refused = KitError::Collective {
            template: "b8".into(),
            node: 41,
            kernel: "ncclDevKernel_AllReduce_Sum_bf16_RING_LL".into(),
            library: libnccl.display().to_string(),
            reason: refusal("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", Some(libnccl)).unwrap(),
        };
        insta::assert_snapshot!(refused.to_string(), @"template `b8` node 41: kernel `ncclDevKernel_AllReduce_Sum_bf16_RING_LL` of `/usr/lib/x86_64-linux-gnu/libnccl.so.2` cannot be exported: an NCCL collective reads communicator state NCCL allocated outside the arena, which a new process rebuilds elsewhere; keep NCCL out of the captured graph (an all-reduce over buffers in the kit's arena, or the collective outside the capture)");
    }
}
