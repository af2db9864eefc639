//! The export contract without a GPU: core format v3 (v2 and v1 read as v3) and every
//! rule a core must satisfy before it may reach one. A core is a directory holding
//! `manifest.json`, module images and shard files; `docs/format-v3.md` is the normative
//! description and these types are its Rust form, with reading and writing the directory.
//! No CUDA here: the kit, the fuzz targets, `gnomon validate` and another team's exporter
//! depend on this crate alone.
//!
//! - the manifest's types ([`Manifest`] and below), reading and writing a core directory
//!   ([`CoreWriter`], [`open_in_core`]), and the shards' [`digest`]s.
//! - [`validate`]: every rule of the format, and [`Core`], a core that kept them.
//! - [`account`]: what a valid core holds, in a few lines.
//! - [`flags`]: the instantiation-flags contract (exactly one source; 0, 1, 8 or 9).
//! - [`Generator`]: random-number state the kernels read, and how launches advance it.
//! - [`contract`]: export needs templates only; replay needs executables.
//! - [`shards`]: splitting a fixed-address arena into shards under a cap.
//! - [`spread`]: how far launches of an output lie from the first, in the data's units.
//! - [`params`]: kernel parameter blobs laid out as a function's slots say.
//! - [`capture_order`]: the node and edge order that stream capture constructs.
//! - [`tensor_parallel`]: whether per-rank cores agree.
//!
//! The manifest's modules never reach `validate`; `validate` uses them.
#![forbid(unsafe_code)]

pub mod account;
pub mod capture_order;
pub mod contract;
mod core_writer;
pub mod digest;
pub mod errors;
mod fast_parse;
pub mod flags;
mod generators;
mod image;
mod io;
mod manifest;
mod on_cores;
pub mod params;
pub mod shard_writer;
pub mod shards;
pub mod size;
pub mod spread;
pub mod tensor_parallel;
pub mod validate;

pub use core_writer::{CoreWriter, Written};
pub use generators::{Drawn, DrawnLaunch, Draws, Generator};
pub use image::{arch as image_arch, ImageArch, Targeting, HEAD_BYTES as IMAGE_HEAD_BYTES};
pub use io::{hash_exactly, hash_hex, open_in_core, read_exactly, read_manifest, MANIFEST_FILE, MAX_MANIFEST_BYTES};
pub use manifest::*;
pub use validate::Core;
