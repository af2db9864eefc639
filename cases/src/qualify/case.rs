//! The cases of one core's qualification as a type: each knows its name (its id after
//! `qualify/TARGET[/rank=R]/`) and the phase of the restore that decides it, so listing
//! the cases and judging them cannot disagree on a spelling.

use std::fmt;

/// The phases of a restore, in the order they run (a rebuild runs alongside the upload,
/// and its failure is told after the upload's checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Phase {
    Map,
    Modules,
    Upload,
    Rebuild,
    Instantiate,
    Launches,
}

/// What a core's judge decides about each of its templates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Rebuild,
    Instantiate,
    Attributes,
    Outputs,
    Speed,
}

impl Step {
    const ALL: [Step; 5] = [Step::Rebuild, Step::Instantiate, Step::Attributes, Step::Outputs, Step::Speed];

    fn name(self) -> &'static str {
        match self {
            Step::Rebuild => "rebuild",
            Step::Instantiate => "instantiate",
            Step::Attributes => "attributes",
            Step::Outputs => "outputs",
            Step::Speed => "speed",
        }
    }
}

/// One case of a core's qualification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CoreCase {
    /// A rank ran on its own GPU.
    Device,
    Map,
    Modules,
    Upload,
    Template(String, Step),
    Determinism,
    WeightsUnchanged,
    PoisonIndependence,
    /// Templates that draw random numbers draw anew, as the producing program would.
    RandomDraws,
    Restore,
    CheckerRejectsWrongOutputs,
    /// A budget of the profile, named by its metric.
    Budget(String),
}

impl CoreCase {
    /// The cases of the restore's first phases, in the order they run.
    pub const STAGES: [CoreCase; 3] = [CoreCase::Map, CoreCase::Modules, CoreCase::Upload];

    /// Every case of a core of `templates`, in the order its judge decides them; a rank
    /// (`rank`) also proves which GPU it ran on.
    pub fn all(templates: &[String], budgets: impl IntoIterator<Item = String>, rank: bool) -> Vec<CoreCase> {
        let mut cases: Vec<CoreCase> = rank.then_some(CoreCase::Device).into_iter().collect();
        cases.extend(Self::STAGES);
        for step in Step::ALL {
            cases.extend(templates.iter().map(|t| CoreCase::Template(t.clone(), step)));
        }
        cases.extend([
            CoreCase::Determinism,
            CoreCase::WeightsUnchanged,
            CoreCase::PoisonIndependence,
            CoreCase::RandomDraws,
            CoreCase::Restore,
            CoreCase::CheckerRejectsWrongOutputs,
        ]);
        cases.extend(budgets.into_iter().map(CoreCase::Budget));
        cases
    }

    /// The phase of the restore whose outcome decides the case: a case of a later phase
    /// is blocked when an earlier one stops the restore.
    pub fn phase(&self) -> Phase {
        match self {
            CoreCase::Map => Phase::Map,
            CoreCase::Modules => Phase::Modules,
            CoreCase::Upload => Phase::Upload,
            CoreCase::Template(_, Step::Rebuild) => Phase::Rebuild,
            CoreCase::Template(_, Step::Instantiate) => Phase::Instantiate,
            CoreCase::Device
            | CoreCase::Template(_, Step::Attributes | Step::Outputs | Step::Speed)
            | CoreCase::Determinism
            | CoreCase::WeightsUnchanged
            | CoreCase::PoisonIndependence
            | CoreCase::RandomDraws
            | CoreCase::Restore
            | CoreCase::CheckerRejectsWrongOutputs
            | CoreCase::Budget(_) => Phase::Launches,
        }
    }

    /// The template the case is about, if one.
    pub fn template(&self) -> Option<&str> {
        match self {
            CoreCase::Template(t, _) => Some(t),
            _ => None,
        }
    }
}

impl fmt::Display for CoreCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoreCase::Device => f.write_str("device"),
            CoreCase::Map => f.write_str("map"),
            CoreCase::Modules => f.write_str("modules"),
            CoreCase::Upload => f.write_str("upload"),
            CoreCase::Template(t, step) => write!(f, "template={t}/{}", step.name()),
            CoreCase::Determinism => f.write_str("determinism"),
            CoreCase::WeightsUnchanged => f.write_str("weights-unchanged"),
            CoreCase::PoisonIndependence => f.write_str("poison-independence"),
            CoreCase::RandomDraws => f.write_str("random-draws"),
            CoreCase::Restore => f.write_str("restore"),
            CoreCase::CheckerRejectsWrongOutputs => f.write_str("checker-rejects-wrong-outputs"),
            CoreCase::Budget(metric) => write!(f, "budget/{metric}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_core_lists_every_case_once_in_judging_order() {
        let names: Vec<String> = CoreCase::all(&["a".into(), "b".into()], ["restore-total-s".into()], true)
            .iter()
            .map(|c| c.to_string())
            .collect();
        let expected = "device map modules upload template=a/rebuild template=b/rebuild template=a/instantiate \
                        template=b/instantiate template=a/attributes template=b/attributes template=a/outputs \
                        template=b/outputs template=a/speed template=b/speed determinism weights-unchanged \
                        poison-independence random-draws restore checker-rejects-wrong-outputs budget/restore-total-s";
        assert_eq!(names.join(" "), expected);
    }

    #[test]
    fn phases_follow_the_restore() {
        let t = |step| CoreCase::Template("t".into(), step);
        let order = [
            CoreCase::Map,
            CoreCase::Modules,
            CoreCase::Upload,
            t(Step::Rebuild),
            t(Step::Instantiate),
            t(Step::Outputs),
        ];
        assert!(order.windows(2).all(|w| w[0].phase() < w[1].phase()), "{order:?}");
        assert_eq!(CoreCase::Budget("x".into()).phase(), Phase::Launches);
        assert_eq!(t(Step::Speed).template(), Some("t"));
        assert_eq!(CoreCase::Restore.template(), None);
    }
}
