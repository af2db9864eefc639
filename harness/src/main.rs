use std::process::ExitCode;

use clap::Parser;
use gnomon::{
    cli::{Cli, Command},
    commands, steps,
};

/// jemalloc serves the whole process, the CUDA driver's `malloc` included (see `heap`).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    gnomon::heap::instantiate_on_huge_pages();
    // A panic that escapes to here is a bug in gnomon, not a verdict: its own exit code.
    // (Case bodies catch their own panics and report the case failed.)
    // Clap prints usage errors and help and exits on its own: before forwarding starts.
    let cli = Cli::parse();
    // A child of the runner is read by its parent to the end, and a child that crashes
    // must not lose what it wrote last in a forwarding pipe: only a person's commands
    // forward their output.
    let child = matches!(cli.command, Command::RunCase(_) | Command::QualifyCore(_));
    let forwarding = (!child).then(gnomon::pipes::forward);
    let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli))).unwrap_or_else(|_| {
        eprintln!("gnomon: internal error (a bug in gnomon, not a verdict on the subject); please report it");
        gnomon_reports::exit_codes::INTERNAL_ERROR
    });
    drop(forwarding);
    ExitCode::from(code as u8)
}

fn run(cli: Cli) -> i32 {
    match cli.command {
        Command::Run(args) => match args.into_config() {
            Ok(config) => gnomon::runner::run(config),
            Err(e) => commands::exit(Err(e)),
        },
        Command::Compare(args) => commands::exit(commands::compare_reports(&args)),
        Command::Merge(args) => commands::exit(commands::merge_reports(&args)),
        Command::Summary(args) => commands::exit(commands::print_summary(&args)),
        Command::Trend(args) => commands::exit(commands::write_trend(&args)),
        Command::Qualify(args) => match args.into_config() {
            Ok(config) => gnomon::runner::run(config),
            Err(e) => commands::exit(Err(e)),
        },
        Command::QualifyCore(args) => steps::qualify_core(&args),
        Command::Validate(args) => commands::validate_cores(&args),
        Command::Replay(args) => steps::replay(&args),
        Command::Export(args) => steps::export(&args),
        Command::ColdStart(args) => steps::cold_start_step(&args),
        Command::PeerProbe(args) => steps::peer_probe_step(&args),
        Command::RunCase(args) => gnomon::runner::child_main(&args.case, &args.result_file),
    }
}
