//! A reader that goes away (`gnomon run | head -1`) must end the output quietly, not
//! panic libtest's printer half-way through a run and lose the reports. When standard
//! output or standard error is a pipe or a socket, it is replaced by a pipe of our own and
//! a thread forwards what is written; once the reader is gone the thread drops the rest.
//! The run goes on and every report file is still written. Terminals and files are left
//! alone: they have no reader to lose, and libtest's colours look at the terminal.

use std::{
    fs::File,
    io::{self, Read, Write},
    os::{
        fd::{AsFd, OwnedFd},
        unix::fs::FileTypeExt,
    },
    sync::mpsc,
    thread,
    time::Duration,
};

use nix::unistd::{dup2_stderr, dup2_stdout};

/// How long the end of the output may take to drain once gnomon is done.
const DRAIN: Duration = Duration::from_secs(2);

/// The forwarded streams; dropping it puts the original descriptors back and drains.
pub struct Forwarding(Vec<Forwarded>);

struct Forwarded {
    stream: Stream,
    original: OwnedFd,
    done: mpsc::Receiver<()>,
}

#[derive(Clone, Copy)]
enum Stream {
    Out,
    Err,
}

impl Stream {
    /// A descriptor of its own for what the stream points at now.
    fn duplicate(self) -> io::Result<OwnedFd> {
        match self {
            Stream::Out => io::stdout().as_fd().try_clone_to_owned(),
            Stream::Err => io::stderr().as_fd().try_clone_to_owned(),
        }
    }

    fn point_at(self, fd: impl AsFd) -> nix::Result<()> {
        match self {
            Stream::Out => dup2_stdout(fd),
            Stream::Err => dup2_stderr(fd),
        }
    }

    fn flush(self) {
        let _ = match self {
            Stream::Out => io::stdout().flush(),
            Stream::Err => io::stderr().flush(),
        };
    }
}

/// Forwards standard output and standard error where each is a pipe or a socket.
pub fn forward() -> Forwarding {
    Forwarding([Stream::Out, Stream::Err].into_iter().filter_map(|s| forward_one(s).ok().flatten()).collect())
}

fn forward_one(stream: Stream) -> io::Result<Option<Forwarded>> {
    let original = stream.duplicate()?;
    let kind = File::from(original.try_clone()?).metadata()?.file_type();
    if !(kind.is_fifo() || kind.is_socket()) {
        return Ok(None);
    }
    let (reader, writer) = io::pipe()?;
    let sink = File::from(original.try_clone()?);
    let (finished, done) = mpsc::channel();
    thread::spawn(move || {
        pass_on(reader, sink);
        let _ = finished.send(());
    });
    stream.point_at(&writer)?;
    Ok(Some(Forwarded { stream, original, done }))
}

/// Copies until every writer is gone; after the first failed write (the reader left),
/// reads on and drops what it reads, so writers never block or fail.
fn pass_on(mut from: impl Read, mut to: File) {
    let mut buffer = [0u8; 8192];
    let mut reader_gone = false;
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) => return,
            Ok(n) => n,
            // A signal (Ctrl-C) interrupts the read; stopping here would leave the writers
            // blocked on a full pipe.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if !reader_gone {
            reader_gone = to.write_all(&buffer[..n]).is_err();
        }
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        for f in self.0.drain(..) {
            f.stream.flush();
            // Pointing the stream back closes our pipe's last writer in this process;
            // a child still holding it must not keep gnomon from exiting.
            let _ = f.stream.point_at(&f.original);
            let _ = f.done.recv_timeout(DRAIN);
        }
    }
}
