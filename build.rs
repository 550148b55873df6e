//! Build script: compiles the C shim over ExecuTorch (`shim/`), generates its
//! Rust declarations with bindgen, links the ExecuTorch runtime from the
//! executorch wheel, and sets rpaths so `target/*/runlens` starts without
//! `LD_LIBRARY_PATH`. (libtorch itself is linked by the tch crate, and only with
//! the `eager` feature; without it, `make lite`, nothing here names libtorch.)
//!
//! Environment it reads (each re-runs the build when changed):
//! - `EXECUTORCH_DIR`: the installed `executorch` package (holds `include/`, `lib/`);
//!   default: `executorch/` in the venv's site-packages.
//! - `RUNLENS_VENV`: the Python venv; default `.venv` beside this file.
//! - `LIBTORCH`: libtorch root as tch understands it (its `lib/` gets an rpath);
//!   default: `torch/` in the venv's site-packages. Read only with the `eager` feature.
//! - `LIBCLANG_PATH`: folder of `libclang.so` for bindgen; default: the PyPI
//!   `libclang` package in the venv (`clang/native`), else the system's.
//! - `ONNXRUNTIME_LIB`: the `libonnxruntime.so.*` runlens opens at run time
//!   (the `ort` crate's `load-dynamic`: nothing is linked); default: the venv's
//!   onnxruntime wheel, `onnxruntime/capi/`. Its path is baked into the binary
//!   as `RUNLENS_ONNXRUNTIME_LIB_BUILT` (as an rpath names ExecuTorch's
//!   folder); a cross build bakes none, its bundle carries the library in
//!   `lib/` (`backend::onnxruntime::library`). None found is no error: the
//!   ONNX Runtime column says how to get it when it loads.
//! - `TARGET`, `HOST` (set by cargo): a cross build must name `EXECUTORCH_DIR` and
//!   `LIBTORCH` for the target, since the venv holds the host's libraries.

use std::env;
use std::path::{Path, PathBuf};

/// Libraries of the executorch wheel that runlens links. The kernel and backend
/// libraries register themselves from static initialisers, so they are linked
/// with --no-as-needed (an as-needed link would drop them silently, and loading
/// then fails with "operator not found" / "backend not found").
const ET_LIBS: &[&str] = &[
    "executorch",
    "executorch_kernels_optimized",
    // quantized_decomposed::* kernels, for programs that keep quantize or
    // dequantize operators outside the delegate (xnnpack-int8.pte keeps none).
    "executorch_kernels_quantized",
    "executorch_backend_xnnpack",
    "executorch_threadpool",
    "executorch_etdump",
];

fn main() {
    for var in ["EXECUTORCH_DIR", "RUNLENS_VENV", "LIBTORCH", "LIBCLANG_PATH", "ONNXRUNTIME_LIB", "TARGET", "HOST"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=shim/runlens_et.h");
    println!("cargo:rerun-if-changed=shim/runlens_et.cpp");

    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let cross = env::var("TARGET").ok() != env::var("HOST").ok();
    // Cargo sets CARGO_FEATURE_<NAME> for the build script of a package built with that feature.
    let eager = env::var_os("CARGO_FEATURE_EAGER").is_some();
    let venv = env::var_os("RUNLENS_VENV").map(PathBuf::from).unwrap_or_else(|| manifest.join(".venv"));
    let site = site_packages(&venv);

    let et_dir = match env::var_os("EXECUTORCH_DIR") {
        Some(dir) => PathBuf::from(dir),
        None if cross => fail("a cross build needs EXECUTORCH_DIR: the executorch package unpacked from the target's wheel (see `make test-aarch64`)"),
        None => match &site {
            Some(site) => site.join("executorch"),
            None => fail(&format!("no Python venv at {}: run `make build` (it creates .venv from requirements.txt), or set EXECUTORCH_DIR to an installed executorch package", venv.display())),
        },
    };
    let et_include = et_dir.join("include");
    let et_lib = et_dir.join("lib");
    if !et_include.join("executorch/extension/module/module.h").is_file() || !et_lib.join("libexecutorch.so").is_file() {
        fail(&format!(
            "{} does not hold the ExecuTorch C++ runtime (include/executorch/extension/module/module.h, lib/libexecutorch.so): install executorch==1.5.1 (`make build` does) or point EXECUTORCH_DIR at it",
            et_dir.display()
        ));
    }

    compile_shim(&et_include);
    generate_bindings(&manifest, site.as_deref());

    println!("cargo:rustc-link-search=native={}", et_lib.display());
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    for lib in ET_LIBS {
        println!("cargo:rustc-link-arg=-l{lib}");
    }
    println!("cargo:rustc-link-arg=-Wl,--as-needed");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", et_lib.display());

    let onnxruntime = match env::var_os("ONNXRUNTIME_LIB") {
        Some(lib) => Some(PathBuf::from(lib)),
        None if cross => None,
        None => site.as_ref().and_then(|s| onnxruntime_library(&s.join("onnxruntime/capi"))),
    };
    match onnxruntime {
        Some(lib) => println!("cargo:rustc-env=RUNLENS_ONNXRUNTIME_LIB_BUILT={}", lib.display()),
        None if cross => {}
        None => println!("cargo:warning=no onnxruntime wheel in {}: the ONNX Runtime column will say how to get it (pip install onnxruntime==1.31.1, or RUNLENS_ONNXRUNTIME_LIB)", venv.display()),
    }

    if !eager {
        return;
    }
    if cross {
        // tch names libtorch_cuda (present in torch's aarch64 wheel), whose CUDA
        // libraries a CPU build never fetches: a cross ld would fail on their
        // undefined symbols although --as-needed drops libtorch_cuda from the binary.
        // The target's dynamic loader still checks what is really loaded.
        println!("cargo:rustc-link-arg=-Wl,--allow-shlib-undefined");
        // libtorch_cpu's unversioned libstdc++ symbols (ios_base_library_init, ...)
        // are defined by both libc10 and libtorch; tch links libtorch first, which
        // would make the binary need libtorch.so and so libtorch_cuda. Naming c10
        // here puts it ahead of tch's libraries on the link line.
        println!("cargo:rustc-link-lib=dylib=c10");
    }

    let torch_lib = match env::var_os("LIBTORCH") {
        Some(root) => Some(PathBuf::from(root).join("lib")),
        None if cross => None,
        None => site.as_ref().map(|s| s.join("torch/lib")),
    };
    if let Some(torch_lib) = torch_lib.filter(|p| p.is_dir()) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", torch_lib.display());
    }
}

/// `libonnxruntime.so.<version>` in the wheel's `capi/` folder (the highest name).
fn onnxruntime_library(capi: &Path) -> Option<PathBuf> {
    println!("cargo:rerun-if-changed={}", capi.display());
    let mut found: Vec<PathBuf> = std::fs::read_dir(capi)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("libonnxruntime.so")) && p.is_file())
        .collect();
    found.sort();
    found.pop()
}

/// `<venv>/lib/python3.*/site-packages`, if the venv exists.
fn site_packages(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&lib)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages"))
        .filter(|p| p.is_dir() && p.parent().and_then(|d| d.file_name()).is_some_and(|n| n.to_string_lossy().starts_with("python3")))
        .collect();
    found.sort();
    found.pop()
}

fn compile_shim(et_include: &Path) {
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("shim/runlens_et.cpp")
        .include("shim")
        .include(et_include)
        .include(et_include.join("executorch/runtime/core/portable_type/c10"))
        // The same definitions executorch-config.cmake gives its consumers.
        .define("C10_USING_CUSTOM_GENERATED_MACROS", None)
        .define("ET_EVENT_TRACER_ENABLED", None)
        .flag_if_supported("-Wno-deprecated-declarations")
        .flag_if_supported("-Wno-unused-parameter")
        .compile("runlens_et");
}

fn generate_bindings(manifest: &Path, site: Option<&Path>) {
    if env::var_os("LIBCLANG_PATH").is_none() {
        if let Some(native) = site.map(|s| s.join("clang/native")).filter(|p| p.join("libclang.so").is_file()) {
            // bindgen (through clang-sys) reads LIBCLANG_PATH when it loads libclang below.
            env::set_var("LIBCLANG_PATH", native);
        }
    }
    let header = manifest.join("shim/runlens_et.h");
    let mut builder = bindgen::Builder::default().header(header.to_string_lossy());
    // The PyPI libclang ships no clang resource headers (stddef.h); the target's C
    // compiler has equivalent ones, so bindgen borrows them.
    if let Some(dir) = compiler_include_dir() {
        builder = builder.clang_arg(format!("-isystem{}", dir.display()));
    }
    let bindings = builder
        .allowlist_file(".*runlens_et\\.h")
        .generate()
        .unwrap_or_else(|e| {
            fail(&format!(
                "bindgen could not process shim/runlens_et.h ({e}); it needs libclang: `pip install libclang==18.1.1` in .venv (make build does), or `apt-get install libclang-dev`, or set LIBCLANG_PATH"
            ))
        });
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("runlens_et.rs");
    bindings.write_to_file(&out).unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", out.display())));
}

/// `$CC -print-file-name=include` of the target's C compiler (where stddef.h lives).
fn compiler_include_dir() -> Option<PathBuf> {
    let compiler = cc::Build::new().cargo_metadata(false).try_get_compiler().ok()?;
    let out = std::process::Command::new(compiler.path()).arg("-print-file-name=include").output().ok()?;
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    dir.join("stddef.h").is_file().then_some(dir)
}

/// One clear line for the user, then stop the build.
fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    println!("cargo:warning={message}");
    std::process::exit(1);
}
