//! The export on a disk too small for its files (python/runlens_export/disk.py): refused
//! before anything is written, with the figures and what to do; and on a disk that fills
//! anyway, one message instead of a Python traceback, the staging folder removed and
//! nothing left half-written. The disk is a real one, a small tmpfs mounted in a mount
//! namespace of the export's own (`unshare -m`, root), gone when the export ends; where
//! the test cannot make one it says so on stderr and checks nothing.


use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `python/export.py ARGS --out <tmpfs>/out` on a tmpfs of `size` (mount's syntax),
/// then lists what is left on it (`ls -A`); None when no tmpfs can be mounted here.
fn export_on_small_disk(size: &str, args: &[&str], env: &[(&str, &str)]) -> Option<(Output, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mnt: PathBuf = std::env::temp_dir().join(format!("runlens-small-disk-{}-{size}", std::process::id()));
    std::fs::create_dir_all(&mnt).unwrap();
    let probe = Command::new("unshare").args(["-m", "sh", "-c"]).arg(format!("mount -t tmpfs -o size={size} tmpfs {}", mnt.display())).output();
    if !matches!(&probe, Ok(o) if o.status.success()) {
        eprintln!("no tmpfs can be mounted here (unshare -m and mount need root): the disk check is not tested");
        let _ = std::fs::remove_dir(&mnt);
        return None;
    }
    let script = format!(
        "mount -t tmpfs -o size={size} tmpfs {m} && \"$0\" python/export.py \"$@\" --out {m}/out; status=$?; echo; echo left:; ls -A {m}; exit $status",
        m = mnt.display()
    );
    let mut cmd = Command::new("unshare");
    cmd.current_dir(root).args(["-m", "sh", "-c", &script]).arg(root.join(".venv/bin/python")).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("unshare runs");
    let _ = std::fs::remove_dir(&mnt);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let left = stdout.rsplit("left:\n").next().unwrap_or("").trim().to_string();
    Some((out, left))
}

fn tiny_gpt2() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/checkpoints/tiny-gpt2").display().to_string()
}

fn args(model: &str) -> Vec<&str> {
    vec!["--model", model, "--task", "text-generation", "--programs", "none", "--no-gguf", "--no-onnx"]
}

#[test]
fn an_export_that_would_not_fit_on_the_disk_is_refused_before_it_writes() {
    let model = tiny_gpt2();
    let Some((out, left)) = export_on_small_disk("4m", &args(&model), &[]) else { return };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not enough disk space") && stderr.contains("MiB is free"), "names the disk and the figures: {stderr}");
    assert!(stderr.contains("--programs"), "says what to write less of: {stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
    assert!(left.is_empty(), "nothing written: {left}");
}

#[test]
fn a_disk_that_fills_during_the_export_ends_in_one_message_and_leaves_nothing() {
    let model = tiny_gpt2();
    // Past the check (told to try anyway), on a disk smaller than the tiny model's weights
    // (566 kB): the eager column's files fill it.
    let Some((out, left)) = export_on_small_disk("256k", &args(&model), &[("RUNLENS_EXPORT_NO_DISK_CHECK", "1")]) else { return };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the disk filled while the export wrote"), "{stderr}");
    assert!(stderr.contains("left as it was") && stderr.contains("staging folder removed"), "{stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
    assert!(left.is_empty(), "the staging folder is gone: {left}");
}
