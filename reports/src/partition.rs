//! `hash:K/N`: which of N runners runs a case, by a hash of its id, so the split is the
//! same on every machine and does not shift when unrelated cases are added.

use std::{fmt, str::FromStr};

use sha2::{Digest, Sha256};

use crate::CaseId;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partition {
    /// 1-based.
    pub index: u32,
    pub count: u32,
}

impl Partition {
    pub fn contains(&self, id: &CaseId) -> bool {
        let digest = Sha256::digest(id.as_str().as_bytes());
        let bucket = u64::from_le_bytes(digest[..8].try_into().expect("8 bytes")) % u64::from(self.count);
        bucket + 1 == u64::from(self.index)
    }
}

impl FromStr for Partition {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let spec = s.strip_prefix("hash:").ok_or_else(|| format!("partition `{s}` must start with `hash:`"))?;
        let (k, n) = spec.split_once('/').ok_or_else(|| format!("partition `{s}` must be hash:K/N"))?;
        let parse =
            |v: &str, what| v.parse::<u32>().map_err(|_| format!("partition `{s}`: {what} `{v}` is not a number"));
        let (index, count) = (parse(k, "K")?, parse(n, "N")?);
        if count == 0 || index == 0 || index > count {
            return Err(format!("partition `{s}`: need 1 ≤ K ≤ N"));
        }
        Ok(Self { index, count })
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hash:{}/{}", self.index, self.count)
    }
}
