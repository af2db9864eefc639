//! A core directory that passed every rule: what replay and qualification take.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::Mutex,
};

use crate::{
    errors::{CoreError, ValidationError},
    {open_in_core, read_manifest, Manifest},
};

/// A core directory whose manifest and files passed every validation rule.
#[derive(Debug)]
pub struct Core {
    dir: PathBuf,
    manifest: Manifest,
    images: KeptImages,
}

/// Module images as validation hashed them ([`super::ModuleImages`]): each is taken once,
/// by the load.
struct KeptImages(Mutex<super::ModuleImages>);

impl std::fmt::Debug for KeptImages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock().map_or(0, |images| images.iter().flatten().count());
        write!(f, "{kept} module images kept")
    }
}

impl Core {
    /// Reads, validates and verifies the core in `dir`, hashing every file. A core that
    /// fails here must never reach a GPU.
    pub fn open(dir: &Path) -> Result<Self, CoreError> {
        Self::open_with(dir, super::ShardContents::Hashed)
    }

    /// As [`Core::open`], but shard contents are left for the upload to hash, on the very
    /// bytes it copies (`replay` always does), so each shard byte is read once; and the
    /// module images are kept as they were hashed, for the load ([`Core::take_image`]).
    /// Every other rule, shard sizes and regular files included, is checked here.
    pub fn open_for_upload(dir: &Path) -> Result<Self, CoreError> {
        Self::open_with(dir, super::ShardContents::HashedOnUpload)
    }

    /// As [`Core::open`], for a manifest the caller already read from `dir`: every rule and
    /// every file's hash are checked, nothing parsed twice.
    pub fn validated(dir: &Path, manifest: Manifest) -> Result<Self, CoreError> {
        super::manifest(&manifest)?;
        let images = super::files(&manifest, dir, super::ShardContents::Hashed)?;
        Ok(Self { dir: dir.to_owned(), manifest, images: KeptImages(Mutex::new(images)) })
    }

    fn open_with(dir: &Path, shards: super::ShardContents) -> Result<Self, CoreError> {
        let manifest = read_manifest(dir)?;
        super::manifest(&manifest)?;
        let images = super::files(&manifest, dir, shards)?;
        Ok(Self { dir: dir.to_owned(), manifest, images: KeptImages(Mutex::new(images)) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Module `index`'s image as validation hashed it, once; `None` after that, or where
    /// the core was opened for anything but an upload ([`Core::open_for_upload`]).
    pub fn take_image(&self, index: usize) -> Option<Vec<u8>> {
        self.images.0.lock().unwrap_or_else(|e| e.into_inner()).get_mut(index).and_then(Option::take)
    }

    /// Module `index`'s image as validated: the bytes validation hashed, or, where they
    /// are gone (taken before, or a core not opened for an upload), the file read again and
    /// checked as validation checks it; so a file swapped since never reaches the driver.
    /// `index` is a module's position in the manifest.
    pub fn image(&self, index: usize) -> Result<Vec<u8>, ValidationError> {
        match self.take_image(index) {
            Some(image) => Ok(image),
            None => super::files::module_image(&self.dir, &self.manifest.modules[index]),
        }
    }

    /// Opens a file the manifest names, as validation opened it ([`open_in_core`]).
    pub fn open_file(&self, relative: &str, item: &str) -> Result<fs::File, ValidationError> {
        open_in_core(&self.dir, relative, item)
    }
}
