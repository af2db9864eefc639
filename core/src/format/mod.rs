//! Core format v2 (and v1, which reads as v2): a core is a directory holding
//! `manifest.json`, module images and shard files. `docs/format-v2.md` is the normative
//! description; these types are its Rust form.

pub mod digest;
mod fast_parse;
mod image;
mod io;
mod manifest;

pub use image::{arch as image_arch, ImageArch, HEAD_BYTES as IMAGE_HEAD_BYTES};

pub use io::{
    hash_exactly, hash_hex, open_in_core, read_manifest, Core, CoreWriter, MANIFEST_FILE, MAX_MANIFEST_BYTES,
};
pub use manifest::*;
