//! Which way each metric is worse and how large a change is noise: the policy `compare`
//! gates metrics with. The committed policy is `reports/metrics.toml`, embedded here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The committed policy's text.
pub const COMMITTED: &str = include_str!("../metrics.toml");

/// Which way a metric gets worse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Direction {
    LowerIsBetter,
    HigherIsBetter,
    /// Listed when it moves, never failing the gate.
    Informational,
}

impl Direction {
    /// Whether a move from `base` to `new` goes the bad way.
    pub fn worse(self, base: f64, new: f64) -> bool {
        match self {
            Direction::LowerIsBetter => new > base,
            Direction::HigherIsBetter => new < base,
            Direction::Informational => false,
        }
    }
}

/// Noise thresholds (a default and per metric), absolute floors per unit, and the
/// direction of each metric (by name, else by unit, else informational).
#[derive(Clone, Debug, PartialEq)]
pub struct MetricPolicy {
    pub default_pct: f64,
    pub per_metric: BTreeMap<String, f64>,
    pub floor_per_unit: BTreeMap<String, f64>,
    pub direction_per_unit: BTreeMap<String, Direction>,
    pub direction_per_metric: BTreeMap<String, Direction>,
}

/// The file's serde shape, kept apart from the policy that code reads.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct PolicyFile {
    default_threshold_pct: f64,
    #[serde(default)]
    floor: BTreeMap<String, f64>,
    #[serde(default)]
    unit_direction: BTreeMap<String, Direction>,
    #[serde(default)]
    metric: BTreeMap<String, MetricEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct MetricEntry {
    direction: Option<Direction>,
    threshold_pct: Option<f64>,
}

impl Default for MetricPolicy {
    fn default() -> Self {
        Self::parse(COMMITTED).expect("the committed metric policy parses (a test holds it)")
    }
}

impl MetricPolicy {
    /// Reads a policy file; every number must be a finite value ≥ 0.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: PolicyFile = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        let mut per_metric = BTreeMap::new();
        let mut direction_per_metric = BTreeMap::new();
        for (name, entry) in file.metric {
            if let Some(pct) = entry.threshold_pct {
                per_metric.insert(name.clone(), non_negative(&format!("metric.{name}.threshold-pct"), pct)?);
            }
            if let Some(direction) = entry.direction {
                direction_per_metric.insert(name, direction);
            }
        }
        for (unit, floor) in &file.floor {
            non_negative(&format!("floor.{unit}"), *floor)?;
        }
        Ok(Self {
            default_pct: non_negative("default-threshold-pct", file.default_threshold_pct)?,
            per_metric,
            floor_per_unit: file.floor,
            direction_per_unit: file.unit_direction,
            direction_per_metric,
        })
    }

    pub fn threshold(&self, name: &str) -> f64 {
        self.per_metric.get(name).copied().unwrap_or(self.default_pct)
    }

    pub fn floor(&self, unit: &str) -> f64 {
        self.floor_per_unit.get(unit).copied().unwrap_or(0.0)
    }

    pub fn direction(&self, name: &str, unit: &str) -> Direction {
        let by_unit = || self.direction_per_unit.get(unit).copied().unwrap_or(Direction::Informational);
        self.direction_per_metric.get(name).copied().unwrap_or_else(by_unit)
    }
}

fn non_negative(key: &str, value: f64) -> Result<f64, String> {
    match value.is_finite() && value >= 0.0 {
        true => Ok(value),
        false => Err(format!("{key} = {value}: must be a finite number ≥ 0")),
    }
}

#[cfg(test)]
mod tests {
    use super::Direction::*;

    /// Worse is strictly worse: an equal value is never a regression.
    #[test]
    fn worse_is_the_bad_way_only() {
        assert!(LowerIsBetter.worse(1.0, 2.0) && !LowerIsBetter.worse(2.0, 1.0) && !LowerIsBetter.worse(1.0, 1.0));
        assert!(HigherIsBetter.worse(2.0, 1.0) && !HigherIsBetter.worse(1.0, 2.0) && !HigherIsBetter.worse(1.0, 1.0));
        assert!(!Informational.worse(1.0, 100.0) && !Informational.worse(100.0, 1.0));
    }
}
