//! `cpu/flags/`: exactly one flags source; only 0, 1, 8 and 9.

use gnomon_format::{
    errors::FlagsError,
    flags::{resolve, FlagsOrigin, InstantiateFlags, ReportsFlags},
};

use crate::{accepted, ensure, refused, Case};

const CLAIM: &str = "flags-contract";

/// A live executable whose driver may report different flags than it was built with.
struct LiveExecutable {
    instantiated: u64,
    reported: u64,
}

impl ReportsFlags for LiveExecutable {
    fn instantiated_flags(&self) -> InstantiateFlags {
        InstantiateFlags::new(self.instantiated).expect("mock executables use supported flags")
    }

    fn reported_flags(&self) -> u64 {
        self.reported
    }
}

pub fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for value in [0, 1, 8, 9] {
        cases.push(Case::new(&format!("cpu/flags/value={value}/accepted"), CLAIM, move |_| {
            let (flags, origin) = accepted(resolve(Some(value), None), "resolving explicit flags")?;
            ensure(flags.bits() == value && origin == FlagsOrigin::Explicit, || {
                format!("explicit {value} resolved to {} from {origin:?}", flags.bits())
            })
        }));
    }
    for (value, bit) in [(2, 2), (4, 4), (16, 16), (1 << 40 | 1, 1 << 40)] {
        cases.push(Case::new(&format!("cpu/flags/value={value}/refused"), CLAIM, move |_| {
            let text = refused(
                resolve(Some(value), None),
                |e| matches!(e, FlagsError::UnsupportedBit { bit: b, .. } if *b == bit),
            )?;
            ensure(text.contains(&format!("bit {bit}")), || format!("error does not name bit {bit}: {text}"))
        }));
    }
    let exact = LiveExecutable { instantiated: 9, reported: 9 };
    cases.extend([
        Case::new("cpu/flags/both-sources-refused", CLAIM, |_| {
            let exec = LiveExecutable { instantiated: 1, reported: 1 };
            refused(resolve(Some(1), Some(&exec)), |e| *e == FlagsError::BothSources).map(drop)
        }),
        Case::new("cpu/flags/no-source-refused", CLAIM, |_| {
            refused(resolve(None, None), |e| *e == FlagsError::NoSource).map(drop)
        }),
        Case::new("cpu/flags/executable-exact-readback-accepted", CLAIM, move |_| {
            let (flags, origin) = accepted(resolve(None, Some(&exact)), "resolving from an executable")?;
            ensure(flags.bits() == 9 && origin == FlagsOrigin::Executable, || {
                format!("resolved {} from {origin:?}", flags.bits())
            })
        }),
        Case::new("cpu/flags/executable-dropped-priority-bit-refused", CLAIM, |_| {
            // What driver 580.159 does: instantiated with 8, reports 0.
            let exec = LiveExecutable { instantiated: 8, reported: 0 };
            refused(resolve(None, Some(&exec)), |e| *e == FlagsError::ReadbackMismatch { instantiated: 8, reported: 0 })
                .map(drop)
        }),
    ]);
    cases
}
