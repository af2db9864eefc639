//! The commands that read files and run no case: `validate`, `compare`, `merge`, `summary`
//! and `trend`.

use std::path::Path;

use gnomon_cases::{catalogue, CatalogueOptions};
use gnomon_format::{account::Account, errors::CoreError, Core};
use gnomon_reports::{compare, exit_codes, merge, render, summary, text::printable, Gate, MetricPolicy, Report};

use crate::cli::{AccountFormat, CompareArgs, MergeArgs, OutputFormat, SummaryArgs, TrendArgs, ValidateArgs};

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
    let mut metrics = match &args.metric_policy {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
            MetricPolicy::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => MetricPolicy::default(),
    };
    metrics.default_pct = args.threshold.unwrap_or(metrics.default_pct);
    metrics.per_metric.extend(args.metric_thresholds.iter().cloned());
    let gate = Gate { metrics, allow_removed: args.allow_removed, allow_not_run: args.allow_not_run };
    let comparison = compare(&base, &new, &gate);
    match args.format {
        OutputFormat::Markdown => print!("{}", comparison.to_markdown()),
        OutputFormat::Json => print!("{}", comparison.to_json()),
    }
    Ok(if comparison.has_regression() { exit_codes::REGRESSION } else { exit_codes::SUCCESS })
}

/// Merges partitions; every case of the full catalogue that the parts' filters select
/// (their filters, `--skip`s and `--exact`, read back as libtest reads them) must be in
/// exactly one part.
pub fn merge_reports(args: &MergeArgs) -> Result<i32, String> {
    let parts = args.parts.iter().map(|p| load(p)).collect::<Result<Vec<_>, _>>()?;
    let expected = parts.first().map(|p| selected_by(&p.run)).unwrap_or_default();
    let merged = merge(&parts, &expected).map_err(|e| format!("merge: {e}"))?;
    render::write_all(&merged, &args.out).map_err(|e| format!("write {}: {e}", args.out.display()))?;
    eprintln!("gnomon: merged {} cases into {}", merged.cases.len(), args.out.display());
    Ok(exit_codes::SUCCESS)
}

/// The cases of the catalogue that a run's recorded profile and filters select.
fn selected_by(run: &gnomon_reports::Run) -> Vec<gnomon_reports::CaseId> {
    let selection = crate::runner::selection_of(&run.filters);
    let include_nightly = run.profile == "nightly";
    catalogue(CatalogueOptions { include_nightly, ..CatalogueOptions::default() })
        .into_iter()
        .map(|c| c.id)
        .filter(|id| !selection.is_filtered_out(&libtest_mimic::Trial::test(id.as_str(), || Ok(()))))
        .collect()
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

/// What `validate` found of one core; a later variant is worse.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Found {
    Valid,
    Refused,
    Unreadable,
}

impl Found {
    fn word(self) -> &'static str {
        match self {
            Found::Valid => "valid",
            Found::Refused => "refused",
            Found::Unreadable => "unreadable",
        }
    }

    fn exit_code(self) -> i32 {
        match self {
            Found::Valid => exit_codes::SUCCESS,
            Found::Refused => exit_codes::CASES_FAILED,
            Found::Unreadable => exit_codes::USAGE,
        }
    }
}

/// One core's line of `validate --format json`.
#[derive(serde::Serialize)]
struct Line {
    core: String,
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    account: Option<Account>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// `gnomon validate`: every rule of the format, file hashes included, for each core; the
/// worst outcome sets the exit code (unreadable over refused over valid).
pub fn validate_cores(args: &ValidateArgs) -> i32 {
    let mut worst = Found::Valid;
    for dir in &args.cores {
        let opened = match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => Core::open(dir),
            Ok(_) => Err(CoreError::Read { path: dir.clone(), source: std::io::Error::other("not a directory") }),
            Err(source) => Err(CoreError::Read { path: dir.clone(), source }),
        };
        let (found, verdict) = match opened {
            Ok(core) => (Found::Valid, Ok(Account::of(core.manifest()))),
            Err(e @ CoreError::Read { .. }) => (Found::Unreadable, Err(e.to_string())),
            Err(e) => (Found::Refused, Err(e.to_string())),
        };
        worst = worst.max(found);
        let core = dir.display().to_string();
        match (args.format, verdict) {
            (AccountFormat::Text, Ok(account)) => {
                let lines: Vec<String> = account.lines().iter().map(|l| format!("  {}", printable(l))).collect();
                println!("{}: valid\n{}\n", printable(&core), lines.join("\n"))
            }
            (AccountFormat::Text, Err(e)) => println!("{}: {}: {}\n", printable(&core), found.word(), printable(&e)),
            (AccountFormat::Json, verdict) => {
                let (account, error) = (verdict.as_ref().ok().cloned(), verdict.err());
                let line = Line { core, outcome: found.word(), account, error };
                println!("{}", serde_json::to_string(&line).expect("a line always serializes"));
            }
        }
    }
    worst.exit_code()
}

#[cfg(test)]
mod tests {
    use gnomon_reports::Run;

    use super::selected_by;

    /// What a merge expects of its parts, for each way a run's selection is recorded: a
    /// filter, a `--skip`, `--exact`, and the nightly profile. Each is read back as libtest
    /// reads it, so a merge that ignored one would expect other cases than the parts ran.
    fn selected(filters: &[&str], profile: &str) -> Vec<String> {
        let run =
            Run { filters: filters.iter().map(|f| f.to_string()).collect(), profile: profile.into(), ..Run::default() };
        selected_by(&run).iter().map(|id| id.as_str().to_owned()).collect()
    }

    #[test]
    fn a_filter_selects_the_cases_whose_ids_contain_it() {
        let flags = selected(&["cpu/flags/"], "default");
        assert!(flags.len() > 2 && flags.iter().all(|id| id.contains("cpu/flags/")), "{flags:?}");
        assert!(selected(&[], "default").len() > flags.len());
    }

    #[test]
    fn a_skip_leaves_its_cases_out() {
        let flags = selected(&["cpu/flags/"], "default");
        let skipped = selected(&["cpu/flags/", "--skip value=9"], "default");
        assert!(!skipped.is_empty() && skipped.len() < flags.len());
        assert!(skipped.iter().all(|id| !id.contains("value=9")), "{skipped:?}");
    }

    #[test]
    fn exact_selects_only_the_case_named_whole() {
        let one = selected(&["cpu/flags/"], "default")[0].clone();
        assert_eq!(selected(&[&one, "--exact"], "default"), [one]);
        // A prefix of many ids is no id: exactly nothing.
        assert_eq!(selected(&["cpu/flags/", "--exact"], "default"), Vec::<String>::new());
    }

    #[test]
    fn the_nightly_profile_adds_its_family() {
        let nightly = |profile| selected(&["replay/model-scale-nightly/"], profile).len();
        assert_eq!(nightly("default"), 0);
        assert!(nightly("nightly") > 0);
    }
}
