//! The contract's rules at the format's own layer: every rule check of the fixtures
//! (flags, plans, shards, capture order, rank sets; the `cpu/…` cases of `gnomon run`)
//! holds here, with no GPU crate built.

use gnomon_fixtures::rules;

#[test]
fn every_rule_check_holds() {
    let checks: Vec<_> = rules::before_the_manifest().into_iter().chain(rules::after_the_manifest()).collect();
    assert!(checks.len() > 40, "{} checks", checks.len());
    let failed: Vec<String> = checks.iter().filter_map(|c| (c.run)().err().map(|e| format!("{}: {e}", c.id))).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}
