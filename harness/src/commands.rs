//! The report commands: `compare`, `merge`, `summary` and `trend`.

use std::path::Path;

use gnomon_cases::{catalogue, CatalogueOptions};
use gnomon_reports::{compare, exit_codes, merge, render, summary, Gate, Report, Thresholds};

use crate::cli::{CompareArgs, MergeArgs, OutputFormat, SummaryArgs, TrendArgs};

fn load(path: &Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    Report::parse(&text).map_err(|e| format!("read {}: {e}", path.display()))
}

/// Runs a command that either succeeds with an exit code or fails with a message.
pub fn exit(result: Result<i32, String>) -> i32 {
    result.unwrap_or_else(|e| {
        eprintln!("gnomon: {e}");
        exit_codes::USAGE
    })
}

pub fn compare_reports(args: &CompareArgs) -> Result<i32, String> {
    let (base, new) = (load(&args.base)?, load(&args.new)?);
    let measured = |name: &str| [&base, &new].iter().any(|r| r.cases.iter().any(|c| c.metrics.contains_key(name)));
    if let Some((name, _)) = args.metric_thresholds.iter().find(|(name, _)| !measured(name)) {
        return Err(format!("--metric-threshold {name}: neither report has a metric of that name"));
    }
    let thresholds = Thresholds {
        default_pct: args.threshold,
        per_metric: args.metric_thresholds.iter().cloned().collect(),
        ..Thresholds::default()
    };
    let comparison = compare(&base, &new, &Gate { thresholds, allow_removed: args.allow_removed });
    match args.format {
        OutputFormat::Markdown => print!("{}", comparison.to_markdown()),
        OutputFormat::Json => print!("{}", comparison.to_json()),
    }
    Ok(if comparison.has_regression() { exit_codes::REGRESSION } else { exit_codes::SUCCESS })
}

/// Merges partitions; every case of the full catalogue that the parts' filters select
/// must be in exactly one part.
pub fn merge_reports(args: &MergeArgs) -> Result<i32, String> {
    let parts = args.parts.iter().map(|p| load(p)).collect::<Result<Vec<_>, _>>()?;
    let filters = parts.first().map(|p| p.run.filters.clone()).unwrap_or_default();
    let include_nightly = parts.first().is_some_and(|p| p.run.profile == "nightly");
    let expected: Vec<_> = catalogue(CatalogueOptions { include_nightly, ..CatalogueOptions::default() })
        .into_iter()
        .map(|c| c.id)
        .filter(|id| filters.iter().all(|f| f.starts_with("--skip") || id.as_str().contains(f.as_str())))
        .collect();
    let merged = merge(&parts, &expected).map_err(|e| format!("merge: {e}"))?;
    render::write_all(&merged, &args.out).map_err(|e| format!("write {}: {e}", args.out.display()))?;
    eprintln!("gnomon: merged {} cases into {}", merged.cases.len(), args.out.display());
    Ok(exit_codes::SUCCESS)
}

pub fn print_summary(args: &SummaryArgs) -> Result<i32, String> {
    println!("{}", summary(&load(&args.report)?));
    Ok(exit_codes::SUCCESS)
}

/// Writes `trend.html` for the given reports and says where it is.
pub fn write_trend(args: &TrendArgs) -> Result<i32, String> {
    let runs = args.reports.iter().map(|p| load(p).map(gnomon_trend::RunColumn::new)).collect::<Result<Vec<_>, _>>()?;
    let path = args.out.join("trend.html");
    let page = gnomon_trend::page(runs);
    gnomon_reports::write_atomically(&path, page.as_bytes()).map_err(|e| format!("write {}: {e}", path.display()))?;
    eprintln!("gnomon: trend of {} runs written to {}", args.reports.len(), path.display());
    Ok(exit_codes::SUCCESS)
}
