//! `cpu/tensor-parallel/`: a set of per-rank cores is consistent, and a mismatched rank is
//! refused with the reason.

use gnomon_fixtures::sample::{CoreDraft, CAP, GRANULARITY};
use gnomon_format::{errors::TensorParallelError as E, tensor_parallel::check, Manifest, PeerRange};

use crate::{accepted, ensure, refused, Case, Verdict};

const CLAIM: &str = "tensor-parallel-readiness";

/// Two ranks of the sample: rank 1 holds its own pointers (shifted by one buffer), which
/// is data, not shape.
fn two_ranks() -> (Manifest, Manifest) {
    let mut rank0 = CoreDraft::sample();
    rank0.manifest.context.tp_world_size = 2;
    let mut rank1 = rank0.clone();
    rank1.manifest.context.tp_rank = 1;
    rank1.kernel_mut().params[8..16].copy_from_slice(&(gnomon_fixtures::sample::BASE + 2 * GRANULARITY).to_le_bytes());
    (rank0.manifest, rank1.manifest)
}

fn mismatch(alter: fn(&mut Manifest), what: &'static str) -> impl Fn(&mut crate::Ctx) -> Result<(), Verdict> {
    move |_| {
        let (rank0, mut rank1) = two_ranks();
        alter(&mut rank1);
        refused(check(&[&rank0, &rank1]), |e| matches!(e, E::Mismatch { rank: 1, what: w } if w.contains(what)))
            .map(drop)
    }
}

pub fn cases() -> Vec<Case> {
    vec![
        Case::new("cpu/tensor-parallel/consistent-ranks-accepted", CLAIM, |_| {
            let (rank0, rank1) = two_ranks();
            accepted(check(&[&rank1, &rank0]), "checking two consistent ranks")
        }),
        Case::new(
            "cpu/tensor-parallel/flags-mismatch-refused",
            CLAIM,
            mismatch(|m| m.templates[0].flags.explicit = Some(9), "flags"),
        ),
        Case::new(
            "cpu/tensor-parallel/layout-mismatch-refused",
            CLAIM,
            mismatch(|m| m.modules[0].functions[0].params[3].size = 8, "parameter layouts"),
        ),
        Case::new(
            "cpu/tensor-parallel/template-shape-mismatch-refused",
            CLAIM,
            mismatch(
                |m| m.templates[0].nodes[3].op = gnomon_format::NodeOp::EventRecord { event: "e".into() },
                "nodes",
            ),
        ),
        Case::new(
            "cpu/tensor-parallel/buffer-mismatch-refused",
            CLAIM,
            mismatch(|m| m.buffers[2].size /= 2, "buffer layout"),
        ),
        Case::new("cpu/tensor-parallel/missing-rank-refused", CLAIM, |_| {
            let (rank0, mut rank1) = two_ranks();
            rank1.context.tp_rank = 2;
            refused(check(&[&rank0, &rank1]), |e| *e == E::MissingRank { rank: 1 }).map(drop)
        }),
        Case::new("cpu/tensor-parallel/duplicate-rank-refused", CLAIM, |_| {
            let (rank0, _) = two_ranks();
            refused(check(&[&rank0, &rank0]), |e| *e == E::DuplicateRank { rank: 0 }).map(drop)
        }),
        Case::new("cpu/tensor-parallel/world-size-refused", CLAIM, |_| {
            let (rank0, _) = two_ranks();
            refused(check(&[&rank0]), |e| matches!(e, E::WorldSize { found: 2, expected: 1, .. })).map(drop)
        }),
        Case::new("cpu/tensor-parallel/peer-mapped-ranks-accepted", CLAIM, |_| {
            let (mut rank0, rank1) = peered_ranks();
            // A second range: the last shard, up to where rank 1's last buffer ends.
            let (offset, size) = *rank1.mapped_ranges().last().expect("the sample maps shards");
            rank0.peers.push(PeerRange { offset, size, address: rank0.peers[0].address + CAP, ..rank0.peers[0] });
            accepted(check(&[&rank0, &rank1]), "checking a rank that maps its peer's first and last shards")
        }),
        Case::new("cpu/tensor-parallel/peer-range-splitting-a-shard-refused", CLAIM, |_| {
            let (mut rank0, rank1) = peered_ranks();
            rank0.peers[0].size = GRANULARITY;
            refused(check(&[&rank0, &rank1]), |e| matches!(e, E::PeerSplitsShard { rank: 0, index: 0, peer: 1, .. }))
                .map(drop)
        }),
        Case::new("cpu/tensor-parallel/peer-range-past-used-refused", CLAIM, |_| {
            let (mut rank0, mut rank1) = peered_ranks();
            // Both ranks leave their last buffer out, so rank 1 uses less than its arena.
            for m in [&mut rank0, &mut rank1] {
                let last = m.buffers.iter().enumerate().max_by_key(|(_, b)| b.offset).map(|(i, _)| i);
                m.buffers.remove(last.expect("the sample has buffers"));
            }
            let used = rank1.used_end();
            ensure(used < rank1.arena.size, || format!("the sample uses its whole arena ({used:#x})"))?;
            rank0.peers[0].offset = used;
            refused(check(&[&rank0, &rank1]), |e| matches!(e, E::PeerUnused { rank: 0, index: 0, peer: 1, .. }))
                .map(drop)
        }),
    ]
}

/// Rank 0 maps the first shard of rank 1's arena; rank 1 maps nothing.
fn peered_ranks() -> (Manifest, Manifest) {
    let mut rank0 = CoreDraft::peered().manifest;
    rank0.peers[0].size = CAP;
    let mut rank1 = CoreDraft::sample().manifest;
    (rank1.context.tp_rank, rank1.context.tp_world_size) = (1, 2);
    (rank0, rank1)
}
