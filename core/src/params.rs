//! Kernel parameter blobs: one byte string laid out per the slots the driver reports for
//! a function (`cuFuncGetParamInfo`). Values are placed by slot index, and each value's
//! size must equal its slot's size, so no parameter size is ever assumed.

use crate::{errors::ParamError, format::ParamSlot};

/// A parameter blob being filled in.
#[derive(Clone, Debug)]
pub struct ParamBlob<'l> {
    layout: &'l [ParamSlot],
    bytes: Vec<u8>,
}

impl<'l> ParamBlob<'l> {
    /// A zeroed blob as long as the layout needs.
    pub fn new(layout: &'l [ParamSlot]) -> Self {
        let len = layout.iter().map(|p| p.offset + p.size).max().unwrap_or(0);
        Self { layout, bytes: vec![0; len as usize] }
    }

    /// Places `value` in slot `index`.
    pub fn set(mut self, index: usize, value: &[u8]) -> Result<Self, ParamError> {
        let slot = self.layout.get(index).ok_or(ParamError::NoSuchParam { index, count: self.layout.len() })?;
        if slot.size != value.len() as u64 {
            return Err(ParamError::SizeMismatch { index, slot: slot.size, given: value.len() });
        }
        self.bytes[slot.offset as usize..(slot.offset + slot.size) as usize].copy_from_slice(value);
        Ok(self)
    }

    /// Places a device pointer in slot `index`.
    pub fn ptr(self, index: usize, address: u64) -> Result<Self, ParamError> {
        self.set(index, &address.to_le_bytes())
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// The value in slot `index` of a blob, if the slot exists.
pub fn slot_value<'b>(layout: &[ParamSlot], blob: &'b [u8], index: usize) -> Option<&'b [u8]> {
    let slot = layout.get(index)?;
    blob.get(slot.offset as usize..(slot.offset + slot.size) as usize)
}
