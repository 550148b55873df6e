use std::process::ExitCode;

use clap::Parser;
use runlens::cli::{Cli, Command};
use runlens::model::{ManifestError, ModelsMissing};

/// Exit code 2: the model directory or one of its files (a program's graph for
/// `layers --model-explorer` included) is missing or old,
/// `--backends` names one it does not have, or `--prompt-format chat` a template
/// it does not have, or `--trace` a file that cannot be written, or the columns
/// asked for need more memory than the process may use (before any loaded), or
/// `report` cannot render a table (a bad spec, a missing JSON, backend or metric); 1: anything else.
fn exit_code(err: &anyhow::Error) -> u8 {
    if err.downcast_ref::<ModelsMissing>().is_some()
        || err.downcast_ref::<ManifestError>().is_some()
        || err.downcast_ref::<runlens::cli::UnknownBackend>().is_some()
        || err.downcast_ref::<runlens::model::NoChatTemplate>().is_some()
        || err.downcast_ref::<runlens::layers::model_explorer::NoGraph>().is_some()
        || err.downcast_ref::<runlens::timeline::TraceFileError>().is_some()
        || err.downcast_ref::<runlens::memory::NotEnoughMemory>().is_some()
        || err.downcast_ref::<runlens::bench::tables::TableError>().is_some()
    {
        2
    } else {
        1
    }
}

/// `runlens` with no subcommand: the live explorer.
fn open_explorer(common: &runlens::cli::Common) -> anyhow::Result<runlens::tui::Ended> {
    let runlens::cli::Setup { dir: models, prompter, ctx } = common.setup()?;
    let catalog = common.catalog(&models)?;
    let backends = common.backends(&models)?;
    // Every column loads at once: refused here, before the terminal is taken over.
    common.check_memory(&models, &backends, runlens::memory::Holding::Together)?;
    common.set_threads()?;
    let theme = runlens::ui::Theme::new(runlens::ui::GlyphSet::choose(common.glyphs));
    runlens::tui::run(runlens::tui::TuiOptions { models, prompter: std::sync::Arc::new(prompter), backends, catalog, ctx, threads: Some(common.thread_count()), theme, memory_budget: common.memory_budget })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // An ExecuTorch abort (a failed ET_CHECK) ends the process: say which file and why.
    runlens::ffi::set_abort_handler(runlens::backend::probe::report_abort);
    if !matches!(cli.command, Some(Command::Bench(_))) {
        if let Err(err) = cli.common.require_one_thread_count() {
            eprintln!("error: {err:#}");
            return ExitCode::from(2);
        }
    }
    let outcome = match &cli.command {
        Some(Command::ProbeProgram(args)) => std::process::exit(runlens::backend::probe::run_child(&args.file)),
        Some(Command::Run(args)) => runlens::cli::run::run(&cli.common, args),
        Some(Command::Bench(args)) => runlens::cli::bench::run(&cli.common, args).map(|()| true),
        Some(Command::Profile(args)) => runlens::cli::profile::run(&cli.common, args).map(|()| true),
        Some(Command::Layers(args)) => runlens::cli::layers::run(&cli.common, args).map(|()| true),
        Some(Command::Footprint(args)) => runlens::cli::footprint::run(&cli.common, args),
        Some(Command::Memory(args)) => runlens::cli::memory::run(&cli.common, args).map(|()| true),
        Some(Command::Report(args)) => runlens::cli::report::run(&cli.common, args),
        Some(Command::FootprintProbe(args)) => runlens::cli::footprint::probe(&cli.common, args).map(|()| true),
        Some(Command::GgufQuantize(args)) => runlens::cli::gguf::quantize(&cli.common, args).map(|()| true),
        Some(Command::Inspect(args)) => runlens::cli::inspect::run(&args.file, args.json).map(|()| true),
        None => {
            // Worker threads may still be in libtorch/ExecuTorch: skip their teardown.
            let code = match open_explorer(&cli.common) {
                // 128 + the signal when one ended it (the terminal is restored by then).
                Ok(ended) => ended.exit_code(),
                Err(err) => {
                    eprintln!("error: {err:#}");
                    i32::from(exit_code(&err))
                }
            };
            runlens::ffi::exit_immediately(code)
        }
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(exit_code(&err))
        }
    }
}
