//! Every command the README and `docs/` tell a user to type that needs no GPU would run:
//! each `cargo test` and `cargo bench` line names packages of this workspace and targets
//! they have, and each `gnomon` line a subcommand the binary has, with flags its help
//! lists. A command in backticks or on its own line of a fenced block counts.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_owned()
}

/// The documents users read: the README and every Markdown file under `docs/`.
fn documents() -> Vec<PathBuf> {
    let mut found = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let path = entry.path();
            match path.extension().and_then(|e| e.to_str()) {
                _ if path.is_dir() => dirs.push(path),
                Some("md") => found.push(path),
                _ => {}
            }
        }
    }
    found
}

/// The commands of `text` that start with `cargo test`, `cargo bench` or `gnomon`: in
/// backticks, or a line of a fenced block (a `$ ` prompt and a `# comment` dropped).
fn commands(text: &str) -> Vec<String> {
    let wanted = |c: &str| c.starts_with("cargo test") || c.starts_with("cargo bench") || c.starts_with("gnomon ");
    let mut found = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            let command = line.trim().trim_start_matches("$ ");
            let command = command.split(" #").next().unwrap_or_default().trim();
            found.extend(command.split("&&").map(str::trim).filter(|c| wanted(c)).map(str::to_owned));
        }
        let spans = line.split('`').skip(1).step_by(2);
        found.extend(spans.filter(|c| wanted(c)).map(str::to_owned));
    }
    found
}

/// Each workspace package's name and folder.
fn packages() -> BTreeMap<String, PathBuf> {
    let workspace: toml::Table = std::fs::read_to_string(root().join("Cargo.toml")).unwrap().parse().unwrap();
    let members = workspace["workspace"]["members"].as_array().unwrap();
    members
        .iter()
        .map(|m| {
            let dir = root().join(m.as_str().unwrap());
            let manifest: toml::Table = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap().parse().unwrap();
            (manifest["package"]["name"].as_str().unwrap().to_owned(), dir)
        })
        .collect()
}

/// What is wrong with a `cargo test` or `cargo bench` line, if anything.
fn cargo_wrong(command: &str, packages: &BTreeMap<String, PathBuf>) -> Option<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let named: Vec<&str> = words.windows(2).filter(|w| w[0] == "-p").map(|w| w[1]).collect();
    if let Some(p) = named.iter().find(|p| !packages.contains_key(**p)) {
        return Some(format!("no package `{p}` in the workspace"));
    }
    for (flag, folder) in [("--test", "tests"), ("--bench", "benches")] {
        for target in words.windows(2).filter(|w| w[0] == flag).map(|w| w[1]) {
            let has = |p: &&str| packages[*p].join(folder).join(format!("{target}.rs")).is_file();
            if named.is_empty() || !named.iter().any(has) {
                return Some(format!("no `{flag} {target}` in {named:?}"));
            }
        }
    }
    None
}

/// What is wrong with a `gnomon` line, if anything: its subcommand's help, asked of the
/// binary, must succeed and list each of its flags.
fn gnomon_wrong(command: &str) -> Option<String> {
    let words: Vec<&str> = command.split('|').next()?.split_whitespace().skip(1).collect();
    let sub = words.first().copied().filter(|w| !w.starts_with('-'));
    let mut help = Command::new(env!("CARGO_BIN_EXE_gnomon"));
    help.args(sub).arg("--help");
    let out = help.output().unwrap();
    if !out.status.success() {
        return Some(format!("`gnomon {} --help` fails", sub.unwrap_or_default()));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let flags = words.iter().map(|w| w.trim_start_matches('[').trim_end_matches(']')).filter(|w| w.starts_with("--"));
    let flag = |w: &str| w.split('=').next().unwrap_or_default().to_owned();
    flags.map(flag).find(|f| !text.contains(f.as_str())).map(|f| format!("`{f}` is no flag of its help"))
}

#[test]
fn every_documented_command_would_run() {
    let packages = packages();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        for command in commands(&text) {
            // Hidden subcommands (`__…`) have no help of their own: the runner calls them.
            if command.starts_with("gnomon __") {
                continue;
            }
            checked += 1;
            let why = match command.starts_with("cargo") {
                true => cargo_wrong(&command, &packages),
                false => gnomon_wrong(&command),
            };
            if let Some(why) = why {
                wrong.push(format!("{}: `{command}`: {why}", doc.strip_prefix(root()).unwrap().display()));
            }
        }
    }
    assert!(checked > 50, "only {checked} commands found");
    assert!(wrong.is_empty(), "{} documented commands would not run:\n{}", wrong.len(), wrong.join("\n"));
}

/// The checks themselves: a package, a target and a flag that do not exist are each named.
#[test]
fn a_command_that_would_not_run_is_named() {
    let packages = packages();
    let said = |c: &str| cargo_wrong(c, &packages).unwrap_or_default();
    assert_eq!(said("cargo bench -p gnomon-core --bench chunk_hash"), "no `--bench chunk_hash` in [\"gnomon-core\"]");
    assert_eq!(said("cargo test -p gnomon-nothing"), "no package `gnomon-nothing` in the workspace");
    assert_eq!(cargo_wrong("cargo bench -p gnomon-format --bench chunk_hash", &packages), None);
    assert_eq!(gnomon_wrong("gnomon qualify --no-such-flag"), Some("`--no-such-flag` is no flag of its help".into()));
    assert_eq!(gnomon_wrong("gnomon frobnicate"), Some("`gnomon frobnicate --help` fails".into()));
    assert_eq!(gnomon_wrong("gnomon run --report-dir DIR"), None);
    assert_eq!(
        commands("run `gnomon run cpu/` then\n```sh\n$ cargo test -p x # why\n```"),
        ["gnomon run cpu/", "cargo test -p x"]
    );
}
