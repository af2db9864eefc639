//! A child's progress, said while the runner waits for it. The child appends its plain
//! progress lines to a file of its own (`gnomon_core::progress::RELAY_FILE_ENV`), apart
//! from the output the report keeps; the runner reads what was added at each look and
//! says each whole line on its standard error.

use std::{
    io::{self, Read, Seek, SeekFrom},
    path::Path,
};

/// The file a child appends its progress lines to, and how far the runner has read it.
pub struct ProgressFile {
    file: tempfile::NamedTempFile,
    read: u64,
    /// The start of a line the child has not finished writing.
    partial: Vec<u8>,
}

impl ProgressFile {
    pub fn new() -> io::Result<Self> {
        Ok(Self { file: tempfile::NamedTempFile::new()?, read: 0, partial: Vec::new() })
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The whole lines added since the last look; a line still being written waits for
    /// the next. Nothing, rather than an error, when the file cannot be read: progress is
    /// a courtesy, the case's result does not depend on it.
    pub fn new_lines(&mut self) -> Vec<String> {
        let file = self.file.as_file_mut();
        let mut added = Vec::new();
        if file.seek(SeekFrom::Start(self.read)).and_then(|_| file.read_to_end(&mut added)).is_err() {
            return Vec::new();
        }
        self.read += added.len() as u64;
        self.partial.extend(added);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else { return Vec::new() };
        let whole: Vec<u8> = self.partial.drain(..=end).collect();
        String::from_utf8_lossy(&whole).lines().map(str::to_owned).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// What a runner says of a child's replay: each whole line once, in order, a line cut
    /// in two by the child's writes said when it is whole.
    #[test]
    fn whole_lines_are_relayed_once_as_the_child_writes_them() {
        let mut progress = ProgressFile::new().unwrap();
        let mut child = std::fs::OpenOptions::new().append(true).open(progress.path()).unwrap();
        let mut looks = Vec::new();
        for written in [
            "gnomon: replay: launches 9 of 35 launches (25 %) in 2.1 s, about 6 s left\ngnomon: replay: lau",
            "",
            "nches 30 of 35 launches (85 %) in 7.1 s, about 1 s left\n",
            "gnomon: replay: launches 35 launches in 8.3 s\ngnomon: replay: speed 4 of 35 templates (11 %) in 2.0 s, about 16 s left\n",
        ] {
            child.write_all(written.as_bytes()).unwrap();
            looks.push(progress.new_lines().join("\n"));
        }
        insta::assert_snapshot!(looks.join("\n--- next look ---\n"), @r"
        gnomon: replay: launches 9 of 35 launches (25 %) in 2.1 s, about 6 s left
        --- next look ---

        --- next look ---
        gnomon: replay: launches 30 of 35 launches (85 %) in 7.1 s, about 1 s left
        --- next look ---
        gnomon: replay: launches 35 launches in 8.3 s
        gnomon: replay: speed 4 of 35 templates (11 %) in 2.0 s, about 16 s left
        ");
    }
}
