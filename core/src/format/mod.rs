//! Core format v3 (and v2 and v1, which read as v3): a core is a directory holding
//! `manifest.json`, module images and shard files. `docs/format-v3.md` is the normative
//! description; these types are its Rust form, with reading and writing the directory.
//! The rules a core must satisfy are in `validate`, which uses this module, never the
//! other way round.

pub mod digest;
mod fast_parse;
mod image;
mod io;
mod manifest;

pub use image::{arch as image_arch, ImageArch, HEAD_BYTES as IMAGE_HEAD_BYTES};

pub use io::{
    hash_exactly, hash_hex, open_in_core, read_exactly, read_manifest, CoreWriter, MANIFEST_FILE, MAX_MANIFEST_BYTES,
};
pub use manifest::*;
