//! The instantiation-flags contract: flags come from exactly one source, an explicit value
//! or a live executable, and only 0, 1, 8 and 9 are supported.
//!
//! An executable is a source only when the driver reports back exactly the flags it was
//! instantiated with. Some drivers drop `USE_NODE_PRIORITY` from `cuGraphExecGetFlags`
//! (580.159 reports 0 for 8 and 1 for 9); taking that value would silently record different
//! flags, so a mismatch is refused and the exporter must record the flags explicitly.

use crate::errors::FlagsError;

/// `CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH`.
pub const AUTO_FREE_ON_LAUNCH: u64 = 1;
/// `CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY`.
pub const USE_NODE_PRIORITY: u64 = 8;
const SUPPORTED_BITS: u64 = AUTO_FREE_ON_LAUNCH | USE_NODE_PRIORITY;

/// Flags that passed the contract: one of 0, 1, 8, 9.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstantiateFlags(u64);

impl InstantiateFlags {
    /// Every supported value, in order.
    pub const ALL: [InstantiateFlags; 4] = [Self(0), Self(1), Self(8), Self(9)];

    pub fn new(value: u64) -> Result<Self, FlagsError> {
        let unsupported = value & !SUPPORTED_BITS;
        if unsupported == 0 {
            return Ok(Self(value));
        }
        let bit = 1 << unsupported.trailing_zeros();
        Err(FlagsError::UnsupportedBit { value, bit, name: bit_name(bit) })
    }

    pub fn bits(self) -> u64 {
        self.0
    }
}

fn bit_name(bit: u64) -> &'static str {
    match bit {
        2 => "UPLOAD",
        4 => "DEVICE_LAUNCH",
        _ => "unknown",
    }
}

/// A live executable as a flags source: what it was instantiated with, and what the
/// driver reports for it now.
pub trait ReportsFlags {
    fn instantiated_flags(&self) -> u64;
    fn reported_flags(&self) -> u64;
}

/// Where recorded flags came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagsOrigin {
    Explicit,
    Executable,
}

/// Applies the contract: exactly one source, a supported value, and an executable whose
/// read-back equals its instantiation flags.
pub fn resolve(
    explicit: Option<u64>,
    executable: Option<&dyn ReportsFlags>,
) -> Result<(InstantiateFlags, FlagsOrigin), FlagsError> {
    match (explicit, executable) {
        (Some(_), Some(_)) => Err(FlagsError::BothSources),
        (None, None) => Err(FlagsError::NoSource),
        (Some(value), None) => Ok((InstantiateFlags::new(value)?, FlagsOrigin::Explicit)),
        (None, Some(exec)) => {
            let instantiated = exec.instantiated_flags();
            let reported = exec.reported_flags();
            if reported != instantiated {
                return Err(FlagsError::ReadbackMismatch { instantiated, reported });
            }
            Ok((InstantiateFlags::new(reported)?, FlagsOrigin::Executable))
        }
    }
}
