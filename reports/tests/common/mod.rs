//! A hand-made report shared by the renderer, compare and summary tests.

use std::collections::BTreeMap;

use gnomon_reports::{CaseId, CaseRecord, Environment, Gpu, GpuProcess, LeftOut, Metric, Report, Run, Status, Subject};

pub fn case(id: &str, status: Status, reason: Option<&str>, claim: &str) -> CaseRecord {
    CaseRecord {
        id: CaseId::new(id),
        family: id.split('/').next().unwrap().into(),
        parameters: BTreeMap::new(),
        status,
        reason: reason.map(Into::into),
        attempts: if status == Status::Flaky { 2 } else { 1 },
        duration_s: 0.25,
        metrics: BTreeMap::from([("restore".to_owned(), Metric::new(0.125, "s"))]),
        claims: vec![claim.into()],
        stderr: (status == Status::Crashed).then(|| "CUDA_ERROR_ILLEGAL_ADDRESS".into()),
    }
}

/// A report with a case of every status and a claim left not established.
pub fn hand_made() -> Report {
    let cases = vec![
        case("cpu/flags/value=1/accepted", Status::Passed, None, "flags-contract"),
        case("gpu/flags/value=8/launch", Status::ExpectedFailure, Some("driver drops bit 8"), "flags-fidelity"),
        case(
            "gpu/flags/value=9/launch",
            Status::UnexpectedPass,
            Some("expected to fail on this driver"),
            "flags-fidelity",
        ),
        case("gpu/fault/sticky", Status::Crashed, Some("killed by signal 6"), "isolation"),
        case("gpu/hang", Status::TimedOut, Some("no result within 2s"), "isolation"),
        case(
            "replay/gemm/cap=64MiB/handover=exit",
            Status::Blocked,
            Some("address 0x200000000000 wanted, 0x7f0000000000 got"),
            "native-replay",
        ),
        case(
            "replay/gemm/cap=64GiB/handover=exit",
            Status::Failed,
            Some("output `c` differs at byte 12"),
            "native-replay",
        ),
        case(
            "gpu/tensor-parallel/two-ranks",
            Status::Skipped,
            Some("needs 2 CUDA GPUs, 1 present"),
            "tensor-parallel-readiness",
        ),
        case("gpu/flags/value=0/launch", Status::Flaky, Some("passed on attempt 2"), "flags-fidelity"),
    ];
    let run = Run {
        id: "20261129T160000Z-1".into(),
        started_at: "2026-11-29T16:00:00Z".into(),
        duration_s: 2.5,
        profile: "release".into(),
        filters: vec!["gpu/".into()],
        partition: None,
        complete: true,
        // The filter left out the only case of a claim, and one that declares none.
        left_out: vec![
            LeftOut { id: CaseId::new("cpu/shards/cap=64MiB/edge"), claims: vec!["shard-planning".into()] },
            LeftOut { id: CaseId::new("cpu/report/round-trip"), claims: vec![] },
        ],
    };
    let subject =
        Subject { name: "gnomon-core reference exporter".into(), version: "0.1.0".into(), commit: "abc123".into() };
    let environment = Environment {
        host: "runner-1".into(),
        cpu: "x86_64 x16".into(),
        os: "Ubuntu 24.04".into(),
        harness_version: "0.1.0".into(),
        harness_commit: "abc123".into(),
        gpus: vec![Gpu { index: 0, name: "NVIDIA H200".into(), arch: "sm_90".into(), memory_bytes: 150_754_820_096 }],
        driver_version: Some("13.0".into()),
        driver_release: Some("580.159.04".into()),
        nvrtc_version: Some("13.0".into()),
        gpu_unavailable: None,
        transparent_huge_pages: Some("madvise".into()),
        gpu_processes: vec![GpuProcess { gpu: 0, pid: 4242, name: "python3".into(), used_bytes: Some(2 << 30) }],
    };
    Report::new(run, subject, environment, cases)
}
