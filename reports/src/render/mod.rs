//! Renderings of a [`Report`](crate::Report): JSON is `Report::to_json`; Markdown for a
//! pull request or release note; JUnit XML for CI systems.

mod junit;
mod markdown;

pub use junit::junit;
pub use markdown::markdown;

use crate::Report;

/// Writes `report.json`, `report.md` and `junit.xml` into `dir`, each atomically.
pub fn write_all(report: &Report, dir: &std::path::Path) -> std::io::Result<()> {
    write_files(&files(report), dir)
}

/// A report's files by name, as [`write_all`] writes them.
pub fn files(report: &Report) -> [(&'static str, String); 3] {
    [("report.json", report.to_json()), ("report.md", markdown(report)), ("junit.xml", junit(report))]
}

/// Writes rendered `files` into `dir` in their order, each atomically.
pub fn write_files(files: &[(&str, String)], dir: &std::path::Path) -> std::io::Result<()> {
    files.iter().try_for_each(|(name, text)| crate::write_atomically(&dir.join(name), text.as_bytes()))
}
