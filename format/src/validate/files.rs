//! The files a manifest names: inside the core, regular files, no links, their declared
//! sizes (before reading), their hashes (on every thread), and module images with code
//! for the core's arch.

use std::{borrow::Cow, path::Path};

use super::{Result, MAX_MODULE_BYTES};
use crate::{
    errors::ValidationError as E,
    {
        digest::{pieces, Piece, PieceHasher},
        hash_exactly, hash_hex, open_in_core, read_exactly, Manifest, Module, Shard,
    },
};

/// Whether [`files`] hashes shard contents now or leaves them to the upload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardContents {
    Hashed,
    /// Replay's streaming upload hashes each shard on the bytes it copies; and the module
    /// images are kept as they were hashed, for replay to load.
    HashedOnUpload,
}

/// Each module's image as validation hashed it, by module index: kept only for replay
/// ([`ShardContents::HashedOnUpload`]), so the bytes loaded are the bytes checked and the
/// file is read once.
pub type ModuleImages = Vec<Option<Vec<u8>>>;

/// Checks the files the manifest names: inside the core, regular files, no links, declared
/// sizes (before reading), and hashes.
pub fn files(m: &Manifest, dir: &Path, shards: ShardContents) -> Result<ModuleImages> {
    let shard = |s: &Shard| {
        let stored = m.stored_len(s);
        verify_file(dir, &format!("shard {}", s.index), &s.file, Contents::Unread, |len| {
            (len != stored).then_some(stored)
        })
    };
    let module = |module: &Module| {
        let contents = match shards {
            ShardContents::Hashed => Contents::Hashed(&module.sha256),
            ShardContents::HashedOnUpload => Contents::Kept(&module.sha256),
        };
        let image = verify_file(dir, &format!("module `{}`", module.id), &module.file, contents, module_too_large)?;
        runs_on_core_arch(dir, module, m.context.sm, image.as_deref())?;
        Ok(image)
    };
    in_parallel(&m.shards, shard)?;
    if shards == ShardContents::Hashed {
        in_parallel(&pieces(m), |piece| verify_piece(dir, piece))?;
    }
    let images = in_parallel(&m.modules, module)?;
    in_parallel(&first_launches(m), |(item, file, sha256, size)| {
        verify_file(dir, item, file, Contents::Hashed(sha256), |len| (len != *size).then_some(*size))
    })?;
    Ok(images)
}

/// Module `module`'s image read again from the core in `dir` and held to validation's rules
/// (a regular file inside the core, within the size limit, hashing to its digest): for a
/// load that has no kept image ([`super::Core::image`]).
pub fn module_image(dir: &Path, module: &Module) -> Result<Vec<u8>> {
    let item = format!("module `{}`", module.id);
    let image = verify_file(dir, &item, &module.file, Contents::Kept(&module.sha256), module_too_large)?;
    Ok(image.expect("verify_file returns the contents it was told to keep"))
}

/// Each varying output's file of first-launch bytes: its item, path, digest and size.
fn first_launches(m: &Manifest) -> Vec<(String, &str, &str, u64)> {
    let sizes: std::collections::HashMap<&str, u64> = m.buffers.iter().map(|b| (b.name.as_str(), b.size)).collect();
    let mut files = Vec::new();
    for e in &m.expectations {
        for o in &e.outputs {
            if let Some(v) = &o.variation {
                let item = format!("first launch of template `{}` output `{}`", e.template, o.buffer);
                files.push((item, v.file.as_str(), o.sha256.as_str(), sizes[o.buffer.as_str()]));
            }
        }
    }
    files
}

/// Hashes one piece of a shard file (whose size was checked) against its digest.
fn verify_piece(dir: &Path, piece: &Piece) -> Result {
    let item = piece.name();
    let file = open_in_core(dir, &piece.shard.file, &item)?;
    let mut hasher = PieceHasher::of(piece);
    let unreadable = |e: std::io::Error| E::FileUnreadable {
        item: item.clone(),
        path: piece.shard.file.clone(),
        reason: e.to_string(),
    };
    let mut buffer = vec![0u8; (1 << 20).min(piece.bytes.end - piece.bytes.start) as usize];
    let mut at = piece.bytes.start;
    while at < piece.bytes.end {
        let len = buffer.len().min((piece.bytes.end - at) as usize);
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut buffer[..len], at).map_err(unreadable)?;
        hasher.update(&buffer[..len]);
        at += len as u64;
    }
    let (kind, found) = (hasher.name(), hasher.finish());
    match found == piece.expected {
        true => Ok(()),
        false => {
            Err(E::HashMismatch { item, path: piece.shard.file.clone(), kind, expected: piece.expected.into(), found })
        }
    }
}

/// Runs `check` on every item, on as many threads as the machine has (hashing is the
/// cost, and one SHA-256 stream is about 1 GB/s), and returns what each gave in item
/// order, or the error of the first item in order, so the verdict does not depend on
/// which thread finished first.
fn in_parallel<T: Sync, R: Send>(items: &[T], check: impl Fn(&T) -> Result<R> + Sync) -> Result<Vec<R>> {
    crate::on_cores::map(items.len(), |i| check(&items[i])).into_iter().collect()
}

/// Refuses a module whose image has no code for the core's arch: replay checks the core's
/// arch against the runner's, so this is what keeps an image the runner cannot load from
/// reaching it.
fn runs_on_core_arch(dir: &Path, module: &Module, sm: u32, kept: Option<&[u8]>) -> Result {
    let unreadable = |reason: String| E::ImageArch { module: module.id.clone(), reason };
    let head_bytes = crate::IMAGE_HEAD_BYTES;
    let head = match kept {
        Some(image) => Cow::Borrowed(&image[..image.len().min(head_bytes)]),
        None => {
            let mut head = Vec::with_capacity(head_bytes);
            let file = open_in_core(dir, &module.file, &format!("module `{}`", module.id))?;
            std::io::Read::read_to_end(&mut std::io::Read::take(file, head_bytes as u64), &mut head)
                .map_err(|e| unreadable(e.to_string()))?;
            Cow::Owned(head)
        }
    };
    let image = crate::image_arch(module.kind, &head).map_err(unreadable)?;
    match image.runs_on(module.kind, sm) {
        true => Ok(()),
        false => Err(E::NoCodeForArch {
            module: module.id.clone(),
            image: image.to_string(),
            core: sm,
            rule: image.rule(module.kind),
        }),
    }
}

/// The size a module may have, when `len` is past it.
fn module_too_large(len: u64) -> Option<u64> {
    (len > MAX_MODULE_BYTES).then_some(MAX_MODULE_BYTES)
}

/// What [`verify_file`] does with a file's contents: nothing, hash them against a
/// SHA-256 as they stream past, or read them into memory, hash them there and keep them.
enum Contents<'a> {
    Unread,
    Hashed(&'a str),
    Kept(&'a str),
}

/// `size_rule` returns the size the manifest allows when the file's length breaks it;
/// returns the contents where `contents` says to keep them.
fn verify_file(
    dir: &Path,
    item: &str,
    relative: &str,
    contents: Contents<'_>,
    size_rule: impl Fn(u64) -> Option<u64>,
) -> Result<Option<Vec<u8>>> {
    let file = open_in_core(dir, relative, item)?;
    let unreadable =
        |e: std::io::Error| E::FileUnreadable { item: item.into(), path: relative.into(), reason: e.to_string() };
    let found = file.metadata().map_err(unreadable)?.len();
    if let Some(declared) = size_rule(found) {
        return Err(E::FileSize { item: item.into(), path: relative.into(), declared, found });
    }
    let (sha256, actual, kept) = match contents {
        Contents::Unread => return Ok(None),
        Contents::Hashed(sha256) => (sha256, hash_exactly(file, found).map_err(unreadable)?, None),
        Contents::Kept(sha256) => {
            let bytes = read_exactly(file, found).map_err(unreadable)?;
            (sha256, hash_hex(bytes.as_slice()).map_err(unreadable)?, Some(bytes))
        }
    };
    if actual != sha256 {
        return Err(E::HashMismatch {
            item: item.into(),
            path: relative.into(),
            kind: "SHA-256",
            expected: sha256.into(),
            found: actual,
        });
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever thread finishes first, the error is the first failing item's, and every
    /// item is checked once.
    #[test]
    fn parallel_checks_report_the_first_failure_in_order() {
        let items: Vec<usize> = (0..200).collect();
        let checked = std::sync::atomic::AtomicUsize::new(0);
        let verdict = in_parallel(&items, |&i| {
            checked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            match i % 7 == 3 || i == 150 {
                true => Err(E::Unsettled { item: i.to_string(), what: "planted".into() }),
                false => Ok(()),
            }
        });
        assert!(matches!(verdict, Err(E::Unsettled { item, .. }) if item == "3"));
        assert_eq!(checked.into_inner(), 200);
        assert!(in_parallel(&items[..0], |_| Err::<(), _>(E::Unsettled { item: "x".into(), what: "y".into() })).is_ok());
    }

    /// Pieces longer than the read buffer, and not a multiple of it, are hashed to exactly
    /// their end: a whole v2 file and a v3 chunk in the middle of one.
    #[test]
    fn a_piece_is_hashed_to_exactly_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..(3u64 << 20) + 123).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(dir.path().join("s.bin"), &bytes).unwrap();
        let sha256 = crate::hash_hex(&bytes[..]).unwrap();
        let shard = Shard { index: 0, offset: 0, size: 4 << 20, file: "s.bin".into(), sha256: None, chunks: None };
        let middle = (1u64 << 20) + 5..(2u64 << 20) + 700;
        let chunk = crate::digest::chunk_digests(&bytes[middle.start as usize..middle.end as usize], 1 << 30);
        let pieces = [(0..bytes.len() as u64, None, sha256.as_str()), (middle, Some(1), chunk.xxh3_128[0].as_str())];
        for (range, chunk, expected) in pieces {
            let piece = Piece { shard: &shard, bytes: range.clone(), chunk, expected };
            assert!(verify_piece(dir.path(), &piece).is_ok(), "{range:?}");
            let wrong = "0".repeat(expected.len());
            let piece = Piece { shard: &shard, bytes: range, chunk, expected: &wrong };
            assert!(matches!(verify_piece(dir.path(), &piece), Err(E::HashMismatch { .. })));
        }
    }

    /// At the boundary without a 1 GiB file: hashing one would take the CPU suite seconds.
    #[test]
    fn a_module_of_exactly_the_limit_is_allowed() {
        assert_eq!(module_too_large(MAX_MODULE_BYTES), None);
        assert_eq!(module_too_large(MAX_MODULE_BYTES + 1), Some(MAX_MODULE_BYTES));
    }
}
