use std::process::ExitCode;

use clap::Parser;
use gnomon::{
    cli::{Cli, Command},
    commands,
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
        Command::QualifyCore(a) => {
            let meet = a.meet.as_deref();
            gnomon_cases::qualify::judge_command(
                &a.core,
                &a.prefix,
                a.device,
                meet,
                a.profile.as_deref(),
                &a.result_file,
            )
        }
        Command::Validate(args) => commands::validate_cores(&args),
        Command::Replay(args) => {
            let limit = args.meet_limit.unwrap_or(gnomon_core::replay::MEETING_LIMIT);
            let ranks = args.meet.map(|dir| gnomon_core::replay::RankLink { dir, limit });
            gnomon_cases::replay::replay_command(&args.core, ranks, args.result.as_deref())
        }
        Command::Export(args) => {
            gnomon_cases::replay::export_command(&args.workload, args.options(), &args.out, args.result.as_deref())
        }
        Command::ColdStart(args) => {
            gnomon_cases::replay::cold_start_command(&args.workload, &args.core, args.result.as_deref())
        }
        Command::PeerProbe(args) => {
            gnomon_cases::replay::peer_probe_command(args.rank, &args.dir, args.result.as_deref())
        }
        Command::RunCase(args) => gnomon::runner::child_main(&args.case, &args.result_file),
    }
}
