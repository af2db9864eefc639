//! Memory PyTorch holds outside the arena. Eager work whose tensors no graph reads (a
//! prefill, a warm-up) may run there, under `gnomon.torch.outside_arena()`: its blocks
//! then stay in PyTorch's own pool, whose cache `torch.cuda.graph()` empties before a
//! capture run there too, as it does without the kit. A graph must not read a tensor there, for no core maps it:
//! every node's addresses are looked up in PyTorch's live blocks outside the arena, and
//! the first one found there refuses the export by name. Free blocks are not looked in: a
//! kernel's parameters are whole structs copied from the launching thread's stack, whose
//! unused fields may hold any stale address. Seen on the H200: in one of three exports of
//! one program, an int64 comparison's parameter held an address in PyTorch's default pool
//! 560 bytes in, where the other two held none.

use std::ops::Range;

use gnomon_core::cuda::{NodeInfo, NodeKind};

use crate::errors::KitError;

/// A live block PyTorch holds outside the arena, and the pool it belongs to as Python says
/// it ("PyTorch's default pool", "PyTorch's pool (1, 0)").
#[derive(Clone, Debug)]
pub struct LiveBlock {
    pub range: Range<u64>,
    pub pool: String,
}

/// Refuses the first node of the templates, `(name, nodes)`, that holds an address in one
/// of `outside`.
pub fn check<'n>(
    templates: impl IntoIterator<Item = (&'n str, &'n Vec<NodeInfo>)>,
    outside: &[LiveBlock],
) -> Result<(), KitError> {
    if outside.is_empty() {
        return Ok(());
    }
    for (template, nodes) in templates {
        for node in nodes {
            if let Some((what, address, block)) = pointing(&node.kind, outside) {
                let (template, node, pool) = (template.to_owned(), node.id.0, block.pool.clone());
                return Err(KitError::PointsOutside { template, node, what, address, pool });
            }
        }
    }
    Ok(())
}

/// The first address `kind` holds in `outside`: a kernel's parameter word, a memset's
/// destination, a copy's ends; said as the place that holds it.
fn pointing<'s>(kind: &NodeKind, outside: &'s [LiveBlock]) -> Option<(String, u64, &'s LiveBlock)> {
    let within = |address: u64| outside.iter().find(|b| b.range.contains(&address));
    match kind {
        NodeKind::Kernel { function, params, layout, .. } => {
            gnomon_core::params::words(layout, params).find_map(|(param, at, word)| {
                let place = if at == 0 { String::new() } else { format!(" (byte {at})") };
                within(word).map(|b| (format!("kernel `{function}` parameter {param}{place}"), word, b))
            })
        }
        NodeKind::Memset { dst, .. } => within(*dst).map(|b| ("the memset's destination".to_owned(), *dst, b)),
        NodeKind::Memcpy { dst, src, .. } => [("destination", *dst), ("source", *src)]
            .into_iter()
            .find_map(|(end, a)| within(a).map(|b| (format!("the copy's {end}"), a, b))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use gnomon_core::format::{LaunchAttributes, ParamSlot};

    use super::*;

    fn default_pool() -> Vec<LiveBlock> {
        vec![LiveBlock { range: 0x7f00_0000_0000..0x7f00_0020_0000, pool: "PyTorch's default pool".into() }]
    }

    fn kernel(words: &[u64]) -> NodeKind {
        let layout = (0..words.len() as u64).map(|i| ParamSlot { offset: 8 * i, size: 8 }).collect();
        let params = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let (grid, block) = ([1; 3], [32, 1, 1]);
        let function = "vectorized_elementwise_kernel".into();
        NodeKind::Kernel { function, grid, block, shared_mem: 0, params, layout, launch: LaunchAttributes::default() }
    }

    #[test]
    fn a_kernel_reading_a_tensor_outside_the_arena_is_refused_naming_the_parameter_and_pool() {
        let outside = default_pool();
        let arena_tensor = 0x6000_0000_0000;
        assert!(pointing(&kernel(&[arena_tensor, 4096]), &outside).is_none());
        let (what, address, block) = pointing(&kernel(&[arena_tensor, 0x7f00_0010_0000]), &outside).unwrap();
        let refused =
            KitError::PointsOutside { template: "b8".into(), node: 7, what, address, pool: block.pool.clone() };
        insta::assert_snapshot!(refused.to_string(), @"template `b8` node 7: kernel `vectorized_elementwise_kernel` parameter 1 holds 0x7f0000100000, in PyTorch's default pool outside the gnomon arena, which no core maps: allocate what a graph reads while the arena routes tensors (not under gnomon.torch.outside_arena(), and on the thread that called use_arena), and capture into gnomon.torch.graph_pool()");
    }

    #[test]
    fn copies_and_memsets_are_looked_up_at_both_ends() {
        let outside = default_pool();
        let copy = NodeKind::Memcpy { dst: 0x6000_0000_0000, src: 0x7f00_0000_0100, bytes: 64, host: None };
        assert_eq!(pointing(&copy, &outside).unwrap().0, "the copy's source");
        let memset = NodeKind::Memset { dst: 0x7f00_001f_ff00, value: 0, element_size: 4, count: 64 };
        assert_eq!(pointing(&memset, &outside).unwrap().1, 0x7f00_001f_ff00);
        assert!(pointing(&NodeKind::Empty, &outside).is_none());
        // Just past the block's end is not in it.
        assert!(pointing(&kernel(&[0x7f00_0020_0000]), &outside).is_none());
    }
}
