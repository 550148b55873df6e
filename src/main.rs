use std::process::ExitCode;

use clap::Parser;
use runlens::cli::{Cli, Command};
use runlens::model::ModelsMissing;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.command {
        Some(Command::Run(args)) => runlens::cli::run::run(&cli.common, args),
        Some(Command::Inspect(args)) => runlens::cli::inspect::run(&args.file, args.json).map(|()| true),
        None => Err(anyhow::anyhow!("the live explorer is not built yet; use `runlens run TEXT`")),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(err) => {
            eprintln!("error: {err:#}");
            if err.downcast_ref::<ModelsMissing>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
