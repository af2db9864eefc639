use std::{
    fs,
    io::{self, Read},
    path::{Component, Path, PathBuf},
};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::manifest::{FormatTag, Manifest};
use crate::errors::{CoreError, ValidationError};

pub const MANIFEST_FILE: &str = "manifest.json";
/// A manifest larger than this is refused before it is read.
pub const MAX_MANIFEST_BYTES: u64 = 256 << 20;

/// Reads `manifest.json`, checking its size first and its version before its shape; no
/// other rule is checked (`Core::open` checks them all).
pub fn read_manifest(dir: &Path) -> Result<Manifest, CoreError> {
    let (path, text) = read_manifest_text(dir)?;
    parse_manifest(&path, &text)
}

/// `manifest.json`'s path and bytes, its size checked before it is read.
pub(crate) fn read_manifest_text(dir: &Path) -> Result<(PathBuf, Vec<u8>), CoreError> {
    let path = dir.join(MANIFEST_FILE);
    let file = open_in_core(dir, MANIFEST_FILE, "manifest")?;
    let read_err = |source| CoreError::Read { path: path.clone(), source };
    let size = file.metadata().map_err(read_err)?.len();
    if size > MAX_MANIFEST_BYTES {
        return Err(CoreError::ManifestTooLarge { path, size, limit: MAX_MANIFEST_BYTES });
    }
    let mut text = Vec::new();
    file.take(size).read_to_end(&mut text).map_err(read_err)?;
    Ok((path, text))
}

/// The manifest in `text` (read from `path`), its version checked before its shape.
pub(crate) fn parse_manifest(path: &Path, text: &[u8]) -> Result<Manifest, CoreError> {
    let parse_err = |source| CoreError::Parse { path: path.to_owned(), source };
    // One pass over the text when it parses (the format is then read from the manifest);
    // only a manifest that does not parse is read again for its format alone, so that a
    // core of another format or version is refused as such, not for its shape.
    match serde_json::from_slice::<Manifest>(text) {
        Ok(manifest) => manifest.format.readable().map(|()| manifest).map_err(CoreError::from),
        Err(shape) => {
            #[derive(Deserialize)]
            struct Probe {
                format: FormatTag,
            }
            let probe: Probe = serde_json::from_slice(text).map_err(parse_err)?;
            probe.format.readable()?;
            Err(parse_err(shape))
        }
    }
}

/// Opens a file the manifest names, component by component from the core directory
/// (`openat`), never following a link and never blocking: absolute paths, `..`, a
/// component that is a link and a final component that is not a regular file (a FIFO or
/// a device would block or never end when read) are refused. What was checked is the
/// very file that is read: no path is looked up twice.
pub fn open_in_core(dir: &Path, relative: &str, item: &str) -> Result<fs::File, ValidationError> {
    use nix::{
        errno::Errno,
        fcntl::OFlag,
        sys::stat::{Mode, SFlag},
    };
    let escapes = || ValidationError::PathEscapes { item: item.into(), path: relative.into() };
    let rel = Path::new(relative);
    if relative.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(escapes());
    }
    // `Path::components` quietly drops `.`, empty components and a trailing `/`.
    if relative.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
        return Err(ValidationError::PathNotCanonical { item: item.into(), path: relative.into() });
    }
    let failed = |e: Errno| match e {
        Errno::ELOOP => ValidationError::PathThroughLink { item: item.into(), path: relative.into() },
        Errno::ENOENT => ValidationError::MissingFile { item: item.into(), path: relative.into() },
        e => ValidationError::FileUnreadable { item: item.into(), path: relative.into(), reason: e.desc().into() },
    };
    let no_follow = OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let mut at = nix::fcntl::open(dir, OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty()).map_err(failed)?;
    let components: Vec<&str> = relative.split('/').collect();
    let (last, parents) = components.split_last().expect("a checked path has a component");
    for parent in parents {
        at = match nix::fcntl::openat(&at, *parent, OFlag::O_DIRECTORY | no_follow, Mode::empty()) {
            Ok(dir) => dir,
            // A link to a directory and a plain file both answer "not a directory" here.
            Err(Errno::ENOTDIR) => {
                let link = nix::sys::stat::fstatat(&at, *parent, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                    .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK);
                return Err(failed(if link { Errno::ELOOP } else { Errno::ENOTDIR }));
            }
            Err(e) => return Err(failed(e)),
        };
    }
    let fd = nix::fcntl::openat(&at, *last, OFlag::O_RDONLY | OFlag::O_NONBLOCK | no_follow, Mode::empty())
        .map_err(failed)?;
    let file = fs::File::from(fd);
    let meta = file.metadata().map_err(|e| failed(Errno::from_raw(e.raw_os_error().unwrap_or(0))))?;
    if !meta.is_file() {
        let kind = if meta.is_dir() { "a directory" } else { "a special file" };
        return Err(ValidationError::NotAFile { item: item.into(), path: relative.into(), kind });
    }
    Ok(file)
}

/// SHA-256 of exactly `len` bytes of `reader`: fewer (the file shrank) is an error, and
/// nothing past `len` is read (it may grow without end).
pub fn hash_exactly(reader: impl Read, len: u64) -> io::Result<String> {
    let mut counted = Counted { inner: reader.take(len), read: 0 };
    let digest = hash_hex(&mut counted)?;
    exactly(counted.read, len).map(|()| digest)
}

/// Exactly `len` bytes of `reader`, as [`hash_exactly`] reads them, in a buffer with room
/// for one byte more (the NUL a driver is handed after a PTX image), so it is never copied
/// to grow.
pub fn read_exactly(reader: impl Read, len: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(len as usize + 1);
    reader.take(len).read_to_end(&mut bytes)?;
    exactly(bytes.len() as u64, len).map(|()| bytes)
}

fn exactly(read: u64, len: u64) -> io::Result<()> {
    match read == len {
        true => Ok(()),
        false => Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("it ended after {read} of {len} bytes"))),
    }
}

struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// SHA-256 of everything `reader` yields, lowercase hex; streams, so shards of any size fit.
pub fn hash_hex(mut reader: impl Read) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        match reader.read(&mut chunk)? {
            0 => return Ok(hex::encode(hasher.finalize())),
            n => hasher.update(&chunk[..n]),
        }
    }
}
