//! A qualification profile: a port's own contract, kept in its repository as TOML. See
//! the README's "Qualifying a port" for every key.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::Deserialize;

use gnomon_format::spread::DEFAULT_MARGIN;

use super::agreement::Rule;
use crate::expectations::{Entry, Expectations};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct File {
    #[serde(default)]
    cores: Vec<PathBuf>,
    #[serde(default = "default_launches")]
    launches: u32,
    #[serde(default)]
    tolerances: BTreeMap<String, f64>,
    #[serde(default = "default_margin")]
    variation_margin: f64,
    #[serde(default)]
    bitwise_only: bool,
    #[serde(default)]
    budgets: BTreeMap<String, Budget>,
    #[serde(default)]
    expect: Vec<Entry>,
}

fn default_launches() -> u32 {
    3
}

fn default_margin() -> f64 {
    DEFAULT_MARGIN
}

/// A bound on a metric of the restore: a case that fails when the metric is past it.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    pub max: Option<f64>,
    pub min: Option<f64>,
}

impl Budget {
    /// Why `value` breaks this budget, if it does.
    pub fn broken_by(&self, value: f64) -> Option<String> {
        match (self.max, self.min) {
            (Some(max), _) if value > max => Some(format!("{value:.4} is above the budget's maximum {max}")),
            (_, Some(min)) if value < min => Some(format!("{value:.4} is below the budget's minimum {min}")),
            _ => None,
        }
    }
}

/// A checked profile.
pub struct Profile {
    /// Where it was read from; `None` for the defaults.
    pub path: Option<PathBuf>,
    /// Cores and rank sets it names, relative to its own directory.
    pub cores: Vec<PathBuf>,
    /// How many times each template is launched for the determinism case.
    pub launches: u32,
    /// Tolerance against the CPU reference by `template/buffer`, instead of the core's.
    pub tolerances: BTreeMap<String, f64>,
    /// How outputs the core records as varying may pass.
    pub rule: Rule,
    /// By `METRIC` or `TARGET/METRIC`; see [`Profile::budgets_for`].
    pub budgets: BTreeMap<String, Budget>,
    pub expectations: Expectations,
}

impl Default for Profile {
    fn default() -> Self {
        Self::checked(None, toml::from_str("").expect("an empty profile parses")).expect("the defaults are valid")
    }
}

impl Profile {
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("read profile {}: {e}", path.display()))?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self, String> {
        let file: File = toml::from_str(text).map_err(|e| format!("profile {}: {e}", path.display()))?;
        Self::checked(Some(path), file).map_err(|e| format!("profile {}: {e}", path.display()))
    }

    fn checked(path: Option<&Path>, file: File) -> Result<Self, String> {
        if !(2..=1000).contains(&file.launches) {
            return Err(format!("launches = {}: determinism needs 2 to 1000 launches", file.launches));
        }
        if let Some((key, t)) = file.tolerances.iter().find(|(k, t)| !k.contains('/') || !(t.is_finite() && **t >= 0.0))
        {
            return Err(format!("tolerance `{key}` = {t}: keys are TEMPLATE/BUFFER, values finite and ≥ 0"));
        }
        for (metric, b) in &file.budgets {
            let bounds = [b.max, b.min];
            if bounds.iter().all(Option::is_none) || bounds.iter().flatten().any(|v| !v.is_finite()) {
                return Err(format!("budget `{metric}`: give a finite max, min or both"));
            }
        }
        if !(file.variation_margin.is_finite() && (0.0..=1e6).contains(&file.variation_margin)) {
            return Err(format!("variation-margin = {}: a number from 0 to 1e6", file.variation_margin));
        }
        let base = path.and_then(Path::parent).unwrap_or(Path::new(""));
        Ok(Self {
            path: path.map(Path::to_owned),
            cores: file.cores.iter().map(|c| base.join(c)).collect(),
            launches: file.launches,
            tolerances: file.tolerances,
            rule: Rule { margin: file.variation_margin, bitwise_only: file.bitwise_only },
            budgets: file.budgets,
            expectations: Expectations::from_entries(file.expect)?,
        })
    }

    /// The budgets of one target (a core or a rank set, by the name its case ids use):
    /// `METRIC` keys bind every target, `TARGET/METRIC` keys that one, and win.
    pub fn budgets_for(&self, target: &str) -> BTreeMap<String, Budget> {
        let mut budgets: BTreeMap<String, Budget> =
            self.budgets.iter().filter(|(k, _)| !k.contains('/')).map(|(k, b)| (k.clone(), *b)).collect();
        let own = self.budgets.iter().filter_map(|(k, b)| Some((k.strip_prefix(target)?.strip_prefix('/')?, b)));
        budgets.extend(own.map(|(metric, b)| (metric.to_owned(), *b)));
        budgets
    }

    /// The tolerance the profile sets for `template`'s output `buffer`, if it sets one.
    pub fn tolerance(&self, template: &str, buffer: &str) -> Option<f64> {
        self.tolerances.get(&format!("{template}/{buffer}")).copied()
    }
}

#[cfg(test)]
mod budget_tests {
    use super::Budget;

    /// A budget is broken strictly past its bounds: the bound itself is within it.
    #[test]
    fn a_budget_is_broken_only_past_its_bounds() {
        let both = Budget { max: Some(2.0), min: Some(1.0) };
        assert_eq!(both.broken_by(2.5).unwrap(), "2.5000 is above the budget's maximum 2");
        assert_eq!(both.broken_by(0.5).unwrap(), "0.5000 is below the budget's minimum 1");
        for within in [1.0, 1.5, 2.0] {
            assert_eq!(both.broken_by(within), None, "{within}");
        }
        assert_eq!(Budget { max: None, min: None }.broken_by(f64::MAX), None);
    }
}
