//! A manifest large enough that its templates are checked on several threads (from 10 000
//! nodes) is refused for its first bad template in order, whichever thread found which.

use gnomon_format::{errors::ValidationError, validate};

#[test]
fn the_first_bad_template_in_order_is_the_one_named() {
    let original = gnomon_fixtures::large::catalogue(16, 1_000);
    let mut m = original.clone();
    let empty = |m: &gnomon_format::Manifest| match validate::manifest(m) {
        Err(ValidationError::EmptyTemplate { template }) => template,
        other => panic!("{other:?}"),
    };
    m.templates[13].nodes.clear();
    assert_eq!(empty(&m), original.templates[13].name);
    m.templates[2].nodes.clear();
    for _ in 0..4 {
        assert_eq!(empty(&m), original.templates[2].name, "the earlier template, every time");
    }
    validate::manifest(&original).expect("the catalogue itself is valid");
}
