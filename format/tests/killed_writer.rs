//! A writer killed at any point leaves the core that was there or the new one, complete and
//! valid: never a mixture, never neither. The writer is this test binary run again as a
//! child (`a_child_writes_the_next_core`), which writes the sample core over the last one
//! with padding files that stretch its writing, saying on stdout where it is; the parent
//! kills it with SIGKILL at points spread over every stage (the files, the manifest, the
//! sync, the swap, the old core's removal), then validates what stands at the directory.
//! Run alone: `cargo test -p gnomon-format --test killed_writer -- --nocapture`.

use std::{
    io::{BufRead, BufReader, Lines},
    path::Path,
    process::{Child, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use gnomon_fixtures::sample::CoreDraft;
use gnomon_format::{Core, CoreWriter};

/// Where the child writes, and which generation it writes (set only in the child).
const OUT: &str = "GNOMON_KILLED_WRITER_OUT";
const GENERATION: &str = "GNOMON_KILLED_WRITER_GENERATION";
const PADDING_FILES: usize = 40;
/// Kills after a padding file; then kills at delays after the last file spread evenly over
/// 1.2 × what the manifest, the sync, the swap and the removal took a child that was not
/// killed.
const AFTER_FILES: [usize; 20] = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 39];
const DELAYED_KILLS: u32 = 40;

/// The sample core of generation `g`: its producer's commit says which, and its module's
/// text differs from every other generation's, so a manifest beside another generation's
/// files is refused.
fn draft(g: u32) -> CoreDraft {
    let mut d = CoreDraft::sample();
    d.manifest.context.producer.commit = format!("generation-{g}");
    let module = &mut d.manifest.modules[0];
    let text = d.files.get_mut(&module.file).expect("the module's file");
    text.extend_from_slice(format!("// generation {g}\n").as_bytes());
    module.sha256 = gnomon_fixtures::sample::sha(text);
    d
}

fn write(out: &Path, g: u32, say: impl Fn(&str)) {
    let d = draft(g);
    let writer = CoreWriter::create(out).unwrap();
    for (path, bytes) in &d.files {
        writer.write_file(path, bytes).unwrap();
    }
    for i in 0..PADDING_FILES {
        writer.write_file(&format!("padding/{i:03}.bin"), &vec![g as u8; 16 << 10]).unwrap();
        say(&format!("file {i}"));
    }
    say("manifest");
    writer.write_manifest(&d.manifest).unwrap();
    say("done");
}

/// The child's part: does nothing unless the parent set `OUT`.
#[test]
fn a_child_writes_the_next_core() {
    let (Ok(out), Ok(g)) = (std::env::var(OUT), std::env::var(GENERATION)) else { return };
    write(Path::new(&out), g.parse().unwrap(), |line| println!("{line}"));
}

/// Which generation of the core stands at `out`, checked whole.
fn standing(out: &Path) -> u32 {
    let core = Core::open(out).unwrap_or_else(|e| panic!("neither the old core nor the new one stands: {e}"));
    let commit = &core.manifest().context.producer.commit;
    commit.strip_prefix("generation-").and_then(|g| g.parse().ok()).expect("a generation")
}

/// The child writing generation `g` at `out`, and its lines.
fn child(out: &Path, g: u32) -> (Child, Lines<BufReader<ChildStdout>>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["a_child_writes_the_next_core", "--exact", "--nocapture", "--test-threads=1"])
        .env(OUT, out)
        .env(GENERATION, g.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    (child, lines)
}

/// Reads `lines` until one says `what` (the first follows libtest's own `test … ...`).
fn said(lines: &mut Lines<BufReader<ChildStdout>>, what: &str) -> bool {
    lines.map_while(Result::ok).any(|l| l.ends_with(what))
}

#[test]
fn a_killed_writer_leaves_the_old_core_or_the_new_one() {
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("core");
    write(&out, 0, |_| {});
    // How long the last stage takes here: one child left to finish.
    let (mut calibration, mut lines) = child(&out, 1);
    assert!(said(&mut lines, "manifest"));
    let started = Instant::now();
    assert!(said(&mut lines, "done"));
    let last_stage = started.elapsed();
    calibration.wait().unwrap();
    let delays = (0..DELAYED_KILLS).map(|k| last_stage.mul_f64(1.2 * f64::from(k) / f64::from(DELAYED_KILLS)));
    let points: Vec<(usize, Duration)> =
        AFTER_FILES.iter().map(|&f| (f, Duration::ZERO)).chain(delays.map(|d| (PADDING_FILES, d))).collect();
    let (mut last, mut old, mut new) = (1, 0, 0);
    for (g, &(after, delay)) in (2..).zip(&points) {
        let (mut child, mut lines) = child(&out, g);
        let until = if after == PADDING_FILES { "manifest".to_owned() } else { format!("file {after}") };
        let reached = said(&mut lines, &until);
        std::thread::sleep(delay);
        let _ = child.kill();
        child.wait().unwrap();
        assert!(reached, "generation {g}: the child never said `{until}`");
        match standing(&out) {
            s if s == last => old += 1,
            s if s == g => (new, last) = (new + 1, g),
            s => panic!("generation {g} killed: generation {s} stands, neither the last ({last}) nor the new"),
        }
    }
    println!(
        "{} kills ({} while writing files, {DELAYED_KILLS} over the {last_stage:?} of the manifest, sync, swap \
         and removal): the old core stood after {old}, the new one after {new}, 0 mixtures, 0 lost",
        points.len(),
        AFTER_FILES.len()
    );
    assert!(points.len() >= 50);
    assert!(
        old > AFTER_FILES.len() && new > 0,
        "kills before the manifest keep the old core; some finish: {old} / {new}"
    );
}
