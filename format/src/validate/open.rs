//! A core directory that passed every rule: what replay and qualification take.

use std::{
    fs,
    path::{Path, PathBuf},
    sync::Mutex,
    time::Instant,
};

use crate::{
    errors::{CoreError, ValidationError},
    io::{parse_manifest, read_manifest_text},
    {open_in_core, Manifest},
};

/// A core directory whose manifest and files passed every validation rule.
#[derive(Debug)]
pub struct Core {
    dir: PathBuf,
    manifest: Manifest,
    images: KeptImages,
    opening: Opening,
}

/// Where opening a core spent its time, in seconds: reading `manifest.json`, parsing it,
/// checking its rules, and checking the files it names (module images hashed). A restore
/// waits for all four before anything reaches the device.
#[derive(Clone, Copy, Debug, Default)]
pub struct Opening {
    pub read_s: f64,
    pub parse_s: f64,
    pub rules_s: f64,
    pub files_s: f64,
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
        Self::checked(dir, manifest, super::ShardContents::Hashed, Opening::default())
    }

    fn open_with(dir: &Path, shards: super::ShardContents) -> Result<Self, CoreError> {
        let mut lap = Lap::new();
        let (path, text) = read_manifest_text(dir)?;
        let read_s = lap.seconds();
        let manifest = parse_manifest(&path, &text)?;
        Self::checked(dir, manifest, shards, Opening { read_s, parse_s: lap.seconds(), ..Opening::default() })
    }

    /// `manifest`, read from `dir`, held to every rule and its files checked; `opening`
    /// says what reading and parsing it took.
    fn checked(
        dir: &Path,
        manifest: Manifest,
        shards: super::ShardContents,
        opening: Opening,
    ) -> Result<Self, CoreError> {
        let mut lap = Lap::new();
        super::manifest(&manifest)?;
        let rules_s = lap.seconds();
        let images = super::files(&manifest, dir, shards)?;
        let opening = Opening { rules_s, files_s: lap.seconds(), ..opening };
        Ok(Self { dir: dir.to_owned(), manifest, images: KeptImages(Mutex::new(images)), opening })
    }

    /// Where opening this core spent its time.
    pub fn opening(&self) -> Opening {
        self.opening
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

/// Seconds since it was made or last asked.
struct Lap(Instant);

impl Lap {
    fn new() -> Self {
        Self(Instant::now())
    }

    fn seconds(&mut self) -> f64 {
        let now = Instant::now();
        (now - std::mem::replace(&mut self.0, now)).as_secs_f64()
    }
}
