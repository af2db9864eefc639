//! One grammar for manifests: a key given twice is refused wherever it stands, in a node's
//! op whether `kind` comes first or not, in a struct, and in a map of names.

use gnomon_format::Manifest;

fn golden() -> String {
    include_str!("../../fixtures/golden/v1/manifest.json").to_owned()
}

fn parsed(text: &str) -> Result<Manifest, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

#[test]
fn a_key_twice_is_refused_wherever_it_stands() {
    let text = golden();
    assert!(parsed(&text).is_ok());
    let twice = [
        // A struct's field (the arena's base) given twice.
        ("\"base\":", "\"base\": 0, \"base\":", "duplicate field `base`"),
        // A node's op whose `kind` comes first, with a field twice.
        ("\"kind\": \"memset\",", "\"kind\": \"memset\", \"value\": 0,", "duplicate field `value`"),
        // A node's op whose `kind` is not first, with `kind` twice.
        ("\"kind\": \"memset\",", "\"value\": 0, \"kind\": \"empty\", \"kind\": \"memset\",", "duplicate field `kind`"),
        // A map of names.
        (
            "\"context\":",
            "\"producer-seconds\": {\"capture-s\": 1.0, \"capture-s\": 2.0}, \"context\":",
            "duplicate key `capture-s`",
        ),
    ];
    for (at, with, says) in twice {
        assert!(text.contains(at), "the golden manifest has {at}");
        let error = parsed(&text.replacen(at, with, 1)).unwrap_err();
        assert!(error.contains(says), "{with}: {error}");
    }
}
