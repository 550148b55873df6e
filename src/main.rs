use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use runlens::cli::{Cli, Command, Common};
use runlens::model::{ManifestError, ModelsMissing};
use runlens::tui::{Carry, Ended, TuiOptions};

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
        || err.downcast_ref::<runlens::tables::TableError>().is_some()
    {
        2
    } else {
        1
    }
}

/// `runlens` with no subcommand: the live explorer, on `--model`'s directory,
/// then on each one F8 chooses: the same set-up, on the same screen.
fn open_explorer(common: &Common) -> anyhow::Result<Ended> {
    // The first directory is refused here, before the terminal is taken over.
    let (mut opts, _) = explorer_options(common, None)?;
    opts.check()?;
    common.set_threads()?;
    let mut explorer = runlens::tui::Explorer::enter()?;
    let mut carry = Carry::default();
    loop {
        let (dir, text, unloaded) = match explorer.session(&opts, carry)? {
            Ended::SwitchModel { dir, text, unloaded } => (dir, text, unloaded),
            ended => return Ok(ended),
        };
        let mut notes = Vec::new();
        if !unloaded {
            notes.push(format!("{}'s columns still ran after {} s", opts.models.model_name(), runlens::tui::UNLOAD_WAIT.as_secs()));
        }
        carry = Carry { text, ..Carry::default() };
        match explorer_options(common, Some(&dir)).and_then(|(next, fell_back)| next.check().map(|()| (next, fell_back))) {
            Ok((next, fell_back)) => {
                opts = next;
                notes.extend(fell_back);
            }
            // Refused (memory) or broken: back to the model before, set up again, the list saying why.
            Err(err) => {
                carry.refused = Some((dir, format!("{err:#}")));
                opts = explorer_options(common, Some(opts.models.root()))?.0;
            }
        }
        carry.note = (!notes.is_empty()).then(|| notes.join("; "));
    }
}

/// The explorer's set-up of one model directory, as `runlens --model DIR`
/// does it: the directory, its prompter and task, the catalog, the columns,
/// and the memory check of every column held together. `to`: a directory F8
/// chose; there the command line's `--program`s (given for `--model`'s
/// directory), a `--backends` list it does not have and a `--prompt-format
/// chat` it has no template for give way to the defaults, each with a note.
fn explorer_options(common: &Common, to: Option<&Path>) -> anyhow::Result<(TuiOptions, Vec<String>)> {
    let given = common.model_dir()?.root().to_path_buf();
    let mut notes = Vec::new();
    let mut common = common.clone();
    if let Some(dir) = to.filter(|dir| !runlens::model::listing::same_dir(dir, &given)) {
        common.model = Some(dir.to_path_buf());
        if !common.programs.is_empty() {
            notes.push("--program stays with --model's directory".to_string());
            common.programs.clear();
        }
    }
    let runlens::cli::Setup { dir: models, prompter, ctx } = match common.setup() {
        Err(err) if to.is_some() && err.downcast_ref::<runlens::model::NoChatTemplate>().is_some() => {
            notes.push("no chat template here: raw prompts".to_string());
            common.prompt_format = None;
            common.setup()?
        }
        setup => setup?,
    };
    let catalog = common.catalog(&models)?;
    let backends = match common.backends(&models) {
        Err(err) if to.is_some() && err.downcast_ref::<runlens::cli::UnknownBackend>().is_some() => {
            notes.push(format!("--backends not all in {}: its default columns", models.model_name()));
            common.backends = None;
            common.backends(&models)?
        }
        backends => backends?,
    };
    // Every column loads at once.
    common.check_memory(&models, &backends, runlens::memory::Holding::Together)?;
    let theme = runlens::ui::Theme::new(runlens::ui::GlyphSet::choose(common.glyphs));
    let opts = TuiOptions {
        models,
        prompter: std::sync::Arc::new(prompter),
        backends,
        catalog,
        ctx,
        threads: Some(common.thread_count()),
        theme,
        memory_budget: common.memory_budget,
        given_dirs: vec![given],
    };
    Ok((opts, notes))
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
        Some(Command::Probe(args)) => std::process::exit(runlens::backend::probe::run_child(&args.file, &args.load)),
        Some(Command::Run(args)) => runlens::cli::run::run(&cli.common, args),
        Some(Command::Bench(args)) => runlens::cli::bench::run(&cli.common, args).map(|()| true),
        Some(Command::Profile(args)) => runlens::cli::profile::run(&cli.common, args).map(|()| true),
        Some(Command::Layers(args)) => runlens::cli::layers::run(&cli.common, args).map(|()| true),
        Some(Command::Footprint(args)) => runlens::cli::footprint::run(&cli.common, args),
        Some(Command::Memory(args)) => runlens::cli::memory::run(&cli.common, args).map(|()| true),
        Some(Command::Report(args)) => runlens::cli::report::run(&cli.common, args),
        Some(Command::Eval(args)) => runlens::cli::eval::run(&cli.common, args),
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
