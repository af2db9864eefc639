//! `cpu/`: the export contract, checked without a GPU: the rules of flags, plans, shards,
//! capture order and rank sets (`gnomon_fixtures::rules`), every validation rule of the
//! manifest, and the report's own writing.

pub mod manifest;
mod report;

use gnomon_fixtures::rules::{self, Check};

use crate::{Case, Verdict};

pub fn cases() -> Vec<Case> {
    let before = rules::before_the_manifest().into_iter().map(case);
    let after = rules::after_the_manifest().into_iter().map(case);
    before.chain(manifest::cases()).chain(after).chain(report::cases()).collect()
}

fn case(check: Check) -> Case {
    let Check { id, claim, run } = check;
    Case::new(&id, claim, move |_| run().map_err(Verdict::Failed))
}
