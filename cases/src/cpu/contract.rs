//! `cpu/contract/`: export needs templates only; replay needs one executable per template.

use gnomon_format::{
    contract::{ExportPlan, GraphExecutable, GraphTemplate, ReplayPlan},
    errors::ContractError,
    flags::{FlagsOrigin, InstantiateFlags},
};

use crate::{accepted, ensure, refused, Case};

const CLAIM: &str = "template-executable-contract";

struct Template(&'static str);

impl GraphTemplate for Template {
    fn name(&self) -> &str {
        self.0
    }
}

#[derive(Debug)]
struct Executable(&'static str, u64);

impl GraphExecutable for Executable {
    fn template_name(&self) -> &str {
        self.0
    }
    fn flags(&self) -> InstantiateFlags {
        InstantiateFlags::new(self.1).expect("mock executables use supported flags")
    }
}

const RECORDED: &[(&str, u64)] = &[("decode-b1", 1), ("decode-b8", 9)];

fn plan(executables: Vec<Executable>) -> Result<ReplayPlan<Executable>, ContractError> {
    ReplayPlan::new(RECORDED, executables)
}

pub fn cases() -> Vec<Case> {
    vec![
        Case::new("cpu/contract/export-takes-templates-only", CLAIM, |_| {
            let templates = [Template("decode-b1"), Template("decode-b8")];
            let flags = InstantiateFlags::ALL[1];
            let plan = accepted(
                ExportPlan::new(templates.iter().map(|t| (t, flags, FlagsOrigin::Explicit))),
                "building an export plan from templates",
            )?;
            ensure(plan.entries().len() == 2, || format!("plan holds {} entries", plan.entries().len()))
        }),
        Case::new("cpu/contract/export-duplicate-template-refused", CLAIM, |_| {
            let templates = [Template("decode-b1"), Template("decode-b1")];
            let entries = templates.iter().map(|t| (t, InstantiateFlags::ALL[0], FlagsOrigin::Explicit));
            refused(ExportPlan::new(entries).map(|_| ()), |e| matches!(e, ContractError::DuplicateTemplate { .. }))
                .map(drop)
        }),
        Case::new("cpu/contract/replay-without-executables-refused", CLAIM, |_| {
            refused(
                plan(vec![]),
                |e| matches!(e, ContractError::MissingExecutable { template } if template == "decode-b1"),
            )
            .map(drop)
        }),
        Case::new("cpu/contract/replay-missing-one-executable-refused", CLAIM, |_| {
            refused(
                plan(vec![Executable("decode-b1", 1)]),
                |e| matches!(e, ContractError::MissingExecutable { template } if template == "decode-b8"),
            )
            .map(drop)
        }),
        Case::new("cpu/contract/replay-unmatched-executable-refused", CLAIM, |_| {
            let execs = vec![Executable("decode-b1", 1), Executable("decode-b8", 9), Executable("prefill", 0)];
            refused(plan(execs), |e| matches!(e, ContractError::UnmatchedExecutable { .. })).map(drop)
        }),
        Case::new("cpu/contract/replay-flags-differ-refused", CLAIM, |_| {
            refused(plan(vec![Executable("decode-b1", 1), Executable("decode-b8", 1)]), |e| {
                matches!(e, ContractError::FlagsDiffer { recorded: 9, executable: 1, .. })
            })
            .map(drop)
        }),
        Case::new("cpu/contract/replay-plan-orders-executables-as-recorded", CLAIM, |_| {
            let plan =
                accepted(plan(vec![Executable("decode-b8", 9), Executable("decode-b1", 1)]), "building a replay plan")?;
            let order: Vec<_> = plan.executables().iter().map(|e| e.0).collect();
            ensure(order == ["decode-b1", "decode-b8"], || format!("plan order {order:?}"))
        }),
    ]
}
