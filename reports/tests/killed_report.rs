//! A report writer killed at any point leaves each of `report.json`, `report.md` and
//! `junit.xml` as the last complete run wrote it or as the new one does: never a torn file,
//! never none. The writer is `render::write_files` (what `render::write_all`, with which
//! `gnomon run` and `gnomon qualify` write their reports, calls once they are rendered), in
//! this test binary run again as a child (`a_child_writes_the_next_reports`); the parent
//! kills it with SIGKILL at delays spread over three times what an unkilled child takes to
//! write, and reads what stands.
//! Run alone: `cargo test -p gnomon-reports --test killed_report -- --nocapture`.

mod common;

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, Stdio},
    time::Instant,
};

use gnomon_reports::{render, Report};

const DIR: &str = "GNOMON_KILLED_REPORT_DIR";
const GENERATION: &str = "GNOMON_KILLED_REPORT_GENERATION";
const KILLS: u32 = 50;
/// Kills are spread over this many times an unkilled writer's time: a third fall inside the
/// writes, and the rest after, even on a runner busy enough to write slower than the one
/// timed.
const SPREAD: f64 = 3.0;
/// The length of one case's reason: files of a quarter megabyte, long enough that a kill can
/// fall inside a write.
const REASON_BYTES: usize = 256 << 10;

/// Generation `g`'s report: one case's long reason names the generation throughout.
fn report(g: u32) -> Report {
    let mut r = common::hand_made();
    r.run.id = format!("generation-{g}");
    let said = format!("generation {g} ");
    r.cases[0].reason = Some(said.repeat(REASON_BYTES / said.len()));
    r
}

/// Each file as generation `g` renders it.
fn rendered(g: u32) -> BTreeMap<&'static str, String> {
    render::files(&report(g)).into_iter().collect()
}

/// The child's part: does nothing unless the parent set `DIR`.
#[test]
fn a_child_writes_the_next_reports() {
    let (Ok(dir), Ok(g)) = (std::env::var(DIR), std::env::var(GENERATION)) else { return };
    let files = render::files(&report(g.parse().unwrap()));
    println!("writing");
    render::write_files(&files, Path::new(&dir)).unwrap();
    println!("done");
}

/// A child writing generation `g`'s reports into `dir`, once it has said it is writing.
fn writing(dir: &Path, g: u32) -> (Child, impl Iterator<Item = String>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["a_child_writes_the_next_reports", "--exact", "--nocapture", "--test-threads=1"])
        .env(DIR, dir)
        .env(GENERATION, g.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null()) // a killed child's broken pipe is no news
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok);
    assert!(lines.any(|l| l.ends_with("writing")), "generation {g}: the child never began to write");
    (child, lines)
}

#[test]
fn a_killed_report_writer_leaves_each_file_old_or_new() {
    let dir = tempfile::tempdir().unwrap();
    render::write_all(&report(0), dir.path()).unwrap();
    let (mut calibration, mut lines) = writing(dir.path(), 1);
    let started = Instant::now();
    assert!(lines.any(|l| l.ends_with("done")));
    let window = started.elapsed();
    calibration.wait().unwrap();
    let mut standing: BTreeMap<&str, u32> = rendered(0).into_keys().map(|f| (f, 1)).collect();
    let (mut renderings, mut old, mut new) = (BTreeMap::from([(1, rendered(1))]), 0, 0);
    for k in 0..KILLS {
        let g = k + 2;
        let (mut child, _) = writing(dir.path(), g);
        std::thread::sleep(window.mul_f64(SPREAD * f64::from(k) / f64::from(KILLS)));
        let _ = child.kill();
        child.wait().unwrap();
        renderings.insert(g, rendered(g));
        for file in standing.clone().into_keys() {
            let now = std::fs::read_to_string(dir.path().join(file)).unwrap_or_default();
            let was = standing[file];
            match () {
                _ if now == renderings[&g][file] => (new, *standing.get_mut(file).unwrap()) = (new + 1, g),
                _ if now == renderings[&was][file] => old += 1,
                _ => panic!("kill {k}: `{file}` ({} bytes) is neither generation {was}'s nor {g}'s", now.len()),
            }
        }
        renderings.retain(|r, _| standing.values().any(|s| s == r));
    }
    let left = std::fs::read_dir(dir.path()).unwrap().count() - standing.len();
    println!(
        "{KILLS} kills over {SPREAD} x the {window:?} an unkilled writer took: {old} files stood as before, {new} \
         new, 0 torn, 0 lost ({left} temporary files of killed writers left beside them)"
    );
    assert!(old > 0 && new > 0, "the kills fall before, during and after the writes: {old} / {new}");
}
