//! What the driver loads, recorded as it loads it. No driver call returns a loaded
//! module's image, and library kernels (cuBLASLt's, cuDNN's runtime-compiled ones) are in
//! no file, so an exporter must be handed each image when the driver loads it: CUPTI's
//! module-loaded callback does that ([`ImageRecorder`]). A kernel node's function is then
//! mapped to its image ([`image_of`]) by the handle its module's load returned (a
//! `cuModuleLoad*`'s, or a `cuLibraryLoad*`'s module in the context), else by the whole
//! set of kernels of its module ([`images_by_entries`]): names repeat across images.
//!
//! A room of its own beside `cuda/`, with the same rule: every foreign call and all
//! `unsafe` are in `cupti.rs`.

mod cupti;
mod provenance;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    path::PathBuf,
};

pub use provenance::provenance;

use object::{
    elf::{FileHeader64, SHT_NOBITS},
    read::elf::{FileHeader, SectionHeader},
    LittleEndian,
};

use gnomon_format::hash_hex;

use crate::{
    cuda::{Context, LoadedModule, Module},
    errors::RecordError,
};

/// One distinct image the driver loaded, kept once by content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedImage {
    pub sha256: String,
    pub bytes: Vec<u8>,
    /// How many times the driver loaded these bytes.
    pub loads: u32,
    /// The shared objects that had the driver load them, where the stack said.
    pub loaders: BTreeSet<PathBuf>,
    /// The `CUmodule` handles of `cuModuleLoad*` calls given exactly these bytes (a
    /// handle the driver reused after an unload counts for its latest load only).
    pub modules: BTreeSet<usize>,
}

/// What an [`ImageRecorder`] heard, as one context holds it ([`ImageRecorder::heard`]).
pub struct Heard {
    pub images: Vec<LoadedImage>,
    pub loaders: HashMap<usize, Option<PathBuf>>,
}

/// Subscribed to CUPTI's module-loaded callback from [`ImageRecorder::start`] until it is
/// dropped. Start it before the program's first kernel: images arrive when a kernel is
/// first used, not when its library is loaded.
pub struct ImageRecorder {
    subscription: cupti::Subscription,
}

impl ImageRecorder {
    /// Subscribes, loading CUPTI from the first of [`cupti_candidates`] that loads.
    pub fn start() -> Result<Self, RecordError> {
        // Said first: without a driver, CUPTI's own refusal would only list the paths tried.
        if !crate::cuda::driver_library_present() {
            return Err(RecordError::NoDriver);
        }
        Ok(Self { subscription: cupti::Subscription::start(&cupti_candidates())? })
    }

    /// The CUPTI library the recorder runs on.
    pub fn library(&self) -> Option<PathBuf> {
        cupti::Subscription::library_path()
    }

    /// What the recorder heard, as `ctx` holds it: every distinct image loaded so far, in
    /// the order each was first loaded, with the handles of the modules `ctx` holds of it;
    /// and for each module handle in `ctx`, the shared object whose load returned it last,
    /// when the recorder heard that call and could walk its stack (what names a kernel's
    /// library; a handle missing, or mapped to `None`, has none). One look, so each heard
    /// library's module is asked of the driver once.
    pub fn heard(&self, ctx: &Context) -> Heard {
        let modules = self.library_modules(ctx);
        let module_of = |library| modules.get(&library).copied();
        let seen = self.seen();
        Heard { images: distinct(&seen, module_of), loaders: loaders(&seen, module_of) }
    }

    /// The module `ctx` holds of each library heard loaded. Asked with the callbacks'
    /// record unlocked: the driver may load the module now, and its callback records it.
    fn library_modules(&self, ctx: &Context) -> HashMap<usize, usize> {
        let libraries: Vec<usize> = self.seen().modules.iter().filter(|m| m.library).map(|m| m.handle).collect();
        libraries.into_iter().filter_map(|l| Some((l, ctx.library_module(l).ok()?))).collect()
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, cupti::Seen> {
        self.subscription.seen().lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Each module handle's latest load's loader (a handle the driver reused counts for its
/// latest load, whose stack may have said nothing).
fn loaders(seen: &cupti::Seen, module_of: impl Fn(usize) -> Option<usize>) -> HashMap<usize, Option<PathBuf>> {
    seen.modules.iter().filter_map(|m| Some((module_handle(m, &module_of)?, m.loader.clone()))).collect()
}

/// The module handle a heard load stands for: its own, or a library's module in the
/// context (`module_of`), none where the driver no longer knows the library.
fn module_handle(load: &cupti::ModuleLoad, module_of: impl Fn(usize) -> Option<usize>) -> Option<usize> {
    match load.library {
        true => module_of(load.handle),
        false => Some(load.handle),
    }
}

/// What the callbacks saw as distinct images, in first-load order: each with how often
/// it was loaded, by which objects, and the module handles whose latest load was given it.
fn distinct(seen: &cupti::Seen, module_of: impl Fn(usize) -> Option<usize>) -> Vec<LoadedImage> {
    let latest: HashMap<usize, &str> =
        seen.modules.iter().filter_map(|m| Some((module_handle(m, &module_of)?, m.digest.as_str()))).collect();
    let mut images: Vec<LoadedImage> = Vec::new();
    for load in &seen.loads {
        let sha256 = hash_hex(load.bytes.as_slice()).expect("hashing memory cannot fail");
        let image = match images.iter().position(|i| i.sha256 == sha256) {
            Some(seen) => &mut images[seen],
            None => {
                let bytes = load.bytes.clone();
                let digest = load_digest(&load.bytes);
                let modules = latest.iter().filter(|(_, d)| **d == digest).map(|(m, _)| *m).collect();
                images.push(LoadedImage { sha256, bytes, loads: 0, loaders: BTreeSet::new(), modules });
                images.last_mut().expect("just pushed")
            }
        };
        image.loads += 1;
        image.loaders.extend(load.loader.clone());
    }
    images
}

/// The length of a 64-bit little-endian ELF image as its headers say: the furthest end of
/// a section with contents or of the section header table. `bytes(n)` gives the image's
/// first `n` bytes, or `None` past its end: an image the driver holds at a pointer has no
/// length but this. A module load is tied to its recorded image by the digest of this
/// many bytes, whatever either side carries after them.
fn elf_len<'a>(bytes: impl Fn(usize) -> Option<&'a [u8]>) -> Option<usize> {
    let header = FileHeader64::<LittleEndian>::parse(bytes(size_of::<FileHeader64<LittleEndian>>())?).ok()?;
    let e = header.endian().ok()?;
    let table_end = header.e_shoff(e).checked_add(u64::from(header.e_shentsize(e)) * u64::from(header.e_shnum(e)))?;
    let sections = header.section_headers(e, bytes(usize::try_from(table_end).ok()?)?).ok()?;
    let ends = sections.iter().filter(|s| s.sh_type(e) != SHT_NOBITS);
    let end = ends
        .map(|s| s.sh_offset(e).checked_add(s.sh_size(e)))
        .try_fold(table_end, |furthest, end| Some(furthest.max(end?)))?;
    (end <= gnomon_format::validate::MAX_MODULE_BYTES).then(|| usize::try_from(end).ok()).flatten()
}

/// The digest that ties an image to the module loads given it: of its ELF bytes where it
/// is an ELF image, else of all of it.
fn load_digest(bytes: &[u8]) -> String {
    let len = elf_len(|n| bytes.get(..n)).filter(|&l| l <= bytes.len());
    hash_hex(&bytes[..len.unwrap_or(bytes.len())]).expect("hashing memory cannot fail")
}

/// Where CUPTI may be: `GNOMON_CUPTI`, the loader's own search, the CUDA toolkit, and the
/// `nvidia-cuda-cupti` wheel of any Python on the machine.
pub fn cupti_candidates() -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("GNOMON_CUPTI").map(PathBuf::from).into_iter().collect();
    candidates.extend(["libcupti.so.13", "libcupti.so"].map(PathBuf::from));
    candidates.push("/usr/local/cuda/extras/CUPTI/lib64/libcupti.so".into());
    for lib in ["/usr/local/lib", "/usr/lib"] {
        let Ok(entries) = std::fs::read_dir(lib) else { continue };
        for python in entries.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("python3")) {
            for packages in ["dist-packages", "site-packages"] {
                candidates.push(python.path().join(packages).join("nvidia/cu13/lib/libcupti.so.13"));
            }
        }
    }
    candidates
}

/// The kernels each image holds, as the driver lists them once it has loaded the image
/// in `ctx` (so the set is the driver's, whatever the image's format).
pub fn images_by_entries(ctx: &Context, images: &[LoadedImage]) -> Result<Vec<(BTreeSet<String>, usize)>, RecordError> {
    images
        .iter()
        .enumerate()
        .map(|(i, image)| {
            let module = Module::load(ctx, &image.bytes).map_err(|source| RecordError::Load { image: i, source })?;
            let entries = module.entries().map_err(|source| RecordError::Load { image: i, source })?;
            Ok((entries, i))
        })
        .collect()
}

/// The image a node function's `module` was loaded from: the one a `cuModuleLoad*` of
/// that handle was given, else the one whose kernels are exactly the module's. None is an
/// image the recorder missed, named with the function.
pub fn image_of<'i>(
    function: &str,
    module: &LoadedModule,
    images: &'i [LoadedImage],
    by_entries: &[(BTreeSet<String>, usize)],
) -> Result<&'i LoadedImage, RecordError> {
    if let [image] = images.iter().filter(|i| i.modules.contains(&module.handle)).collect::<Vec<_>>()[..] {
        return Ok(image);
    }
    let matching: BTreeMap<&str, &LoadedImage> = by_entries
        .iter()
        .filter(|(set, _)| *set == module.entries)
        .map(|(_, i)| (images[*i].sha256.as_str(), &images[*i]))
        .collect();
    let mut found = matching.into_values();
    match (found.next(), found.next()) {
        (Some(image), None) => Ok(image),
        (None, _) => {
            Err(RecordError::NoImage { function: function.into(), module: module.entries.iter().cloned().collect() })
        }
        (Some(_), Some(_)) => Err(RecordError::Ambiguous { function: function.into() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(byte: u8) -> LoadedImage {
        LoadedImage {
            sha256: hash_hex(&[byte][..]).unwrap(),
            bytes: vec![byte],
            loads: 1,
            loaders: BTreeSet::new(),
            modules: BTreeSet::new(),
        }
    }

    /// Where there is no driver (the CI machine), that is what the recorder says, not
    /// CUPTI's list of paths tried; on a GPU runner it starts.
    #[test]
    fn without_a_driver_the_recorder_says_so() {
        match (crate::cuda::driver_library_present(), ImageRecorder::start()) {
            (false, Err(e)) => assert!(e.to_string().starts_with("no CUDA driver on this machine"), "{e}"),
            (false, Ok(_)) => panic!("the recorder started without a driver"),
            (true, started) => assert!(!matches!(started, Err(RecordError::NoDriver))),
        }
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn module(names: &[&str]) -> LoadedModule {
        LoadedModule { handle: 0x100, entries: set(names) }
    }

    /// The whole set decides: a module with one more kernel is another image, two images
    /// with the same kernels but other bytes cannot be told apart, and none is named.
    #[test]
    fn a_function_maps_to_the_image_with_exactly_its_modules_kernels() {
        let images = [image(1), image(2), image(3)];
        let by_entries = vec![(set(&["a", "b"]), 0), (set(&["a"]), 1), (set(&["c"]), 2), (set(&["c"]), 2)];
        assert_eq!(image_of("a", &module(&["a", "b"]), &images, &by_entries).unwrap(), &images[0]);
        assert_eq!(image_of("a", &module(&["a"]), &images, &by_entries).unwrap(), &images[1]);
        assert_eq!(image_of("c", &module(&["c"]), &images, &by_entries).unwrap(), &images[2], "the same image twice");
        let missed = image_of("d", &module(&["d", "e"]), &images, &by_entries).unwrap_err();
        assert_eq!(missed.to_string(), "no recorded image holds the module of kernel `d` (its kernels: d, e)");
        let twins = vec![(set(&["a"]), 0), (set(&["a"]), 1)];
        assert!(matches!(image_of("a", &module(&["a"]), &images, &twins), Err(RecordError::Ambiguous { .. })));
    }

    /// A little-endian ELF64 image: header, one section with bytes at 0x100..0x180, one
    /// without (NOBITS, not counted) claiming 0x1000..0x2000, the section header table at
    /// 0x200 (three entries), then `tail` bytes no header accounts for.
    fn elf(tail: usize) -> Vec<u8> {
        let mut b = vec![0u8; 0x2c0 + tail];
        b[..7].copy_from_slice(b"\x7fELF\x02\x01\x01");
        b[0x28..0x30].copy_from_slice(&0x200u64.to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&3u16.to_le_bytes());
        let mut section = |i: usize, kind: u32, offset: u64, size: u64| {
            let h = 0x200 + i * 64;
            b[h + 4..h + 8].copy_from_slice(&kind.to_le_bytes());
            b[h + 0x18..h + 0x20].copy_from_slice(&offset.to_le_bytes());
            b[h + 0x20..h + 0x28].copy_from_slice(&size.to_le_bytes());
        };
        section(1, 1, 0x100, 0x80);
        section(2, 8, 0x1000, 0x1000);
        b.iter_mut().skip(0x2c0).for_each(|x| *x = 0xee);
        b
    }

    #[test]
    fn an_elf_image_is_as_long_as_its_headers_say() {
        let read = |b: &[u8]| elf_len(|n| b.get(..n));
        assert_eq!(read(&elf(0)), Some(0x2c0), "the table ends last");
        let mut far = elf(0);
        far[0x200 + 64 + 0x18..0x200 + 64 + 0x20].copy_from_slice(&0x300u64.to_le_bytes());
        far.resize(0x340, 0);
        assert_eq!(read(&far), Some(0x380), "a section past the table ends last");
        let mut class32 = elf(0);
        class32[4] = 1;
        assert_eq!(read(&class32), None);
        assert_eq!(read(&elf(0)[..0x240]), None, "headers past the end");
        assert_eq!(load_digest(&elf(7)), load_digest(&elf(0)), "bytes after the headers' end do not count");
        assert_ne!(load_digest(b"not elf"), load_digest(b"not elf!"));
    }

    /// Two loads of one image by two libraries are one image; a module handle counts
    /// for the image its latest load was given, as the driver reuses freed handles; a
    /// library's load counts for the module the context holds of it.
    #[test]
    fn images_are_distinct_and_a_reused_handle_belongs_to_its_latest_load() {
        let load = |bytes: Vec<u8>, loader: &str| cupti::Load { bytes, loader: Some(loader.into()) };
        let mut other = elf(0);
        other[0x100] = 1;
        let seen = cupti::Seen {
            loads: vec![load(elf(0), "liba.so"), load(other.clone(), "libb.so"), load(elf(0), "libc.so")],
            modules: vec![
                module_load(0x10, load_digest(&other), Some("libb.so")),
                module_load(0x20, load_digest(&elf(0)), None),
                module_load(0x10, "another".into(), Some("libd.so")),
                cupti::ModuleLoad { library: true, ..module_load(0x50, load_digest(&other), Some("libcudnn.so")) },
                cupti::ModuleLoad { library: true, ..module_load(0x70, load_digest(&other), None) },
            ],
        };
        // The context holds module 0x60 of library 0x50 and none of library 0x70.
        let module_of = |library| (library == 0x50).then_some(0x60);
        let images = distinct(&seen, module_of);
        let got: Vec<_> = images.iter().map(|i| (i.loads, i.loaders.len(), i.modules.clone())).collect();
        assert_eq!(got, [(2, 2, BTreeSet::from([0x20])), (1, 1, BTreeSet::from([0x60]))]);
        let loaders = loaders(&seen, module_of);
        let loader_of = |handle| loaders.get(&handle).cloned().flatten();
        assert_eq!(loader_of(0x10), Some("libd.so".into()), "the latest load of a reused handle");
        assert_eq!(loader_of(0x20), None, "a load whose stack said nothing");
        assert_eq!(loader_of(0x30), None, "a load never heard");
        assert_eq!(loader_of(0x60), Some("libcudnn.so".into()), "a library's module");
        assert_eq!(loader_of(0x50), None, "a library handle is no module's");
    }

    fn module_load(handle: usize, digest: String, loader: Option<&str>) -> cupti::ModuleLoad {
        cupti::ModuleLoad { handle, library: false, digest, loader: loader.map(PathBuf::from) }
    }

    /// Twins (one kernel name, other bytes: Triton's autotuning candidates) are told
    /// apart by the module handle a `cuModuleLoad*` returned for each image.
    #[test]
    fn the_handle_a_module_load_returned_decides_between_twins() {
        let mut images = [image(1), image(2)];
        images[1].modules.insert(0x100);
        let twins = vec![(set(&["a"]), 0), (set(&["a"]), 1)];
        assert_eq!(image_of("a", &module(&["a"]), &images, &twins).unwrap(), &images[1]);
        images[0].modules.insert(0x100);
        assert!(matches!(image_of("a", &module(&["a"]), &images, &twins), Err(RecordError::Ambiguous { .. })));
    }
}
