//! The template/executable contract, in types. Export takes templates and their flags and
//! never needs an executable; native replay needs one executable per template, and a
//! [`ReplayPlan`] cannot exist without them.

use std::collections::{BTreeMap, BTreeSet};

use crate::{
    errors::ContractError,
    flags::{FlagsOrigin, InstantiateFlags},
};

/// A retained graph template (`CUgraph`), as export sees it.
pub trait GraphTemplate {
    fn name(&self) -> &str;
}

/// An instantiated executable (`CUgraphExec`), as replay sees it.
pub trait GraphExecutable {
    fn template_name(&self) -> &str;
    /// The flags it was instantiated with, as the driver was given them.
    fn flags(&self) -> u64;
}

/// What export writes: templates with the flags to instantiate them with.
pub struct ExportPlan<'t, T: GraphTemplate> {
    entries: Vec<(&'t T, InstantiateFlags, FlagsOrigin)>,
}

impl<'t, T: GraphTemplate> ExportPlan<'t, T> {
    pub fn new(
        entries: impl IntoIterator<Item = (&'t T, InstantiateFlags, FlagsOrigin)>,
    ) -> Result<Self, ContractError> {
        let entries: Vec<_> = entries.into_iter().collect();
        let mut seen = BTreeSet::new();
        for (template, ..) in &entries {
            if !seen.insert(template.name()) {
                return Err(ContractError::DuplicateTemplate { template: template.name().into() });
            }
        }
        Ok(Self { entries })
    }

    pub fn entries(&self) -> &[(&'t T, InstantiateFlags, FlagsOrigin)] {
        &self.entries
    }
}

/// What native replay launches: every template of a core, each with its executable.
#[derive(Debug)]
pub struct ReplayPlan<E: GraphExecutable> {
    executables: Vec<E>,
}

impl<E: GraphExecutable> ReplayPlan<E> {
    /// `recorded` is the core's templates in order with their recorded flags. The plan
    /// holds the executables in that order.
    pub fn new(recorded: &[(&str, u64)], executables: Vec<E>) -> Result<Self, ContractError> {
        let mut by_name: BTreeMap<String, E> = BTreeMap::new();
        for exec in executables {
            let name = exec.template_name().to_owned();
            if !recorded.iter().any(|(t, _)| *t == name) {
                return Err(ContractError::UnmatchedExecutable { template: name });
            }
            if by_name.insert(name.clone(), exec).is_some() {
                return Err(ContractError::DuplicateExecutable { template: name });
            }
        }
        let mut ordered = Vec::with_capacity(recorded.len());
        for &(template, flags) in recorded {
            let exec = by_name
                .remove(template)
                .ok_or_else(|| ContractError::MissingExecutable { template: template.into() })?;
            if exec.flags() != flags {
                return Err(ContractError::FlagsDiffer {
                    template: template.into(),
                    recorded: flags,
                    executable: exec.flags(),
                });
            }
            ordered.push(exec);
        }
        Ok(Self { executables: ordered })
    }

    pub fn executables(&self) -> &[E] {
        &self.executables
    }
}
