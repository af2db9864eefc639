//! Writing a core so that a process killed at any point leaves, at its directory, the core
//! that was there or the new one, complete: never a mixture, never neither. The new core is
//! written aside, in a sibling directory (`.NAME.partial-…`); its files, the manifest and
//! the directories are synced; then one `renameat2(RENAME_EXCHANGE)` swaps it with the old
//! core (or one rename puts it in place), the parent is synced, and the old core is removed.
//! Where the file system cannot swap (gVisor, some network file systems), the old core is
//! renamed aside under a fixed name and the new one into place: a kill between those two
//! renames leaves the old core aside, and the next writer puts it back before anything else.
//! This is what SQLite and Git promise (write aside, fsync, rename, fsync the directory),
//! and what the ALICE study (OSDI 2014) found missing in LevelDB and Git. A directory that
//! holds files but no manifest is no core, and is never replaced.

use std::{
    ffi::OsString,
    fs,
    io::Write,
    path::{Path, PathBuf},
    time::Instant,
};

use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};

use super::{hash_hex, manifest::Manifest, MANIFEST_FILE};
use crate::errors::CoreError;

/// Writes a new core aside and makes it the core at its directory in one step.
pub struct CoreWriter {
    dir: PathBuf,
    /// Where the core is written until it is complete; removed if it never is.
    staging: tempfile::TempDir,
}

/// What making the core cost beyond writing it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Written {
    /// Syncing its files and directories to the disk.
    pub sync_s: f64,
}

impl CoreWriter {
    /// A writer of a core that will be at `dir`; refuses a `dir` that holds files but no
    /// manifest. Leftovers of a writer that was killed before it finished are removed.
    pub fn create(dir: &Path) -> Result<Self, CoreError> {
        if let Ok(mut entries) = fs::read_dir(dir) {
            if entries.next().is_some() && !dir.join(MANIFEST_FILE).is_file() {
                return Err(CoreError::NotACore { path: dir.into() });
            }
        }
        let (parent, prefix) = aside(dir);
        let write_err = |source| CoreError::Write { path: parent.clone(), source };
        fs::create_dir_all(&parent).map_err(write_err)?;
        // A writer killed between the two renames of a file system without a swap left
        // the old core aside and none in place: it is put back first.
        let old = parent.join(format!("{prefix}old"));
        if !dir.exists() && old.join(MANIFEST_FILE).is_file() {
            fs::rename(&old, dir).map_err(write_err)?;
        }
        remove_leftovers(&parent, &prefix);
        let staging = tempfile::Builder::new().prefix(&prefix).tempdir_in(&parent).map_err(write_err)?;
        Ok(Self { dir: dir.to_owned(), staging })
    }

    /// Where the file at `relative` of this core is written (until it is complete, aside).
    pub fn path_of(&self, relative: &str) -> PathBuf {
        self.staging.path().join(relative)
    }

    /// Writes `bytes` at `relative` and returns their SHA-256.
    pub fn write_file(&self, relative: &str, bytes: &[u8]) -> Result<String, CoreError> {
        let path = self.path_of(relative);
        let write_err = |source| CoreError::Write { path: path.clone(), source };
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(write_err)?;
        }
        fs::write(&path, bytes).map_err(write_err)?;
        hash_hex(bytes).map_err(write_err)
    }

    /// Writes the manifest, syncs every file and directory of the new core, and makes it
    /// the core at its directory, the old one (if any) removed.
    pub fn write_manifest(self, manifest: &Manifest) -> Result<Written, CoreError> {
        write_manifest_file(&self.path_of(MANIFEST_FILE), manifest)?;
        let started = Instant::now();
        sync_tree(self.staging.path())?;
        let written = Written { sync_s: started.elapsed().as_secs_f64() };
        let staging = self.staging.keep();
        let swap_err = |source: std::io::Error| CoreError::Write { path: self.dir.clone(), source };
        let (parent, _) = aside(&self.dir);
        if self.dir.exists() {
            let swapped = renameat2(AT_FDCWD, &staging, AT_FDCWD, &self.dir, RenameFlags::RENAME_EXCHANGE);
            // The old core now stands aside (at `staging`, or moved there where the file
            // system cannot swap); a kill before its removal leaves it for the next writer.
            match swapped {
                Ok(()) => sync_dir(&parent)?,
                Err(e) if !matches!(e, nix::Error::EINVAL | nix::Error::ENOSYS | nix::Error::ENOTSUP) => {
                    return Err(swap_err(e.into()))
                }
                Err(_) => replace_in_two_steps(&self.dir, &staging)?,
            }
            fs::remove_dir_all(&staging).map_err(swap_err)?;
        } else {
            fs::rename(&staging, &self.dir).map_err(swap_err)?;
            sync_dir(&parent)?;
        }
        Ok(written)
    }

    /// Replaces the manifest of the core at `dir` in place, atomically and synced: an edit
    /// of a core whose files stay as they are.
    pub fn rewrite_manifest(dir: &Path, manifest: &Manifest) -> Result<(), CoreError> {
        let temporary = dir.join(format!(".{MANIFEST_FILE}.partial"));
        write_manifest_file(&temporary, manifest)?;
        let path = dir.join(MANIFEST_FILE);
        fs::rename(&temporary, &path).map_err(|source| CoreError::Write { path, source })?;
        sync_dir(dir)
    }
}

/// Where the file system has no swap (gVisor, some network file systems): the old core at
/// `dir` is renamed aside under a fixed name (which [`CoreWriter::create`] puts back if a
/// kill comes before the new core is in place), the new one from `staging` to `dir`, and
/// the old one to `staging`, which the caller removes.
fn replace_in_two_steps(dir: &Path, staging: &Path) -> Result<(), CoreError> {
    let swap_err = |source| CoreError::Write { path: dir.to_owned(), source };
    let (parent, prefix) = aside(dir);
    let old = parent.join(format!("{prefix}old"));
    fs::rename(dir, &old).map_err(swap_err)?;
    fs::rename(staging, dir).map_err(swap_err)?;
    fs::rename(&old, staging).map_err(swap_err)?;
    sync_dir(&parent)
}

/// Where a core at `dir` is written aside: its parent, and the prefix of the sibling's name.
fn aside(dir: &Path) -> (PathBuf, String) {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = dir.file_name().map_or_else(|| OsString::from("core"), |n| n.to_owned());
    (parent, format!(".{}.partial-", name.to_string_lossy()))
}

/// Removes what writers of the same core left aside when they were killed: best effort, a
/// leftover is only space.
fn remove_leftovers(parent: &Path, prefix: &str) {
    let Ok(entries) = fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Writes `manifest` at `path`, buffered (serde writes a token at a time, and a serving
/// catalogue's manifest holds millions of tokens), and syncs it.
fn write_manifest_file(path: &Path, manifest: &Manifest) -> Result<(), CoreError> {
    let write_err = |source| CoreError::Write { path: path.into(), source };
    let file = fs::File::create(path).map_err(write_err)?;
    let mut buffered = std::io::BufWriter::with_capacity(1 << 20, &file);
    serde_json::to_writer_pretty(&mut buffered, manifest).map_err(|e| write_err(e.into()))?;
    buffered.write_all(b"\n").and_then(|()| buffered.flush()).map_err(write_err)?;
    drop(buffered);
    file.sync_all().map_err(write_err)
}

/// Syncs every file below `dir` (on the host's cores: each sync waits for its file's
/// pages to reach the disk), then every directory, deepest first.
fn sync_tree(dir: &Path) -> Result<(), CoreError> {
    let (mut files, mut dirs) = (Vec::new(), vec![dir.to_owned()]);
    let mut next = 0;
    while let Some(d) = dirs.get(next).cloned() {
        next += 1;
        for entry in fs::read_dir(&d).map_err(|source| CoreError::Write { path: d.clone(), source })? {
            let entry = entry.map_err(|source| CoreError::Write { path: d.clone(), source })?;
            match entry.file_type().map(|t| t.is_dir()) {
                Ok(true) => dirs.push(entry.path()),
                _ => files.push(entry.path()),
            }
        }
    }
    let sync = |path: &PathBuf| {
        fs::File::open(path)
            .and_then(|f| f.sync_all())
            .map_err(|source| CoreError::Write { path: path.clone(), source })
    };
    crate::on_cores::map(files.len(), |i| sync(&files[i])).into_iter().collect::<Result<(), _>>()?;
    dirs.iter().rev().try_for_each(sync)
}

fn sync_dir(dir: &Path) -> Result<(), CoreError> {
    fs::File::open(dir).and_then(|f| f.sync_all()).map_err(|source| CoreError::Write { path: dir.into(), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        serde_json::from_str(include_str!("../../fixtures/golden/v1/manifest.json")).unwrap()
    }

    fn write(dir: &Path, file: &str) -> Result<Written, CoreError> {
        let w = CoreWriter::create(dir)?;
        w.write_file(file, b"bytes")?;
        w.write_manifest(&manifest())
    }

    /// A core written over another replaces it whole: none of the old core's files stay,
    /// and nothing is left aside.
    #[test]
    fn a_new_core_replaces_the_old_whole_and_leaves_nothing_aside() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("core");
        write(&dir, "old.bin").unwrap();
        assert!(dir.join("old.bin").is_file() && dir.join(MANIFEST_FILE).is_file());
        write(&dir, "new.bin").unwrap();
        assert!(dir.join("new.bin").is_file() && !dir.join("old.bin").exists());
        let names: Vec<_> = fs::read_dir(root.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["core"]);
    }

    /// Until the manifest is written the old core stands untouched; a writer dropped
    /// before (a failed export) removes what it wrote aside, and one killed leaves it for
    /// the next writer, which removes it.
    #[test]
    fn an_unfinished_core_never_touches_the_old_one() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("core");
        write(&dir, "old.bin").unwrap();
        let unfinished = CoreWriter::create(&dir).unwrap();
        unfinished.write_file("new.bin", b"half").unwrap();
        assert!(dir.join("old.bin").is_file() && !dir.join("new.bin").exists());
        drop(unfinished);
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 1, "dropped: nothing aside");
        let killed = CoreWriter::create(&dir).unwrap();
        killed.write_file("new.bin", b"half").unwrap();
        let _ = killed.staging.keep();
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 2, "killed: left aside");
        write(&dir, "new.bin").unwrap();
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 1, "the next writer removed it");
    }

    /// An empty directory, or none, becomes the core; a directory of other files is not
    /// replaced.
    #[test]
    fn only_a_core_or_nothing_is_replaced() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "a.bin").unwrap();
        assert!(root.path().join(MANIFEST_FILE).is_file(), "an empty directory");
        let photos = root.path().join("photos");
        fs::create_dir(&photos).unwrap();
        fs::write(photos.join("cat.jpg"), b"cat").unwrap();
        let refused = write(&photos, "a.bin").unwrap_err();
        assert!(matches!(refused, CoreError::NotACore { .. }), "{refused}");
        assert!(refused.to_string().contains("holds files but no manifest.json, so it is no core"), "{refused}");
        assert!(photos.join("cat.jpg").is_file());
    }

    /// Where the file system has no swap, the two renames replace the core as well, and
    /// an old core a kill left aside between them is put back by the next writer.
    #[test]
    fn without_a_swap_two_renames_replace_the_core_and_a_kill_between_them_is_undone() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("core");
        write(&dir, "old.bin").unwrap();
        let w = CoreWriter::create(&dir).unwrap();
        w.write_file("new.bin", b"bytes").unwrap();
        write_manifest_file(&w.path_of(MANIFEST_FILE), &manifest()).unwrap();
        let staging = w.staging.path().to_owned();
        replace_in_two_steps(&dir, &staging).unwrap();
        assert!(dir.join("new.bin").is_file() && staging.join("old.bin").is_file());
        let (parent, prefix) = aside(&dir);
        fs::rename(&dir, parent.join(format!("{prefix}old"))).unwrap();
        let _ = CoreWriter::create(&dir).unwrap();
        assert!(dir.join("new.bin").is_file(), "the core a kill left aside is back");
    }

    /// An edit of a core's manifest leaves its files and replaces the manifest whole.
    #[test]
    fn a_manifest_is_rewritten_in_place() {
        let root = tempfile::tempdir().unwrap();
        write(root.path(), "a.bin").unwrap();
        let mut m = manifest();
        m.context.sm = 100;
        CoreWriter::rewrite_manifest(root.path(), &m).unwrap();
        assert_eq!(crate::read_manifest(root.path()).unwrap().context.sm, 100);
        assert!(root.path().join("a.bin").is_file());
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 2);
    }
}
