//! Random-number generators a core's kernels read from device memory (v3): PyTorch's
//! graph-safe Philox state, a seed and an offset that each replay of a captured graph
//! reads, and that PyTorch advances on the host before every replay. A restore that
//! launched such a template from its stored state would draw the same numbers at every
//! launch; the core says where the offset lies and how far each launch moves it.

use serde::{Deserialize, Serialize};

use crate::BufferRef;

/// One generator: where its seed and offset lie (each a 64-bit integer), the offset the
/// producing program would have written before its next replay, and the templates that
/// draw from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Generator {
    pub seed: BufferRef,
    pub offset: BufferRef,
    pub next_offset: u64,
    pub draws: Vec<Draws>,
}

/// A template that draws from a generator: how far one launch advances the offset
/// (PyTorch's whole-graph increment), and its outputs after the launches the producing
/// program's next replays would have made, each from the loaded state with the offset
/// written as that replay would write it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Draws {
    pub template: String,
    pub increment: u64,
    pub next_launches: Vec<DrawnLaunch>,
}

/// One launch of a drawing template at `offset`, and the digest of each output it gave.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct DrawnLaunch {
    pub offset: u64,
    pub outputs: Vec<Drawn>,
}

/// An output's digest after one drawing launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Drawn {
    pub buffer: String,
    pub sha256: String,
}

impl Generator {
    /// The offset the `launch`-th launch (from 0) of `draws` after the export writes, as
    /// the producing program's replays would: `None` where it would overflow.
    pub fn offset_of(&self, draws: &Draws, launch: u64) -> Option<u64> {
        draws.increment.checked_mul(launch)?.checked_add(self.next_offset)
    }
}
