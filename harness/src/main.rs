use std::process::ExitCode;

use clap::Parser;
use gnomon::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run(args) => gnomon::runner::run(args.into_config()),
        Command::Replay(args) => gnomon_cases::replay::replay_command(&args.core, args.result.as_deref()),
        Command::Export(args) => {
            gnomon_cases::replay::export_command(&args.workload, args.cap, &args.dir, args.result.as_deref())
        }
        Command::RunCase(args) => gnomon::runner::child_main(&args.case, &args.result_file),
    };
    ExitCode::from(code as u8)
}
