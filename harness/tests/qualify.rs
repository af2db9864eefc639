//! `gnomon qualify` without a GPU: targets and profiles are read and refused up front,
//! case ids name the core, the rank and the template, validation runs here, and a batch's
//! children (run at once) give every case a record, also when a child dies.

use std::{path::Path, process::Command, sync::Arc};

use gnomon::runner::{run, CaseSource, RunConfig};
use gnomon_cases::{
    qualify::{cases, Placement, Profile, Target},
    Batch, BatchChild, Case, Requirement,
};
use gnomon_reports::{exit_codes, Report, Status, Subject};

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/golden/v1");
const PROFILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/qualify/profile.toml");

fn gnomon(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gnomon")).args(args).output().expect("gnomon runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The golden core copied as ranks 0..world of a set under `set`.
fn rank_set(set: &Path, world: u32) {
    for rank in 0..world {
        let to = set.join(format!("rank-{rank}"));
        for sub in ["modules", "shards"] {
            std::fs::create_dir_all(to.join(sub)).unwrap();
        }
        for file in ["modules/m0.ptx", "shards/000.bin", "shards/001.bin"] {
            std::fs::copy(Path::new(GOLDEN).join(file), to.join(file)).unwrap();
        }
        let mut manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(Path::new(GOLDEN).join("manifest.json")).unwrap()).unwrap();
        manifest["context"]["tp-rank"] = rank.into();
        manifest["context"]["tp-world-size"] = world.into();
        std::fs::write(to.join("manifest.json"), serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
    }
}

#[test]
fn the_example_profile_is_valid_and_bad_profiles_are_refused() {
    let profile = Profile::load(Path::new(PROFILE)).unwrap();
    assert_eq!(profile.launches, 3);
    assert_eq!(profile.tolerance("decode-b8", "logits"), Some(1e-4));
    let budgets = |target| profile.budgets_for(target).into_keys().collect::<Vec<_>>();
    assert_eq!(budgets("decode"), ["restore-total-s", "restore-us-per-node"]);
    assert_eq!(budgets("model-scale-nightly"), ["restore-total-s", "restore-us-per-node", "upload-gbps"]);
    let path = Path::new("p.toml");
    for (text, says) in [
        ("launches = 1", "determinism needs 2 to 1000 launches"),
        ("[tolerances]\nlogits = 0.1", "keys are TEMPLATE/BUFFER"),
        ("[tolerances]\n\"t/b\" = -1.0", "finite and ≥ 0"),
        ("[budgets]\nupload-gbps = {}", "give a finite max, min or both"),
        ("colour = \"red\"", "unknown field `colour`"),
        ("[[expect]]\ncases = \"x\"\nstatus = \"passed\"\nreason = \"r\"\nlink = \"l\"", "status must be failed"),
    ] {
        let refused = Profile::parse(text, path).err().unwrap_or_default();
        assert!(refused.contains(says), "{text}: {refused}");
    }
}

#[test]
fn case_ids_name_the_core_the_rank_and_the_template() {
    let tmp = tempfile::tempdir().unwrap();
    rank_set(&tmp.path().join("tp2"), 2);
    let (code, stdout, stderr) =
        gnomon(&["qualify", GOLDEN, tmp.path().join("tp2").to_str().unwrap(), "--profile", PROFILE, "--list"]);
    assert_eq!(code, Some(exit_codes::SUCCESS), "{stderr}");
    insta::assert_snapshot!(stdout);
}

#[test]
fn without_a_gpu_validation_still_judges_and_the_rest_is_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    rank_set(&tmp.path().join("tp2"), 2);
    let dir = tmp.path().join("report");
    let tp2 = tmp.path().join("tp2");
    let (code, _, stderr) = gnomon(&["qualify", GOLDEN, tp2.to_str().unwrap(), "--report-dir", dir.to_str().unwrap()]);
    // Nothing was qualified: a gate on the exit code must not pass the port.
    assert_eq!(code, Some(exit_codes::PRECONDITION), "{stderr}");
    assert!(stderr.contains("gnomon: nothing was qualified: no usable GPU ("), "{stderr}");
    let accepted = tmp.path().join("accepted");
    let (code, _, stderr) = gnomon(&[
        "qualify",
        GOLDEN,
        tp2.to_str().unwrap(),
        "--report-dir",
        accepted.to_str().unwrap(),
        "--allow-no-gpu",
    ]);
    assert_eq!(code, Some(exit_codes::SUCCESS), "{stderr}");
    assert!(!stderr.contains("nothing was qualified"), "{stderr}");
    let report = Report::parse(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let status = |id: &str| report.cases.iter().find(|c| c.id.as_str() == id).map(|c| c.status);
    for passed in
        ["qualify/v1/validate", "qualify/tp2/ranks-agree", "qualify/tp2/rank=0/validate", "qualify/tp2/rank=1/validate"]
    {
        assert_eq!(status(passed), Some(Status::Passed), "{passed}");
    }
    let two = report.cases.iter().find(|c| c.id.as_str() == "qualify/tp2/concurrent").unwrap();
    assert_eq!(two.status, Status::Skipped);
    assert!(
        two.reason.as_deref().unwrap().starts_with("needs 2 CUDA GPUs")
            || two.reason.as_deref().unwrap().contains("needs a CUDA GPU")
    );
    assert!(report.subject.name.contains("v1, tp2"), "{}", report.subject.name);
}

#[test]
fn targets_that_cannot_be_read_or_would_collide_are_refused_up_front() {
    let (code, _, stderr) = gnomon(&["qualify", "/no/such/core"]);
    assert_eq!(code, Some(exit_codes::USAGE));
    assert!(stderr.contains("/no/such/core"), "{stderr}");
    let (code, _, stderr) = gnomon(&["qualify", GOLDEN, GOLDEN]);
    assert_eq!(code, Some(exit_codes::USAGE));
    assert!(stderr.contains("two targets are named `v1`"), "{stderr}");
    let tmp = tempfile::tempdir().unwrap();
    rank_set(&tmp.path().join("tp2"), 2);
    std::fs::remove_dir_all(tmp.path().join("tp2/rank-0")).unwrap();
    let (code, _, stderr) = gnomon(&["qualify", tmp.path().join("tp2").to_str().unwrap()]);
    assert_eq!(code, Some(exit_codes::USAGE));
    assert!(stderr.contains("holds rank 1 where rank 0 belongs"), "{stderr}");
}

/// Runs `cases` through the runner and returns the report.
fn run_cases(cases: Vec<Case>, dir: &Path) -> (i32, Report) {
    let config = RunConfig {
        source: CaseSource::Given { cases, subject: Subject::default() },
        // Into a file: libtest's lines on stdout would be summed by CI as this binary's.
        libtest: libtest_mimic::Arguments {
            logfile: Some(dir.with_extension("log").display().to_string()),
            ..Default::default()
        },
        report_dir: Some(dir.to_owned()),
        require_arch: None,
        case_timeout: std::time::Duration::from_secs(60),
        retries: 0,
        profile: "test".into(),
        child_exe: env!("CARGO_BIN_EXE_gnomon").into(),
        partition: None,
        expectations: gnomon_cases::expectations::Expectations::parse("").unwrap(),
        empty_selection_fails: true,
        needs_gpu: false,
    };
    let code = run(config);
    (code, Report::parse(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap())
}

#[test]
fn a_batch_runs_its_children_at_once_and_every_case_gets_a_record() {
    let tmp = tempfile::tempdir().unwrap();
    rank_set(&tmp.path().join("tp2"), 2);
    let target = Target::find(&tmp.path().join("tp2")).unwrap();
    // Rank R on GPU R, or every rank on GPU 0: the set needs as many GPUs.
    for (placement, device, gpus) in [(Placement::OwnGpu, 1, 2), (Placement::OneGpu, 0, 1)] {
        let listed = cases(std::slice::from_ref(&target), &Profile::default(), placement);
        let concurrent = listed.iter().find(|c| c.id.as_str() == "qualify/tp2/concurrent").unwrap();
        assert_eq!(concurrent.requires, Requirement::Gpus(gpus));
        // Required nothing, so the batch runs here: each rank's child validates its core,
        // finds no GPU and blocks its cases, saying why.
        let cases: Vec<Case> = listed.into_iter().map(|c| c.requiring(Requirement::Nothing)).collect();
        let (_, report) = run_cases(cases, &tmp.path().join(format!("report-{device}")));
        let map = report.cases.iter().find(|c| c.id.as_str() == "qualify/tp2/rank=1/map").unwrap();
        assert_eq!(map.status, Status::Blocked);
        assert!(map.reason.as_deref().unwrap().starts_with(&format!("open device {device}:")), "{map:?}");
        let concurrent = report.cases.iter().find(|c| c.id.as_str() == "qualify/tp2/concurrent").unwrap();
        assert_eq!(
            (concurrent.status, concurrent.reason.as_deref()),
            (Status::Blocked, Some("a rank gave no replay window"))
        );
    }
}

#[test]
fn a_child_that_dies_gives_each_of_its_cases_a_crashed_record() {
    let tmp = tempfile::tempdir().unwrap();
    let listed = |id: &str| Case::judged_by_batch(id, "port-qualification", Requirement::Nothing);
    let child = BatchChild {
        args: vec!["__qualify-core".into(), "--no-such-flag".into()],
        cases: vec![listed("qualify/x/map"), listed("qualify/x/upload")],
    };
    let batch = Arc::new(Batch { children: vec![child], combine: Box::new(|_| Vec::new()) });
    let cases = vec![listed("qualify/x/map").in_batch(&batch), listed("qualify/x/upload").in_batch(&batch)];
    let (code, report) = run_cases(cases, &tmp.path().join("report"));
    assert_eq!(code, exit_codes::CASES_FAILED);
    for case in &report.cases {
        assert_eq!(case.status, Status::Crashed, "{case:?}");
        assert!(case.reason.as_deref().unwrap().contains("ended without a result: exit code 2"), "{case:?}");
        assert!(case.stderr.as_deref().unwrap().contains("--no-such-flag"), "{case:?}");
    }
}
