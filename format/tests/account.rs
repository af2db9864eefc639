//! The account `gnomon validate` prints names what replay must set, and only that: the
//! dynamic shared memory a function allows counts from the first byte past 48 KiB.

use gnomon_format::{account::Account, validate::DEFAULT_DYNAMIC_SHARED_BYTES, Manifest};

fn golden_v2() -> Manifest {
    serde_json::from_str(include_str!("../../fixtures/golden/v2/manifest.json")).expect("the golden manifest parses")
}

#[test]
fn shared_memory_is_a_need_only_above_the_default() {
    let with_limit = |bytes: u32| {
        let mut m = golden_v2();
        let f = &mut m.modules[0].functions[0];
        f.attributes.max_dynamic_shared_size_bytes = Some(bytes);
        f.attributes.preferred_shared_memory_carveout = None;
        Account::of(&m).attributes.into_iter().filter(|a| a.contains("shared-size")).collect::<Vec<_>>()
    };
    assert!(with_limit(DEFAULT_DYNAMIC_SHARED_BYTES).is_empty());
    assert_eq!(with_limit(DEFAULT_DYNAMIC_SHARED_BYTES + 1), ["`axpy` max-dynamic-shared-size-bytes 49153"]);
}

#[test]
fn a_core_without_v2_attributes_needs_none() {
    let v1: Manifest = serde_json::from_str(include_str!("../../fixtures/golden/v1/manifest.json")).unwrap();
    assert_eq!(Account::of(&v1).attributes, Vec::<String>::new());
    assert_eq!(
        Account::of(&golden_v2()).attributes,
        [
            "`axpy` max-dynamic-shared-size-bytes 98304",
            "`axpy` preferred-shared-memory-carveout 100",
            "priority on 3 nodes",
            "cluster-dim on 3 nodes",
            "1 programmatic edges"
        ]
    );
}
