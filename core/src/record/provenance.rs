//! Where a recorded image came from: the shared object that had the driver load it, that
//! object's version (from its file name, or from the installed package whose `RECORD`
//! lists it), and whether it compiles its kernels in the process.

use std::{
    fs,
    path::{Path, PathBuf},
};

use gnomon_format::Provenance;

/// Loaders whose images are compiled in the process rather than shipped: cuDNN's
/// runtime-compiled engines (NVRTC) and Triton's launcher, built in Triton's cache.
const RUNTIME_COMPILERS: [&str; 2] = ["runtime_compiled", "/.triton/"];

/// The provenance of an image `loader` had the driver load.
pub fn provenance(loader: &Path) -> Provenance {
    let resolved = fs::canonicalize(loader).unwrap_or_else(|_| loader.to_owned());
    let path = resolved.to_string_lossy();
    Provenance {
        library: file_name(loader),
        version: version_in_name(&file_name(&resolved)).or_else(|| installed_version(loader)),
        runtime_compiled: RUNTIME_COMPILERS.iter().any(|m| path.contains(m)),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string())
}

/// `13.0.2.14` of `libcublasLt.so.13.0.2.14`; a bare soname (`.so.13`) says too little.
fn version_in_name(name: &str) -> Option<String> {
    let (_, version) = name.split_once(".so.")?;
    version.contains('.').then(|| version.to_owned())
}

/// The version of the Python package that installed `file`, read from the `RECORD` of
/// the `*.dist-info` beside it in `site-packages` (or `dist-packages`).
fn installed_version(file: &Path) -> Option<String> {
    let packages =
        file.ancestors().find(|a| a.file_name().is_some_and(|n| n == "site-packages" || n == "dist-packages"))?;
    let relative = file.strip_prefix(packages).ok()?.to_string_lossy().into_owned();
    let listed = |info: &PathBuf| {
        let record = fs::read_to_string(info.join("RECORD")).unwrap_or_default();
        record.lines().any(|line| line.split(',').next() == Some(relative.as_str()))
    };
    let info = fs::read_dir(packages)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "dist-info"))
        .find(listed)?;
    let stem = info.file_stem()?.to_string_lossy().into_owned();
    stem.split_once('-').map(|(_, version)| version.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_comes_from_the_file_name_or_the_package_that_installed_it() {
        let root = tempfile::tempdir().unwrap();
        let packages = root.path().join("lib/python3.12/site-packages");
        let lib = packages.join("nvidia/cu13/lib");
        fs::create_dir_all(&lib).unwrap();
        fs::create_dir_all(packages.join("nvidia_cublas-13.0.2.14.dist-info")).unwrap();
        fs::create_dir_all(packages.join("other-1.0.dist-info")).unwrap();
        fs::write(packages.join("other-1.0.dist-info/RECORD"), "other/x.so,sha256=a,1\n").unwrap();
        fs::write(
            packages.join("nvidia_cublas-13.0.2.14.dist-info/RECORD"),
            "nvidia/cu13/lib/libcublasLt.so.13,sha256=c,3\n",
        )
        .unwrap();
        fs::write(lib.join("libcublasLt.so.13"), b"").unwrap();
        let p = provenance(&lib.join("libcublasLt.so.13"));
        assert_eq!(
            (p.library.as_str(), p.version.as_deref(), p.runtime_compiled),
            ("libcublasLt.so.13", Some("13.0.2.14"), false)
        );
        let named = provenance(Path::new("/usr/lib/libcudnn_engines_runtime_compiled.so.9.14.0"));
        assert_eq!((named.version.as_deref(), named.runtime_compiled), (Some("9.14.0"), true));
        let unknown = provenance(Path::new("/nowhere/libfoo.so.1"));
        assert_eq!((unknown.library.as_str(), unknown.version), ("libfoo.so.1", None));
        assert!(provenance(Path::new("/home/u/.triton/cache/ab/cuda_utils.so")).runtime_compiled);
    }
}
