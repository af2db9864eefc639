//! Cancellation, designed rather than left to the default signal action. The first
//! Ctrl-C (or SIGTERM) cancels: no new case starts, each running child's whole process
//! group is ended (signal, grace period, kill), and every report file is written for the
//! cases that finished, marked incomplete. A second one kills the children's groups and
//! ends gnomon at once.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Mutex,
    },
    time::Duration,
};

use nix::{
    sys::signal::{killpg, Signal},
    unistd::Pid,
};

static CANCELLED: AtomicBool = AtomicBool::new(false);
static SIGNALS: AtomicUsize = AtomicUsize::new(0);
/// Process groups of the children running now.
static GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// How long a child's group has to end after SIGTERM before it is killed.
pub const GRACE: Duration = Duration::from_secs(2);

/// Installs the handler; a second install in one process (a test harness) is a no-op.
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        CANCELLED.store(true, Ordering::SeqCst);
        if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
            eprintln!("\ngnomon: cancelling: no new case starts; press Ctrl-C again to stop at once");
            return;
        }
        for group in GROUPS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            signal_group(*group, Signal::SIGKILL);
        }
        eprintln!("\ngnomon: stopped; report.json holds the cases that finished");
        std::process::exit(130);
    });
}

pub fn cancelled() -> bool {
    CANCELLED.load(Ordering::SeqCst)
}

/// A running child's process group, known to the handler while this value lives.
pub struct Group(i32);

impl Group {
    pub fn register(pid: u32) -> Self {
        let pid = pid as i32;
        GROUPS.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
        Self(pid)
    }

    pub fn signal(&self, signal: Signal) {
        signal_group(self.0, signal);
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        GROUPS.lock().unwrap_or_else(|e| e.into_inner()).retain(|g| *g != self.0);
    }
}

fn signal_group(group: i32, signal: Signal) {
    // A group that is already gone is what we want.
    let _ = killpg(Pid::from_raw(group), signal);
}
