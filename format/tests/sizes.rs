//! The table of sizes every door reads (`tests/data/sizes.tsv`, read by the Python
//! package's tests too), held against the one parser.

use gnomon_format::size::parse_size;

#[test]
fn every_size_in_the_table_parses_as_it_says() {
    let table = include_str!("data/sizes.tsv");
    let rows: Vec<(&str, &str)> =
        table.lines().filter(|l| !l.starts_with('#')).filter_map(|l| l.rsplit_once('\t')).collect();
    assert!(rows.len() >= 20, "{} rows", rows.len());
    for (text, expected) in rows {
        let got = parse_size(text);
        match expected {
            "refused" => assert!(got.is_err(), "{text:?} gave {got:?}"),
            bytes => assert_eq!(got, Ok(bytes.parse().unwrap()), "{text:?}"),
        }
    }
}
