use std::fmt::Write;

use crate::{
    text::{md_cell, md_code, printable},
    Report, Status,
};

/// A Markdown page: environment, totals, claims, then one row per case.
pub fn markdown(r: &Report) -> String {
    let mut out = String::new();
    let env = &r.environment;
    let _ = writeln!(out, "# Gnomon report `{}`\n", r.run.id);
    let subject = &r.subject;
    let _ = writeln!(
        out,
        "- subject: {} {} ({})",
        printable(&subject.name),
        printable(&subject.version),
        md_code(&subject.commit)
    );
    let _ = writeln!(out, "- harness: {} (`{}`), profile `{}`", env.harness_version, env.harness_commit, r.run.profile);
    let _ = writeln!(out, "- host: {} ({}; {})", printable(&env.host), printable(&env.cpu), printable(&env.os));
    for gpu in &env.gpus {
        let (name, arch) = (printable(&gpu.name), printable(&gpu.arch));
        let _ = writeln!(out, "- GPU {}: {name} ({arch}, {} B)", gpu.index, gpu.memory_bytes);
    }
    if let Some(reason) = &env.gpu_unavailable {
        let _ = writeln!(out, "- no GPU: {}", printable(reason));
    }
    let facts = [
        ("driver", &env.driver_release),
        ("CUDA (driver API)", &env.driver_version),
        ("NVRTC", &env.nvrtc_version),
        ("transparent huge pages", &env.transparent_huge_pages),
    ];
    for (label, value) in facts {
        if let Some(v) = value {
            let _ = writeln!(out, "- {label}: {}", printable(v));
        }
    }
    if !env.gpu_processes.is_empty() {
        let _ = writeln!(out, "- **shared GPU:** {}", printable(&crate::shared_with(&env.gpu_processes)));
    }
    if let Some(selection) = selection(r) {
        let _ = writeln!(out, "- selection: {selection}");
    }
    if !r.run.complete {
        let _ = writeln!(out, "- **incomplete:** the run ended before every selected case had a result");
    }
    let totals: Vec<String> = r.totals.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let _ = writeln!(out, "\n**Totals:** {}\n", totals.join(", "));
    claims(&mut out, r);
    let not_run = crate::not_run(&r.cases);
    if !not_run.is_empty() {
        let _ = writeln!(out, "\n## Not run\n");
        for g in &not_run {
            let _ = writeln!(out, "- {}: {}", g.who(), printable(g.reason));
        }
    }
    if !r.expectation_problems.is_empty() {
        let _ = writeln!(out, "\n## Expectations\n");
        for problem in &r.expectation_problems {
            let _ = writeln!(out, "- {}", printable(problem));
        }
    }
    let counted: Vec<_> = not_run.iter().filter(|g| g.is_counted()).flat_map(|g| g.cases.iter().copied()).collect();
    let _ = writeln!(out, "\n## Cases\n\n| case | status | seconds | reason |\n|---|---|---|---|");
    for c in &r.cases {
        let reason = match counted.contains(&&c.id) {
            true => "see *Not run*".into(),
            false => md_cell(c.reason.as_deref().unwrap_or("")),
        };
        let _ = writeln!(out, "| {} | {} | {:.3} | {reason} |", md_code(c.id.as_str()), c.status, c.duration_s);
    }
    out
}

fn claims(out: &mut String, r: &Report) {
    let _ = writeln!(out, "## Claims\n");
    for c in &r.claims {
        if c.established {
            let _ = writeln!(out, "- {}: established ({} passed)", md_code(&c.claim), cases(c.cases as usize));
            continue;
        }
        let (short, of, left) = (c.not_passed.len(), cases(c.cases as usize), c.left_out.len());
        let why = match (c.cases, left) {
            (0, _) => format!("none of its {} ran: left out by the selection", cases(left)),
            (_, 0) => format!("{short} of {of} did not pass"),
            _ => format!("{short} of {of} did not pass; {} left out by the selection", cases(left)),
        };
        let _ = writeln!(out, "- {}: **not established** ({why})", md_code(&c.claim));
        for g in crate::group(c.not_passed.iter().map(|s| (&s.case, s.status, s.reason.as_deref()))) {
            match g.status {
                Status::Skipped | Status::Blocked => writeln!(out, "  - {} (see *Not run*)", g.who()),
                _ => writeln!(out, "  - {}: {}", g.who(), printable(g.reason)),
            }
            .expect("writing to a String cannot fail");
        }
    }
}

fn cases(n: usize) -> String {
    if n == 1 {
        "1 case".into()
    } else {
        format!("{n} cases")
    }
}

/// The filters and partition of a run that did not select the whole catalogue.
fn selection(r: &Report) -> Option<String> {
    let mut parts: Vec<String> = r.run.filters.iter().map(|f| format!("filter {}", md_code(f))).collect();
    parts.extend(r.run.partition.iter().map(|p| format!("partition `{p}`")));
    let left_out = crate::left_out(&r.run.left_out);
    (!parts.is_empty() || left_out.is_some()).then(|| {
        let what = if parts.is_empty() { "the selection".to_owned() } else { parts.join(", ") };
        left_out.map_or(what.clone(), |left| format!("{what}, which left out {left}"))
    })
}
