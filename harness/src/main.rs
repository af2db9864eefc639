use std::process::ExitCode;

use clap::Parser;
use gnomon::cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Command::Run(args) => gnomon::runner::run(args.into_config()),
        Command::RunCase(args) => gnomon::runner::child_main(&args.case, &args.result_file),
    };
    ExitCode::from(code as u8)
}
