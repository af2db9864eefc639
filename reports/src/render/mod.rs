//! Renderings of a [`Report`](crate::Report): JSON is `Report::to_json`; Markdown for a
//! pull request or release note; JUnit XML for CI systems.

mod junit;
mod markdown;

pub use junit::junit;
pub use markdown::markdown;

use crate::Report;

/// Writes `report.json`, `report.md` and `junit.xml` into `dir`, each atomically.
pub fn write_all(report: &Report, dir: &std::path::Path) -> std::io::Result<()> {
    crate::write_atomically(&dir.join("report.json"), report.to_json().as_bytes())?;
    crate::write_atomically(&dir.join("report.md"), markdown(report).as_bytes())?;
    crate::write_atomically(&dir.join("junit.xml"), junit(report).as_bytes())
}
