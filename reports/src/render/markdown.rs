use std::fmt::Write;

use crate::Report;

/// A Markdown page: environment, totals, claims, then one row per case.
pub fn markdown(r: &Report) -> String {
    let mut out = String::new();
    let env = &r.environment;
    let _ = writeln!(out, "# Gnomon report `{}`\n", r.run.id);
    let _ = writeln!(out, "- subject: {} {} (`{}`)", r.subject.name, r.subject.version, r.subject.commit);
    let _ = writeln!(out, "- harness: {} (`{}`), profile `{}`", env.harness_version, env.harness_commit, r.run.profile);
    let _ = writeln!(out, "- host: {} ({}; {})", env.host, env.cpu, env.os);
    for gpu in &env.gpus {
        let _ = writeln!(out, "- GPU {}: {} ({}, {} B)", gpu.index, gpu.name, gpu.arch, gpu.memory_bytes);
    }
    if let Some(reason) = &env.gpu_unavailable {
        let _ = writeln!(out, "- no GPU: {reason}");
    }
    for (label, value) in
        [("driver", &env.driver_release), ("CUDA (driver API)", &env.driver_version), ("NVRTC", &env.nvrtc_version)]
    {
        if let Some(v) = value {
            let _ = writeln!(out, "- {label}: {v}");
        }
    }
    let totals: Vec<String> = r.totals.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let _ = writeln!(out, "\n**Totals:** {}\n", totals.join(", "));
    let _ = writeln!(out, "## Claims\n");
    for c in &r.claims {
        let verdict = if c.established { "established" } else { "**not established**" };
        let _ = writeln!(out, "- `{}`: {verdict} ({} cases)", c.claim, c.cases);
        for s in &c.not_passed {
            let _ =
                writeln!(out, "  - `{}` {}: {}", s.case, s.status, s.reason.as_deref().unwrap_or("no reason given"));
        }
    }
    let _ = writeln!(out, "\n## Cases\n\n| case | status | seconds | reason |\n|---|---|---|---|");
    for c in &r.cases {
        let reason = c.reason.as_deref().unwrap_or("").replace('|', "\\|").replace('\n', " ");
        let _ = writeln!(out, "| `{}` | {} | {:.3} | {reason} |", c.id, c.status, c.duration_s);
    }
    out
}
