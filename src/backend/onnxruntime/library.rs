//! Where `libonnxruntime.so` is. `ort` opens it at run time (`load-dynamic`),
//! so runlens says which file: the first of
//!
//! 1. `$RUNLENS_ONNXRUNTIME_LIB` (or `ort`'s own `$ORT_DYLIB_PATH`): a file a user names;
//! 2. `lib/libonnxruntime.so*` beside the binary: the Pi bundle's copy
//!    (scripts/aarch64/bundle.py), as its other libraries sit there;
//! 3. the onnxruntime wheel the build found in the venv
//!    (`onnxruntime/capi/libonnxruntime.so.1.31.1`, baked in by build.rs as
//!    the ExecuTorch and libtorch folders are, as an rpath).
//!
//! A name that is set but holds no file is an error that says so, not a fall-through.

use std::path::{Path, PathBuf};

/// The variable a user names the library with.
pub const ENV: &str = "RUNLENS_ONNXRUNTIME_LIB";
/// `ort`'s own variable, honoured too.
pub const ORT_ENV: &str = "ORT_DYLIB_PATH";

/// What to do when there is none, for error messages.
pub const HOW_TO_GET: &str = "install onnxruntime==1.31.1 in .venv (`make build` does: requirements.txt), \
     or set RUNLENS_ONNXRUNTIME_LIB to its onnxruntime/capi/libonnxruntime.so.1.31.1";

/// The wheel's library the build found (build.rs), when it found one.
const BUILT_WITH: Option<&str> = option_env!("RUNLENS_ONNXRUNTIME_LIB_BUILT");

/// The version of the library [`find`] finds, from its file name
/// (`libonnxruntime.so.1.31.1`: `1.31.1`); None when there is none or its name says none.
pub fn version() -> Option<String> {
    let path = find().ok()?;
    let name = path.file_name()?.to_str()?;
    let version = name.split_once(".so.")?.1;
    version.chars().next().is_some_and(|c| c.is_ascii_digit()).then(|| version.to_string())
}

/// The library to open, or why there is none.
pub fn find() -> anyhow::Result<PathBuf> {
    for var in [ENV, ORT_ENV] {
        if let Some(named) = std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from) {
            anyhow::ensure!(named.is_file(), "${var} names {}, which is not a file; {HOW_TO_GET}", named.display());
            return Ok(named);
        }
    }
    let beside = std::env::current_exe().ok().and_then(|exe| exe.parent().map(|d| d.join("lib"))).and_then(|lib| in_folder(&lib));
    if let Some(found) = beside {
        return Ok(found);
    }
    match BUILT_WITH.map(PathBuf::from) {
        Some(built) if built.is_file() => Ok(built),
        Some(built) => anyhow::bail!("no ONNX Runtime library: {} (found when runlens was built) is gone; {HOW_TO_GET}", built.display()),
        None => anyhow::bail!("no ONNX Runtime library: runlens was built without the onnxruntime wheel in .venv; {HOW_TO_GET}"),
    }
}

/// `libonnxruntime.so` or `libonnxruntime.so.<version>` in `folder` (the highest name).
pub fn in_folder(folder: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(folder)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name == "libonnxruntime.so" || name.starts_with("libonnxruntime.so.")
        })
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_in_a_folder_is_the_versioned_one_not_a_provider() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(in_folder(tmp.path()), None);
        std::fs::write(tmp.path().join("libonnxruntime_providers_shared.so"), b"").unwrap();
        assert_eq!(in_folder(tmp.path()), None, "the providers' library is not ONNX Runtime");
        std::fs::write(tmp.path().join("libonnxruntime.so.1.31.1"), b"").unwrap();
        assert_eq!(in_folder(tmp.path()), Some(tmp.path().join("libonnxruntime.so.1.31.1")));
    }
}
