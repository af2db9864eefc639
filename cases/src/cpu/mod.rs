//! `cpu/`: the export contract, checked without a GPU.

mod capture;
mod contract;
mod flags;
pub mod manifest;
mod report;
mod shards;
mod tensor_parallel;

use crate::Case;

pub fn cases() -> Vec<Case> {
    [
        flags::cases(),
        contract::cases(),
        manifest::cases(),
        shards::cases(),
        capture::cases(),
        tensor_parallel::cases(),
        report::cases(),
    ]
    .concat()
}
