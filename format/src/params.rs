//! Kernel parameter blobs: one byte string laid out per the slots the driver reports for
//! a function (`cuFuncGetParamInfo`). Values are placed by slot index, and each value's
//! size must equal its slot's size, so no parameter size is ever assumed.

use crate::{errors::ParamError, ParamSlot};

/// A parameter blob being filled in, over a layout of the format's slots or of any
/// other type that says the same (the driver layer's own).
#[derive(Clone, Debug)]
pub struct ParamBlob<'l, S = ParamSlot> {
    layout: &'l [S],
    bytes: Vec<u8>,
}

impl<'l, S: Copy + Into<ParamSlot>> ParamBlob<'l, S> {
    /// A zeroed blob as long as the layout needs.
    pub fn new(layout: &'l [S]) -> Self {
        let len = layout.iter().map(|&p| p.into()).map(|p: ParamSlot| p.offset + p.size).max().unwrap_or(0);
        Self { layout, bytes: vec![0; len as usize] }
    }

    /// Places `value` in slot `index`.
    pub fn set(mut self, index: usize, value: &[u8]) -> Result<Self, ParamError> {
        let slot: ParamSlot =
            (*self.layout.get(index).ok_or(ParamError::NoSuchParam { index, count: self.layout.len() })?).into();
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

/// Each 8 bytes at an 8-aligned place of each slot, read as a little-endian word:
/// `(slot index, byte offset in the slot, word)`. A pointer is such a word, alone or as a
/// field of a struct or a tensor map. Slots the blob does not hold are skipped.
pub fn words<'b>(layout: &'b [ParamSlot], blob: &'b [u8]) -> impl Iterator<Item = (u32, u64, u64)> + 'b {
    layout.iter().enumerate().flat_map(move |(index, slot)| {
        (0..slot.size.saturating_sub(7)).step_by(8).filter_map(move |at| {
            let start = usize::try_from(slot.offset.checked_add(at)?).ok()?;
            let word = blob.get(start..start.checked_add(8)?)?;
            Some((index as u32, at, u64::from_le_bytes(word.try_into().ok()?)))
        })
    })
}

/// The value in slot `index` of a blob, if the slot exists.
pub fn slot_value<'b>(layout: &[ParamSlot], blob: &'b [u8], index: usize) -> Option<&'b [u8]> {
    let slot = layout.get(index)?;
    let start = usize::try_from(slot.offset).ok()?;
    blob.get(start..start.checked_add(usize::try_from(slot.size).ok()?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_read_at_each_aligned_place_of_each_slot() {
        // A 4-byte int, a pointer, and a 20-byte struct holding two words and 4 bytes more.
        let layout =
            [ParamSlot { offset: 0, size: 4 }, ParamSlot { offset: 8, size: 8 }, ParamSlot { offset: 16, size: 20 }];
        let mut blob = vec![0u8; 36];
        blob[8..16].copy_from_slice(&0x7000_0000_1000u64.to_le_bytes());
        blob[24..32].copy_from_slice(&42u64.to_le_bytes());
        let found: Vec<_> = words(&layout, &blob).collect();
        assert_eq!(found, [(1, 0, 0x7000_0000_1000), (2, 0, 0), (2, 8, 42)]);
        // A blob shorter than its layout gives the words it holds, and never panics.
        assert_eq!(words(&layout, &blob[..20]).count(), 1);
    }
}
