//! Tensor-parallel readiness: the per-rank cores of one model must agree on everything but
//! their data: world size, arena layout, buffers, function layouts, and every template's
//! flags and node shape. Kernel parameter bytes may differ (they hold per-rank pointers).

use std::collections::BTreeSet;

use crate::{
    errors::TensorParallelError as E,
    {Manifest, NodeOp, Template},
};

/// Checks that `cores` are the ranks 0..N of one world of size N and that they agree.
pub fn check(cores: &[&Manifest]) -> Result<(), E> {
    let first = cores.first().ok_or(E::Empty)?;
    let mut ranks = BTreeSet::new();
    for m in cores {
        let rank = m.context.tp_rank;
        if m.context.tp_world_size as usize != cores.len() {
            return Err(E::WorldSize { rank, found: m.context.tp_world_size, expected: cores.len() });
        }
        if !ranks.insert(rank) {
            return Err(E::DuplicateRank { rank });
        }
    }
    if let Some(rank) = (0..cores.len() as u32).find(|r| !ranks.contains(r)) {
        return Err(E::MissingRank { rank });
    }
    let reference = cores.iter().find(|m| m.context.tp_rank == 0).unwrap_or(first);
    for m in cores {
        agree(reference, m).map_err(|what| E::Mismatch { rank: m.context.tp_rank, what })?;
    }
    peers_whole(cores, &reference.mapped_ranges())
}

/// Every peer range covers whole shards of what its peer maps (`mapped`, one layout for
/// all: the ranks agree on their arenas and buffers): replay maps, and shares, only that,
/// and a window maps a peer's shards whole.
fn peers_whole(cores: &[&Manifest], mapped: &[(u64, u64)]) -> Result<(), E> {
    let used = mapped.last().map_or(0, |&(offset, len)| offset + len);
    for m in cores {
        for (index, p) in m.peers.iter().enumerate() {
            let (rank, peer, end) = (m.context.tp_rank, p.rank, p.offset.saturating_add(p.size));
            if end > used {
                return Err(E::PeerUnused { rank, index, peer, end, used });
            }
            let starts = mapped.iter().any(|&(offset, _)| offset == p.offset);
            let ends = mapped.iter().any(|&(offset, len)| offset + len == end);
            if !(starts && ends) {
                return Err(E::PeerSplitsShard { rank, index, peer, offset: p.offset, end });
            }
        }
    }
    Ok(())
}

/// Returns what differs, in words.
fn agree(a: &Manifest, b: &Manifest) -> Result<(), String> {
    if a.context.sm != b.context.sm {
        return Err(format!("SM ({} vs {})", a.context.sm, b.context.sm));
    }
    if (a.arena.size, a.arena.shard_cap) != (b.arena.size, b.arena.shard_cap) {
        return Err("arena size or shard cap".into());
    }
    if a.buffers != b.buffers {
        return Err("buffer layout".into());
    }
    let same_layouts = a.modules.len() == b.modules.len()
        && a.modules.iter().zip(&b.modules).all(|(x, y)| x.id == y.id && x.functions == y.functions);
    if !same_layouts {
        return Err("module functions or parameter layouts".into());
    }
    if a.templates.len() != b.templates.len() {
        return Err(format!("template count ({} vs {})", a.templates.len(), b.templates.len()));
    }
    for (ta, tb) in a.templates.iter().zip(&b.templates) {
        template(ta, tb)?;
    }
    Ok(())
}

fn template(a: &Template, b: &Template) -> Result<(), String> {
    if a.name != b.name {
        return Err(format!("template names (`{}` vs `{}`)", a.name, b.name));
    }
    if a.flags != b.flags {
        return Err(format!("flags of template `{}`", a.name));
    }
    let same_nodes = a.nodes.len() == b.nodes.len()
        && a.nodes.iter().zip(&b.nodes).all(|(x, y)| x.id == y.id && node_shape(&x.op) == node_shape(&y.op));
    if !same_nodes || a.edges != b.edges {
        return Err(format!("nodes or edges of template `{}`", a.name));
    }
    Ok(())
}

/// A node without its per-rank data.
fn node_shape(op: &NodeOp) -> String {
    match op {
        NodeOp::Kernel(k) => {
            format!("kernel {}:{} {:?} {:?} {}", k.module, k.function, k.grid, k.block, k.shared_mem_bytes)
        }
        other => format!("{other:?}"),
    }
}
