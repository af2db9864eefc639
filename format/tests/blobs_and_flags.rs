//! Parameter blobs and the flags contract's error names, without a GPU: the exporter and
//! the GPU cases fill blobs through these, so a slip here would reach the driver.

use gnomon_format::{
    errors::FlagsError,
    errors::ParamError,
    flags::InstantiateFlags,
    params::{slot_value, ParamBlob},
    ParamSlot,
};

fn layout() -> Vec<ParamSlot> {
    [(0, 4), (8, 8), (16, 4)].map(|(offset, size)| ParamSlot { offset, size }).to_vec()
}

#[test]
fn values_land_in_their_slots_and_padding_stays_zero() {
    let layout = layout();
    let blob = ParamBlob::new(&layout)
        .set(0, &7i32.to_le_bytes())
        .and_then(|b| b.ptr(1, 0x1122_3344_5566_7788))
        .and_then(|b| b.set(2, &[9, 9, 9, 9]))
        .unwrap()
        .into_bytes();
    let mut expected = vec![7, 0, 0, 0, 0, 0, 0, 0];
    expected.extend(0x1122_3344_5566_7788u64.to_le_bytes());
    expected.extend([9, 9, 9, 9]);
    assert_eq!(blob, expected);
    assert_eq!(slot_value(&layout, &blob, 1), Some(&blob[8..16]));
    assert_eq!(slot_value(&layout, &blob, 3), None, "no such slot");
    assert_eq!(slot_value(&layout, &blob[..12], 1), None, "a blob too short for the slot");
    let past_every_address = [ParamSlot { offset: u64::MAX - 3, size: 8 }];
    assert_eq!(slot_value(&past_every_address, &blob, 0), None, "a slot whose end overflows, no panic");
}

#[test]
fn a_value_of_the_wrong_size_or_slot_is_refused() {
    let layout = layout();
    let wrong_size = ParamBlob::new(&layout).set(1, &[0; 4]).unwrap_err();
    assert_eq!(wrong_size, ParamError::SizeMismatch { index: 1, slot: 8, given: 4 });
    let no_slot = ParamBlob::new(&layout).set(3, &[0; 4]).unwrap_err();
    assert_eq!(no_slot, ParamError::NoSuchParam { index: 3, count: 3 });
}

#[test]
fn refused_flags_name_their_lowest_unsupported_bit() {
    let name = |value| match InstantiateFlags::new(value) {
        Err(FlagsError::UnsupportedBit { name, .. }) => name,
        other => panic!("{value} was not refused by bit: {other:?}"),
    };
    assert_eq!((name(2), name(4), name(6), name(16)), ("UPLOAD", "DEVICE_LAUNCH", "UPLOAD", "unknown"));
    assert_eq!(InstantiateFlags::ALL.map(|f| f.bits()), [0, 1, 8, 9]);
}
