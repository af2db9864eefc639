//! A manifest large enough that its templates are parsed on several threads (from 1 MiB,
//! one thread a template up to the cores) reads back as written, its templates in order.

use gnomon_format::Manifest;

#[test]
fn a_manifest_parsed_on_several_threads_reads_back_in_order() {
    let written = gnomon_fixtures::large::catalogue(16, 400);
    let text = serde_json::to_string(&written).unwrap();
    assert!(text.len() > 1 << 20, "{} bytes: below the parallel parse", text.len());
    let read: Manifest = serde_json::from_str(&text).unwrap();
    let names = |m: &Manifest| m.templates.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&read), names(&written));
    assert!(read == written, "the manifest reads back otherwise than written");
}
