//! What a column is, as data: [`BackendSpec`] (its name, title, file, runtime,
//! delegate, quantization), [`Runtime`] and [`Delegate`], and the abilities a
//! spec can say it has ([`Ability`]). Code outside `backend/` matches on these,
//! never on a name.
//!
//! What the layers above ask of a runtime (its title colour, the order its
//! workers start in, which column embeds the explorer's corpus, its warm-ups in
//! `bench`, its generation rows' cache kind, whether the Python bench has a row
//! for it, what its column's footer says) is answered here, from the spec, so a
//! new runtime is its folder, its arms in this file and `backend/mod.rs`, and
//! the few files that read its file (docs/architecture.md, "A new runtime").

use std::fmt;
use std::path::{Path, PathBuf};

use super::weight_format::WeightFormat;

/// Which runtime runs a spec. Code outside `backend/` matches on it, always
/// exhaustively (no `_ =>`): a new runtime is a new variant, and the compiler
/// then lists every place that must say what the runtime does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Runtime {
    /// runlens' own model on libtorch (tch), one operator at a time.
    Eager,
    /// An ExecuTorch program (`.pte`).
    ExecuTorch,
    /// A GGUF file run by llama.cpp's CPU kernels (ggml).
    LlamaCpp,
    /// An ONNX file run by ONNX Runtime's CPU execution provider (MLAS).
    OnnxRuntime,
}

impl Runtime {
    /// For people: `PyTorch eager`, `ExecuTorch`.
    pub fn title(self) -> &'static str {
        match self {
            Runtime::Eager => "PyTorch eager",
            Runtime::ExecuTorch => "ExecuTorch",
            Runtime::LlamaCpp => "llama.cpp",
            Runtime::OnnxRuntime => "ONNX Runtime",
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.title())
    }
}

/// What a program hands its subgraphs to: the manifest's `delegate`, else read
/// once from the `.pte`'s delegate calls when the catalog is made.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Delegate {
    /// None: every operator on the runtime's own CPU kernels (ExecuTorch's
    /// portable path; eager, which has no delegates, says this too).
    None,
    /// XNNPACK (`XnnpackBackend`).
    Xnnpack,
    /// Another delegate, by its id.
    Other(String),
    /// The file could not be read (a `--program` whose file is missing).
    Unknown,
}

impl Delegate {
    /// From a delegate id (`XnnpackBackend`), or none.
    pub fn from_id(id: Option<&str>) -> Delegate {
        match id {
            None | Some("") => Delegate::None,
            Some(crate::pte::XNNPACK_BACKEND_ID) => Delegate::Xnnpack,
            Some(other) => Delegate::Other(other.to_string()),
        }
    }

    /// Read from the `.pte` at `path`: its header and flatbuffer only (XNNPACK
    /// when any of its delegate calls is XNNPACK's).
    pub fn read(path: &Path) -> Delegate {
        match crate::pte::read_delegate_ids(path) {
            Ok(ids) if ids.contains(crate::pte::XNNPACK_BACKEND_ID) => Delegate::Xnnpack,
            Ok(ids) => Delegate::from_id(ids.iter().next().map(String::as_str)),
            Err(_) => Delegate::Unknown,
        }
    }
}

/// Whether a spec can give something (per-operator times, per-module times, ...),
/// and if not, why, in words for the UI and the JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ability {
    Available,
    /// Not available for this runtime: the sentence says so.
    NotAvailable(String),
}

impl Ability {
    pub fn is_available(&self) -> bool {
        matches!(self, Ability::Available)
    }

    /// `Ok(())`, or the reason as an error.
    pub fn check(self) -> anyhow::Result<()> {
        match self {
            Ability::Available => Ok(()),
            Ability::NotAvailable(why) => Err(anyhow::anyhow!(why)),
        }
    }
}

/// Where a backend's model comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// runlens' own model on libtorch (tch), one operator at a time, its
    /// linear layers' weights in float32 or quantized at load.
    Eager(WeightFormat),
    /// An ExecuTorch program.
    Program(PathBuf),
    /// A GGUF file for llama.cpp.
    Gguf(PathBuf),
    /// An ONNX file for ONNX Runtime.
    Onnx(PathBuf),
}

/// A column title's colour, by what the column runs; the UI maps each to a
/// terminal colour (so a new runtime picks one here, and no drawing code changes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hue {
    Magenta,
    Blue,
    Green,
    Yellow,
    Cyan,
}

/// What the bottom of a column shows: the delegation coverage of a program,
/// or two lines on what runs the model instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Footer {
    Coverage,
    Note(&'static str, &'static str),
}

/// The KV cache a decoder column's generation rows name (`bench`): the
/// runtime's own, or the program's, from its manifest entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheKind {
    Runtime(&'static str),
    FromManifest,
}

/// One inference path the user can pick, by name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BackendSpec {
    /// On the command line and in JSON: `eager`, `portable`, `xnnpack-int8`, a `--program` name.
    pub name: String,
    /// The column title.
    pub title: String,
    /// What it is, in a sentence (the manifest's `about`).
    pub about: String,
    /// Specs with the same column share one column of the explorer; F5 cycles them.
    pub column: String,
    pub source: Source,
    /// Named on the command line (`--program`): shown even when its file is
    /// missing, so that the column says so.
    pub given: bool,
    /// Weights quantized on purpose (the manifest's `quantization` of a
    /// program; `int8-weight` / `int4-weight` for eager's): it computes other
    /// numbers than float32, so parity with float32 is a measurement, not a pass mark.
    pub quantization: Option<String>,
    /// What a program hands its subgraphs to ([`Delegate::None`] for eager).
    pub delegate: Delegate,
    /// A program exported for exactly this many tokens (the input padded; the
    /// manifest's `fixed_len`); `None`: any length.
    pub fixed_len: Option<usize>,
}

/// The name of the built-in eager path.
pub const EAGER: &str = "eager";

/// A manifest entry's `runtime` for a GGUF file.
pub const LLAMA_CPP: &str = "llama.cpp";

/// A manifest entry's `runtime` for an ONNX file.
pub const ONNX_RUNTIME: &str = "onnxruntime";

impl BackendSpec {
    pub fn eager() -> BackendSpec {
        BackendSpec::eager_with(WeightFormat::Float)
    }

    /// Eager with its linear layers' weights in `format`: `eager`, `eager-int8`,
    /// `eager-int4`, one column (F5 cycles them).
    pub fn eager_with(format: WeightFormat) -> BackendSpec {
        let dispatch = "libtorch through tch: every operator dispatched one by one, as a PyTorch user runs the model";
        let (title, about) = match format {
            WeightFormat::Float => ("PyTorch eager".to_string(), dispatch.to_string()),
            WeightFormat::Int8 => (
                "PyTorch eager int8".to_string(),
                format!("{dispatch}; linear layers with 8-bit weights (a scale per output channel) on {}, bfloat16 activations", format.kernel()),
            ),
            WeightFormat::Int4 { group_size } => (
                "PyTorch eager int4".to_string(),
                format!("{dispatch}; linear layers with 4-bit weights (groups of {group_size}) on {}, bfloat16 activations", format.kernel()),
            ),
        };
        BackendSpec {
            name: format.backend_name().to_string(),
            title,
            about,
            column: EAGER.to_string(),
            source: Source::Eager(format),
            given: false,
            quantization: match format {
                WeightFormat::Float => None,
                WeightFormat::Int8 => Some("int8-weight".to_string()),
                WeightFormat::Int4 { .. } => Some("int4-weight".to_string()),
            },
            delegate: Delegate::None,
            fixed_len: None,
        }
    }

    /// A program given with `--program NAME=FILE.pte` (or `FILE.gguf`, for
    /// llama.cpp: told by its first bytes, or by its name when it is missing;
    /// `FILE.onnx` for ONNX Runtime, by its name): a column of its own.
    pub fn program(name: &str, file: &Path) -> BackendSpec {
        if is_onnx(file) {
            return BackendSpec {
                name: name.to_string(),
                title: name.to_string(),
                about: format!("{} (given with --program)", file.display()),
                column: name.to_string(),
                source: Source::Onnx(file.to_path_buf()),
                given: true,
                quantization: None,
                delegate: Delegate::None,
                fixed_len: None,
            };
        }
        if is_gguf(file) {
            return BackendSpec {
                name: name.to_string(),
                title: name.to_string(),
                about: format!("{} (given with --program)", file.display()),
                column: name.to_string(),
                source: Source::Gguf(file.to_path_buf()),
                given: true,
                quantization: gguf_quantization(file),
                delegate: Delegate::None,
                fixed_len: None,
            };
        }
        BackendSpec {
            name: name.to_string(),
            title: name.to_string(),
            about: format!("{} (given with --program)", file.display()),
            column: name.to_string(),
            source: Source::Program(file.to_path_buf()),
            given: true,
            quantization: None,
            delegate: Delegate::read(file),
            fixed_len: None,
        }
    }

    /// A file of the model directory's `onnx/` folder (the layout the hub's
    /// sentence-transformers repositories ship): a variant of the ONNX column
    /// `column`, named by its path (`onnx/model_qint8_arm64`).
    pub fn hub_onnx(file: &crate::model::sentence_transformers::HubOnnxFile, column: &str) -> BackendSpec {
        BackendSpec {
            name: file.name.clone(),
            title: format!("ONNX Runtime {}", file.name),
            about: format!(
                "{}, from the directory's onnx/ folder (the sentence-transformers layout), run by ONNX Runtime's CPU execution provider",
                file.path.display()
            ),
            column: column.to_string(),
            source: Source::Onnx(file.path.clone()),
            given: false,
            quantization: file.quantization.clone(),
            delegate: Delegate::None,
            fixed_len: None,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The runtime that runs it (from [`source`](Self::source), so the two never disagree).
    pub fn runtime(&self) -> Runtime {
        match &self.source {
            Source::Eager(_) => Runtime::Eager,
            Source::Program(_) => Runtime::ExecuTorch,
            Source::Gguf(_) => Runtime::LlamaCpp,
            Source::Onnx(_) => Runtime::OnnxRuntime,
        }
    }

    /// An ExecuTorch program without a delegate (portable): every operator on
    /// the default kernels, by far the slowest column.
    pub fn is_undelegated_program(&self) -> bool {
        match self.runtime() {
            Runtime::ExecuTorch => self.delegate == Delegate::None,
            Runtime::Eager | Runtime::LlamaCpp | Runtime::OnnxRuntime => false,
        }
    }

    /// Its title's colour: eager magenta, a program on no delegate (portable)
    /// blue, a delegated one green, llama.cpp yellow, ONNX Runtime cyan.
    pub fn hue(&self) -> Hue {
        match self.runtime() {
            Runtime::Eager => Hue::Magenta,
            Runtime::LlamaCpp => Hue::Yellow,
            Runtime::OnnxRuntime => Hue::Cyan,
            Runtime::ExecuTorch if self.is_undelegated_program() => Hue::Blue,
            Runtime::ExecuTorch => Hue::Green,
        }
    }

    /// What the column's footer shows: a program's delegation coverage, or
    /// what runs the model where there are no delegates to count.
    pub fn footer(&self) -> Footer {
        match self.runtime() {
            Runtime::ExecuTorch => Footer::Coverage,
            Runtime::Eager => Footer::Note("no .pte: libtorch runs", "each operator in turn"),
            Runtime::LlamaCpp => Footer::Note("GGUF: ggml's CPU kernels", "run the whole graph, no delegates"),
            Runtime::OnnxRuntime => Footer::Note("ONNX: ONNX Runtime's CPU", "provider (MLAS), graph optimized at load"),
        }
    }

    /// Who is woken first (lowest): the fast columns (delegated programs,
    /// llama.cpp, ONNX Runtime), then eager, then programs without a delegate.
    pub fn start_order(&self) -> u8 {
        match self.runtime() {
            Runtime::LlamaCpp | Runtime::OnnxRuntime => 0,
            Runtime::Eager => 1,
            Runtime::ExecuTorch if self.is_undelegated_program() => 2,
            Runtime::ExecuTorch => 0,
        }
    }

    /// The order in which columns are asked to embed the explorer's corpus
    /// (lowest first): fastest among those that match eager (a fixed-length
    /// program pads every sentence, quantized weights are an approximation, a
    /// program on no delegate is slow).
    pub fn corpus_preference(&self) -> u8 {
        match self.runtime() {
            _ if self.is_undelegated_program() => 4,
            _ if self.is_quantized() => 3,
            Runtime::Eager | Runtime::LlamaCpp | Runtime::OnnxRuntime => 1,
            Runtime::ExecuTorch if self.fixed_len.is_some() => 2,
            Runtime::ExecuTorch => 0,
        }
    }

    /// At most this many warm-up runs in `bench`: a program on no delegate
    /// takes about a second at 128 tokens, so one (the Python side does the same).
    pub fn max_warmups(&self) -> Option<u32> {
        self.is_undelegated_program().then_some(1)
    }

    /// Whether the course's Python flow (`bench --python`) has a row for it:
    /// transformers for eager, ExecuTorch's Python runtime for a program, ONNX
    /// Runtime's Python package for an ONNX file; llama.cpp has none (its Python
    /// binding would compile llama.cpp again).
    pub fn has_python_flow(&self) -> bool {
        match self.runtime() {
            Runtime::Eager | Runtime::ExecuTorch | Runtime::OnnxRuntime => true,
            Runtime::LlamaCpp => false,
        }
    }

    /// Left out of `eval` unless named, and why: an ExecuTorch program without a
    /// delegate computes float32 as `xnnpack` does, much the slowest.
    pub fn left_out_of_eval(&self) -> Option<String> {
        self.is_undelegated_program().then(|| {
            "an ExecuTorch program without a delegate: float32 like xnnpack and much the slowest column \
             (every operator on the portable kernels); left out by default, name it with --backends to measure it"
                .to_string()
        })
    }

    /// A decoder's KV cache as bench's generation rows name it: eager's grows by
    /// one position a token (`dynamic`, as transformers' `DynamicCache`),
    /// llama.cpp's holds the context's positions, ONNX Runtime's is the graph's
    /// inputs and outputs (`past-present`: each run's presents fed back as the
    /// next run's pasts), a program's is its manifest's.
    pub fn cache_kind(&self) -> CacheKind {
        match self.runtime() {
            Runtime::Eager => CacheKind::Runtime("dynamic"),
            Runtime::LlamaCpp => CacheKind::Runtime("llama.cpp"),
            Runtime::OnnxRuntime => CacheKind::Runtime("past-present"),
            Runtime::ExecuTorch => CacheKind::FromManifest,
        }
    }

    /// A float XNNPACK program of any length (MiniLM's `xnnpack`): what
    /// `bench` pairs with the shim's own loop and `footprint` runs.
    pub fn is_float_xnnpack_program(&self) -> bool {
        match self.runtime() {
            Runtime::Eager | Runtime::LlamaCpp | Runtime::OnnxRuntime => false,
            Runtime::ExecuTorch => self.delegate == Delegate::Xnnpack && self.quantization.is_none() && self.fixed_len.is_none(),
        }
    }

    /// Per-operator times (`runlens profile`): from a traced run's ETDump, or
    /// from ONNX Runtime's own profiler.
    pub fn per_operator_times(&self) -> Ability {
        match self.runtime() {
            Runtime::ExecuTorch | Runtime::OnnxRuntime => Ability::Available,
            Runtime::Eager | Runtime::LlamaCpp => Ability::NotAvailable(format!(
                "per-operator times are not available for {} (they come from an ExecuTorch program's ETDump or ONNX Runtime's profiler)",
                self.runtime()
            )),
        }
    }

    /// Per-module times and outputs (`runlens layers`): eager times its own
    /// modules, a program is traced and mapped through its sidecar.
    pub fn per_module_times(&self) -> Ability {
        match self.runtime() {
            Runtime::Eager | Runtime::ExecuTorch => Ability::Available,
            Runtime::LlamaCpp => Ability::NotAvailable(format!(
                "per-module times are not available for {}: runlens reads its prefill and decode totals only (its own counters)",
                self.runtime()
            )),
            Runtime::OnnxRuntime => Ability::NotAvailable(format!(
                "per-module times are not available for {}: its optimizer fuses the graph's nodes at load, so the model's modules are gone (one run is timed whole)",
                self.runtime()
            )),
        }
    }

    /// Delegation coverage (what share of the program a delegate runs), read from the `.pte`.
    pub fn delegation_coverage(&self) -> Ability {
        match self.runtime() {
            Runtime::ExecuTorch => Ability::Available,
            Runtime::Eager => Ability::NotAvailable(format!("delegation coverage is not available for {}: it has no delegates", self.runtime())),
            Runtime::LlamaCpp => Ability::NotAvailable(format!(
                "delegation coverage is not available for {}: a GGUF has no delegates, every tensor runs on ggml's CPU kernels",
                self.runtime()
            )),
            Runtime::OnnxRuntime => Ability::NotAvailable(format!(
                "delegation coverage is not available for {}: its CPU execution provider runs the whole graph, no delegates",
                self.runtime()
            )),
        }
    }

    /// The file whose sha256 in the manifest names what computes its outputs:
    /// the program, or `None` for eager (its checkpoint's weights, `ModelDir::weights_sha256`).
    pub fn model_file(&self) -> Option<&Path> {
        match &self.source {
            Source::Program(p) | Source::Gguf(p) | Source::Onnx(p) => Some(p),
            Source::Eager(_) => None,
        }
    }

    /// The eager path, in any weight format.
    pub fn is_eager(&self) -> bool {
        matches!(self.source, Source::Eager(_))
    }

    /// Whether its weights are quantized (see [`quantization`](Self::quantization)).
    pub fn is_quantized(&self) -> bool {
        self.quantization.is_some()
    }

    /// Eager in float32: the path the others are compared with.
    pub fn is_float_eager(&self) -> bool {
        self.source == Source::Eager(WeightFormat::Float)
    }

    /// The `.pte` of an ExecuTorch path.
    pub fn pte_file(&self) -> Option<&Path> {
        match &self.source {
            Source::Program(p) => Some(p),
            Source::Eager(_) | Source::Gguf(_) | Source::Onnx(_) => None,
        }
    }

    /// The `.gguf` of a llama.cpp path.
    pub fn gguf_file(&self) -> Option<&Path> {
        match &self.source {
            Source::Gguf(p) => Some(p),
            Source::Eager(_) | Source::Program(_) | Source::Onnx(_) => None,
        }
    }

    /// The `.onnx` of an ONNX Runtime path.
    pub fn onnx_file(&self) -> Option<&Path> {
        match &self.source {
            Source::Onnx(p) => Some(p),
            Source::Eager(_) | Source::Program(_) | Source::Gguf(_) => None,
        }
    }

    /// Eager's weight format; `None` for a file's column.
    pub fn eager_format(&self) -> Option<WeightFormat> {
        match &self.source {
            Source::Eager(format) => Some(*format),
            Source::Program(_) | Source::Gguf(_) | Source::Onnx(_) => None,
        }
    }
}

/// Whether `file` is for llama.cpp: its first four bytes say `GGUF`, or it is
/// named `.gguf` and is no ExecuTorch program (`ET` at byte 4), so that a
/// damaged `.gguf` is refused by the GGUF reader, which says what is wrong.
pub fn is_gguf(file: &Path) -> bool {
    use std::io::Read;
    let named = file.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    let mut head = [0u8; 8];
    match std::fs::File::open(file).and_then(|mut f| f.read_exact(&mut head)) {
        Ok(()) => &head[..4] == b"GGUF" || (named && &head[4..6] != b"ET"),
        Err(_) => named,
    }
}

/// Whether `file` is for ONNX Runtime: named `.onnx` (a protobuf has no magic
/// bytes to tell it by; ONNX Runtime's own parser says what is wrong with one).
pub fn is_onnx(file: &Path) -> bool {
    file.extension().is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// A GGUF's weight type when it is quantized (`q4_0`), read from its header.
fn gguf_quantization(file: &Path) -> Option<String> {
    let t = crate::gguf::read_path(file).ok()?.main_type()?;
    (!matches!(t.name(), "f32" | "f16" | "bf16")).then(|| t.name().to_string())
}

impl fmt::Display for BackendSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// A spec named like MiniLM's paths (`eager`, `portable`, `xnnpack`,
/// `xnnpack-int8`, `xnnpack-static`; the XNNPACK ones share a column), with
/// their titles, for the tests of scheduling and drawing (the unit tests and
/// `tests/common`): the file need not exist. Not for use outside tests.
#[doc(hidden)]
pub fn named(name: &str) -> BackendSpec {
    if name == EAGER {
        return BackendSpec::eager();
    }
    let title = match name {
        "portable" => "ExecuTorch portable".to_string(),
        "xnnpack" => "ExecuTorch XNNPACK".to_string(),
        n if n.starts_with("xnnpack-") => format!("ExecuTorch XNNPACK {}", &n["xnnpack-".len()..]),
        n => n.to_string(),
    };
    let column = if name.starts_with("xnnpack") { "xnnpack" } else { name };
    BackendSpec {
        name: name.to_string(),
        title,
        about: String::new(),
        column: column.to_string(),
        source: Source::Program(PathBuf::from(format!("{name}.pte"))),
        given: false,
        // As MiniLM's manifest says them (python/runlens_export/programs.py).
        quantization: (name == "xnnpack-int8").then(|| "int8-dynamic-linear".to_string()),
        delegate: if name.starts_with("xnnpack") { Delegate::Xnnpack } else { Delegate::None },
        fixed_len: (name == "xnnpack-static").then_some(128),
    }
}
