//! How much of a file the kernel's page cache holds, and dropping a file from it: what
//! makes a restore's read floor honest, cold or warm (`mincore`, `posix_fadvise`). No
//! root is needed; only this file's pages are touched.

use std::{fs::File, os::fd::AsRawFd};

/// The resident pages of `files` over all their pages; 1.0 for files with no bytes.
pub fn resident_fraction(files: &[File]) -> std::io::Result<f64> {
    let (mut resident, mut pages) = (0u64, 0u64);
    for file in files {
        let (r, p) = resident_pages(file)?;
        (resident, pages) = (resident + r, pages + p);
    }
    Ok(if pages == 0 { 1.0 } else { resident as f64 / pages as f64 })
}

/// Writes `file`'s dirty pages back, then asks the kernel to drop its cached pages, so the
/// next read of it comes from the storage.
pub fn drop_from_cache(file: &File) -> std::io::Result<()> {
    file.sync_data()?;
    nix::fcntl::posix_fadvise(file, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED)?;
    Ok(())
}

/// (resident pages, pages) of one file, from `mincore` over a read-only mapping of it.
fn resident_pages(file: &File) -> std::io::Result<(u64, u64)> {
    let len = usize::try_from(file.metadata()?.len()).map_err(std::io::Error::other)?;
    if len == 0 {
        return Ok((0, 0));
    }
    // SAFETY: `sysconf` has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let mut vector = vec![0u8; len.div_ceil(page)];
    // SAFETY: maps `len` bytes of an open regular file read-only and shared; nothing reads
    // through the mapping, which `mincore` only inspects and `munmap` removes.
    unsafe {
        let map = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0);
        if map == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let status = libc::mincore(map, len, vector.as_mut_ptr());
        let error = std::io::Error::last_os_error();
        libc::munmap(map, len);
        if status != 0 {
            return Err(error);
        }
    }
    Ok((vector.iter().filter(|&&v| v & 1 == 1).count() as u64, vector.len() as u64))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A file just written is cached, and one with no bytes counts as cached. Whether a
    /// drop takes depends on the file system (tmpfs keeps its pages), so it is shown where
    /// it matters: the cold restore's `shards-cached-fraction` on the runner.
    #[test]
    fn a_written_file_is_resident() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&vec![7u8; 1 << 20]).unwrap();
        assert_eq!(resident_fraction(std::slice::from_ref(&file)).unwrap(), 1.0);
        drop_from_cache(&file).unwrap();
        assert_eq!(resident_fraction(&[tempfile::tempfile().unwrap()]).unwrap(), 1.0, "no pages");
    }
}
