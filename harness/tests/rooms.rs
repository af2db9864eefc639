//! The rooms of the workspace and which may import which (ARCHITECTURE.md), read from
//! `cargo metadata`: a new dependency between crates, or a CUDA crate reaching the format,
//! fails here before it settles in.

use std::{
    collections::{BTreeMap, BTreeSet},
    process::Command,
};

use serde_json::Value;

/// Each crate of the workspace and the workspace crates it may depend on (normal
/// dependencies; tests and benchmarks may reach further down).
const ALLOWED: [(&str, &[&str]); 9] = [
    ("gnomon-format", &[]),
    ("gnomon-core", &["gnomon-format"]),
    ("gnomon-reports", &[]),
    ("gnomon-trend", &["gnomon-reports"]),
    ("gnomon-fixtures", &["gnomon-format", "gnomon-core"]),
    ("gnomon-cases", &["gnomon-format", "gnomon-core", "gnomon-fixtures", "gnomon-reports"]),
    ("gnomon", &["gnomon-format", "gnomon-core", "gnomon-cases", "gnomon-reports", "gnomon-trend"]),
    ("gnomon-kit", &["gnomon-format", "gnomon-core"]),
    ("gnomon-python", &["gnomon-format", "gnomon-core", "gnomon-kit"]),
];

/// Crates that reach the GPU or its driver: none may be under the format crate.
const GPU_CRATES: [&str; 3] = ["cudarc", "nvml-wrapper", "libloading"];

struct Graph {
    /// Package name → its normal dependencies' names.
    normal: BTreeMap<String, BTreeSet<String>>,
    workspace: BTreeSet<String>,
}

fn graph() -> Graph {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked", "--manifest-path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"))
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata writes JSON");
    let name_of: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let workspace =
        meta["workspace_members"].as_array().unwrap().iter().map(|id| name_of[id.as_str().unwrap()].to_owned());
    let normal = meta["resolve"]["nodes"].as_array().unwrap().iter().map(|node| {
        let deps = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["dep_kinds"].as_array().unwrap().iter().any(|k| k["kind"].is_null()));
        let names = deps.map(|d| name_of[d["pkg"].as_str().unwrap()].to_owned()).collect();
        (name_of[node["id"].as_str().unwrap()].to_owned(), names)
    });
    Graph { normal: normal.collect(), workspace: workspace.collect() }
}

impl Graph {
    /// Every crate `name` builds on, itself excluded.
    fn closure(&self, name: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut next = vec![name.to_owned()];
        while let Some(n) = next.pop() {
            for d in self.normal.get(&n).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    next.push(d.clone());
                }
            }
        }
        seen
    }
}

#[test]
fn each_crate_imports_only_the_rooms_below_it() {
    let g = graph();
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.into_iter().collect();
    let listed: BTreeSet<String> = allowed.keys().map(|k| k.to_string()).collect();
    assert_eq!(g.workspace, listed, "every workspace crate has its row in ALLOWED");
    for (krate, may) in allowed {
        let used: BTreeSet<&str> =
            g.normal[krate].iter().filter(|d| g.workspace.contains(*d)).map(String::as_str).collect();
        let may: BTreeSet<&str> = may.iter().copied().collect();
        assert_eq!(used, may, "{krate}'s workspace dependencies");
    }
}

#[test]
fn the_format_crate_builds_on_no_gpu_crate() {
    let g = graph();
    let under = g.closure("gnomon-format");
    let gpu: Vec<&str> = GPU_CRATES.into_iter().filter(|c| under.contains(*c)).collect();
    assert!(gpu.is_empty(), "gnomon-format builds on {gpu:?}");
    // The rule can fail: the GPU crate does build on them.
    assert!(g.closure("gnomon-core").contains("cudarc"));
}

/// The crates `cargo tree` lists for `package` with its dev-dependencies, as its own
/// tests build it (features resolved for that package alone).
fn tree_with_tests(package: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--locked", "-e", "normal,dev", "--prefix", "none", "--format", "{p}", "-p", package])
        .arg("--manifest-path")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"))
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("cargo tree writes UTF-8");
    text.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_owned).collect()
}

#[test]
fn the_format_crate_tests_on_no_gpu_crate() {
    // Its refusal tests use the fixtures without their `workloads` feature.
    let under = tree_with_tests("gnomon-format");
    assert!(under.contains("gnomon-fixtures"), "the format's tests use the fixtures: {under:?}");
    let gpu: Vec<&str> = GPU_CRATES.into_iter().filter(|c| under.contains(*c)).collect();
    assert!(gpu.is_empty(), "gnomon-format's tests build on {gpu:?}");
    assert!(tree_with_tests("gnomon-cases").contains("cudarc"));
}

/// `core/src/cuda/` speaks the driver's terms only: the format's types are translated to
/// and from them in `core/src/translate.rs`, so no file of the driver layer names the format.
#[test]
fn the_driver_layer_names_no_format_type() {
    let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../core/src/cuda"));
    let mut read = 0;
    for entry in std::fs::read_dir(dir).expect("core/src/cuda is a folder") {
        let path = entry.expect("a readable entry").path();
        let text = std::fs::read_to_string(&path).expect("a source file");
        assert!(!text.contains("gnomon_format"), "{} names the format crate", path.display());
        read += 1;
    }
    assert!(read >= 5, "read {read} files of the driver layer");
}
