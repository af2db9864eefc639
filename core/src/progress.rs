//! How far a long stage has come, said while it runs: the snapshot and the launches of a
//! full-size model's export take minutes, and a silent prompt looks hung. On a terminal a
//! bar is redrawn in place (indicatif); otherwise (a log, CI) a plain line every few
//! seconds and one at the end. A stage shorter than a moment says nothing, and nothing is
//! said once the process asked for quiet. A case's child process, whose output the runner
//! keeps for the report, writes its lines to the file [`RELAY_FILE_ENV`] names, which the
//! runner reads while it waits and says on its own standard error.

use std::{
    io::{IsTerminal, Write},
    sync::{
        atomic::{AtomicBool, Ordering},
        LazyLock,
    },
    time::{Duration, Instant},
};

use bytesize::ByteSize;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// A stage that ends sooner says nothing; a longer one says a plain line this often.
const FIRST: Duration = Duration::from_secs(2);
const EVERY: Duration = Duration::from_secs(5);

static QUIET: AtomicBool = AtomicBool::new(false);

/// Every bar drawn, each on a line of its own: the kit's snapshot and its launches run at
/// once, and two bars drawn alone would overwrite each other.
static BARS: LazyLock<MultiProgress> = LazyLock::new(MultiProgress::new);

/// Names the file a child process appends its plain lines to, for its runner to relay.
pub const RELAY_FILE_ENV: &str = "GNOMON_PROGRESS_FILE";

/// Whether the stages this process starts from now on say nothing (`gnomon export
/// --quiet`, the kit's `export(progress=False)`).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// What a stage counts.
#[derive(Clone, Copy, Debug)]
pub enum Unit {
    Bytes,
    /// Things with this plural name (`templates`).
    Items(&'static str),
}

impl Unit {
    fn of(self, done: u64, total: u64) -> String {
        match self {
            Unit::Bytes => format!("{} of {}", bytes(done), bytes(total)),
            Unit::Items(name) => format!("{done} of {total} {name}"),
        }
    }
}

fn bytes(n: u64) -> String {
    ByteSize(n).display().iec().to_string()
}

/// One stage's progress: `advance` as work is done, `finish` at its end.
pub struct Progress {
    stage: &'static str,
    unit: Unit,
    total: u64,
    done: u64,
    started: Instant,
    shown: Shown,
}

enum Shown {
    Waiting { terminal: bool },
    Bar(ProgressBar),
    Lines(Lines<Box<dyn Write + Send>>),
    Nothing,
}

impl Progress {
    /// A stage of `total` in `unit`, named as the person waiting knows it (`export: snapshot`).
    pub fn start(stage: &'static str, unit: Unit, total: u64) -> Self {
        let shown = match QUIET.load(Ordering::Relaxed) {
            true => Shown::Nothing,
            false => Shown::Waiting { terminal: relay_file().is_none() && std::io::stderr().is_terminal() },
        };
        Self { stage, unit, total, done: 0, started: Instant::now(), shown }
    }

    pub fn advance(&mut self, n: u64) {
        self.done = self.done.saturating_add(n).min(self.total);
        let elapsed = self.started.elapsed();
        if let Shown::Waiting { terminal } = self.shown {
            if elapsed < FIRST {
                return;
            }
            self.shown = if terminal { Shown::Bar(self.bar()) } else { Shown::Lines(Lines::new(plain_out())) };
        }
        let said = self.said();
        match &mut self.shown {
            Shown::Bar(bar) => bar.set_position(said.done),
            Shown::Lines(lines) => lines.tick(&said, elapsed),
            Shown::Waiting { .. } | Shown::Nothing => {}
        }
    }

    pub fn finish(self) {
        let (elapsed, said) = (self.started.elapsed(), self.said());
        match self.shown {
            Shown::Bar(bar) => {
                bar.finish_and_clear();
                BARS.remove(&bar);
                Lines::new(plain_out()).end(&said, elapsed);
            }
            Shown::Lines(mut lines) => lines.end(&said, elapsed),
            Shown::Waiting { .. } | Shown::Nothing => {}
        }
    }

    fn said(&self) -> Said {
        Said { stage: self.stage, unit: self.unit, done: self.done, total: self.total }
    }

    fn bar(&self) -> ProgressBar {
        let counted = match self.unit {
            Unit::Bytes => "{bytes} of {total_bytes} ({binary_bytes_per_sec})".to_owned(),
            Unit::Items(name) => format!("{{pos}} of {{len}} {name}"),
        };
        let template = format!("gnomon: {{prefix}} [{{bar:30}}] {counted}, about {{eta}} left");
        let style = ProgressStyle::with_template(&template).expect("the template is valid").progress_chars("=> ");
        let bar = BARS.add(ProgressBar::new(self.total).with_style(style).with_prefix(self.stage));
        bar.set_position(self.done);
        bar
    }
}

fn relay_file() -> Option<std::ffi::OsString> {
    std::env::var_os(RELAY_FILE_ENV).filter(|path| !path.is_empty())
}

/// Where plain lines go: the relay file when the runner named one (standard error if it
/// cannot be opened), standard error otherwise.
fn plain_out() -> Box<dyn Write + Send> {
    let relay = relay_file().and_then(|path| std::fs::OpenOptions::new().append(true).open(path).ok());
    match relay {
        Some(file) => Box::new(file),
        None => Box::new(std::io::stderr()),
    }
}

/// What a line says of a stage at a moment.
#[derive(Clone, Copy, Debug)]
struct Said {
    stage: &'static str,
    unit: Unit,
    done: u64,
    total: u64,
}

impl Said {
    /// `gnomon: export: snapshot 3.0 GiB of 16.0 GiB (18 %) in 5.0 s, about 22 s left`
    fn during(&self, elapsed: Duration) -> String {
        let percent = (self.done as f64 / self.total.max(1) as f64 * 100.0).floor();
        let mut line = format!(
            "gnomon: {} {} ({percent} %) in {:.1} s",
            self.stage,
            self.unit.of(self.done, self.total),
            elapsed.as_secs_f64()
        );
        if self.done > 0 {
            let left = elapsed.as_secs_f64() * (self.total - self.done) as f64 / self.done as f64;
            line += &format!(", about {left:.0} s left");
        }
        line
    }

    /// `gnomon: export: snapshot 16.0 GiB in 27.3 s (600.2 MiB/s)`
    fn end(&self, elapsed: Duration) -> String {
        let seconds = elapsed.as_secs_f64();
        match self.unit {
            Unit::Bytes => {
                let rate = bytes((self.done as f64 / seconds.max(1e-9)) as u64);
                format!("gnomon: {} {} in {seconds:.1} s ({rate}/s)", self.stage, bytes(self.done))
            }
            Unit::Items(name) => format!("gnomon: {} {} {name} in {seconds:.1} s", self.stage, self.done),
        }
    }
}

/// Plain lines: the first once a stage has run `FIRST`, then one each `EVERY`, and one at
/// its end.
struct Lines<W: Write> {
    out: W,
    said_at: Option<Duration>,
}

impl<W: Write> Lines<W> {
    fn new(out: W) -> Self {
        Self { out, said_at: None }
    }

    fn tick(&mut self, said: &Said, elapsed: Duration) {
        let due = match self.said_at {
            None => elapsed >= FIRST,
            Some(at) => elapsed >= at + EVERY,
        };
        if due {
            self.said_at = Some(elapsed);
            // Progress is a courtesy: a closed or full stderr must not fail the export.
            let _ = writeln!(self.out, "{}", said.during(elapsed));
        }
    }

    fn end(&mut self, said: &Said, elapsed: Duration) {
        if elapsed >= FIRST {
            let _ = writeln!(self.out, "{}", said.end(elapsed));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain form of an export's 16 GiB snapshot at 0.6 GiB/s and its 19 templates'
    /// launches, and of a qualification's replay (what its runner relays), ticked every half
    /// second as a stage would: a line at 2 s, then every 5 s, then the end.
    #[test]
    fn plain_lines_of_a_long_stage() {
        let mut out = Vec::new();
        for (stage, unit, total, per_second) in [
            ("export: snapshot", Unit::Bytes, 16u64 << 30, 0.6 * (1u64 << 30) as f64),
            ("export: launches", Unit::Items("templates"), 19, 0.25),
            ("replay: launches", Unit::Items("launches"), 35, 4.0),
            ("replay: speed", Unit::Items("templates"), 35, 1.5),
        ] {
            let mut lines = Lines::new(&mut out);
            let mut said = Said { stage, unit, done: 0, total };
            let mut t = Duration::ZERO;
            while said.done < total {
                t += Duration::from_millis(500);
                said.done = ((t.as_secs_f64() * per_second) as u64).min(total);
                lines.tick(&said, t);
            }
            lines.end(&said, t);
        }
        insta::assert_snapshot!(String::from_utf8(out).unwrap());
    }

    #[test]
    fn a_short_stage_says_nothing() {
        let mut out = Vec::new();
        let mut lines = Lines::new(&mut out);
        let said = Said { stage: "export: snapshot", unit: Unit::Bytes, done: 1 << 20, total: 1 << 20 };
        lines.tick(&said, Duration::from_millis(1900));
        lines.end(&said, Duration::from_millis(1900));
        assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    }

    #[test]
    fn nothing_done_gives_no_estimate_and_an_empty_stage_no_division_by_zero() {
        let said = Said { stage: "export: launches", unit: Unit::Items("templates"), done: 0, total: 0 };
        assert_eq!(said.during(Duration::from_secs(3)), "gnomon: export: launches 0 of 0 templates (0 %) in 3.0 s");
        let said = Said { stage: "export: snapshot", unit: Unit::Bytes, done: 0, total: 0 };
        assert_eq!(said.end(Duration::ZERO), "gnomon: export: snapshot 0 B in 0.0 s (0 B/s)");
    }
}
