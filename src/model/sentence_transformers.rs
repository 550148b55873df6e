//! The sentence-transformers layout a hub repository ships beside its
//! safetensors, read from a model directory: the `onnx/` folder of ONNX files
//! (`model.onnx`, `model_qint8_arm64.onnx`, `model_O3.onnx`, ...) and the
//! pooling the repository's `modules.json` names (`1_Pooling/config.json`).
//! Plain reading: nothing here loads a model.

use std::path::{Path, PathBuf};

/// The folder of ONNX files, as sentence-transformers and Optimum lay it out.
pub const ONNX_FOLDER: &str = "onnx";

/// One ONNX file of the `onnx/` folder, as a column variant: its name
/// (`onnx/model_qint8_arm64`, the file's path in the directory without
/// `.onnx`), its path, and the quantization its file name says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubOnnxFile {
    pub name: String,
    pub path: PathBuf,
    /// `int8` for the 8-bit files (`qint8`, `quint8`, `int8`, `uint8`, `quantized` in the name),
    /// `4-bit` for `q4`/`bnb4`, `float16` for `fp16`: the hub's naming, read from the name
    /// only (the file is not opened to make the list).
    pub quantization: Option<String>,
}

/// The `.onnx` files of `root/onnx/`, by name; none when there is no such folder.
pub fn onnx_files(root: &Path) -> Vec<HubOnnxFile> {
    let Ok(read) = std::fs::read_dir(root.join(ONNX_FOLDER)) else { return Vec::new() };
    let mut found: Vec<HubOnnxFile> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e.eq_ignore_ascii_case("onnx")))
        .filter_map(|path| {
            let stem = path.file_stem()?.to_str()?.to_string();
            Some(HubOnnxFile { name: format!("{ONNX_FOLDER}/{stem}"), quantization: quantization_from_name(&stem), path })
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

/// What the hub's file names say of their weights (sentence-transformers'
/// `model_qint8_arm64`, `model_quint8_avx2`; transformers.js' `model_quantized`,
/// `model_int8`, `model_uint8`, `model_q4`, `model_bnb4`, `model_fp16`).
fn quantization_from_name(stem: &str) -> Option<String> {
    let s = stem.to_ascii_lowercase();
    let words: Vec<&str> = s.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    let has = |w: &str| words.contains(&w);
    if ["qint8", "quint8", "int8", "uint8", "quantized"].iter().any(|w| has(w)) {
        Some("int8".into())
    } else if ["q4", "q4f16", "bnb4", "int4"].iter().any(|w| has(w)) {
        Some("4-bit".into())
    } else if has("fp16") || has("f16") {
        Some("float16".into())
    } else {
        None
    }
}

/// How sentence-transformers pools the directory's `last_hidden_state`, as its
/// `modules.json` says (the module of type `sentence_transformers.models.Pooling`,
/// its folder's `config.json`; `1_Pooling/config.json` when there is no
/// `modules.json`): `Some(Ok("mean" | "cls"))`, `Some(Err(..))` naming a pooling
/// runlens does not do or a file it cannot read, `None` when the directory has
/// no pooling config.
pub fn pooling(root: &Path) -> Option<Result<String, String>> {
    let folder = pooling_folder(root)?;
    let path = root.join(&folder).join("config.json");
    if !path.is_file() {
        return None;
    }
    let read = || -> Result<String, String> {
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let config: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        let on = |key: &str| config.get(key).and_then(|v| v.as_bool()).unwrap_or(false);
        let modes: Vec<&str> = [
            ("pooling_mode_cls_token", "cls"),
            ("pooling_mode_mean_tokens", "mean"),
            ("pooling_mode_max_tokens", "max"),
            ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
            ("pooling_mode_weightedmean_tokens", "weightedmean"),
            ("pooling_mode_lasttoken", "lasttoken"),
        ]
        .into_iter()
        .filter(|(key, _)| on(key))
        .map(|(_, mode)| mode)
        .collect();
        match modes.as_slice() {
            ["cls"] => Ok("cls".into()),
            ["mean"] => Ok("mean".into()),
            [] => Err(format!("{}: no pooling mode is on", path.display())),
            other => Err(format!("{}: pooling {} (runlens pools `mean` or `cls`, one of them)", path.display(), other.join(" + "))),
        }
    };
    Some(read())
}

/// The pooling module's folder: from `modules.json`, else `1_Pooling`.
fn pooling_folder(root: &Path) -> Option<String> {
    let Ok(bytes) = std::fs::read(root.join("modules.json")) else { return Some("1_Pooling".into()) };
    let modules: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    modules.as_array()?.iter().find_map(|m| {
        let kind = m.get("type")?.as_str()?;
        kind.ends_with("models.Pooling").then(|| m.get("path")?.as_str().map(str::to_string))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_onnx_folder_lists_its_files_with_what_their_names_say() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(onnx_files(tmp.path()).is_empty(), "no onnx/ folder: nothing");
        let onnx = tmp.path().join("onnx");
        std::fs::create_dir(&onnx).unwrap();
        for f in ["model.onnx", "model_qint8_arm64.onnx", "model_O3.onnx", "model_fp16.onnx", "model_q4.onnx", "model.onnx_data", "notes.txt"] {
            std::fs::write(onnx.join(f), "x").unwrap();
        }
        std::fs::create_dir(onnx.join("sub.onnx")).unwrap();
        let found = onnx_files(tmp.path());
        let names: Vec<(&str, Option<&str>)> = found.iter().map(|f| (f.name.as_str(), f.quantization.as_deref())).collect();
        assert_eq!(
            names,
            [
                ("onnx/model", None),
                ("onnx/model_O3", None),
                ("onnx/model_fp16", Some("float16")),
                ("onnx/model_q4", Some("4-bit")),
                ("onnx/model_qint8_arm64", Some("int8"))
            ]
        );
        assert_eq!(found[0].path, onnx.join("model.onnx"));
    }

    #[test]
    fn pooling_is_read_where_modules_json_points() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        assert_eq!(pooling(root), None, "no pooling config");
        let write = |folder: &str, json: &str| {
            std::fs::create_dir_all(root.join(folder)).unwrap();
            std::fs::write(root.join(folder).join("config.json"), json).unwrap();
        };
        write("1_Pooling", r#"{"word_embedding_dimension": 384, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true}"#);
        assert_eq!(pooling(root), Some(Ok("mean".into())), "1_Pooling without modules.json");
        // modules.json names another folder, which pools the CLS token.
        write("2_Pool", r#"{"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#);
        let modules = r#"[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                          {"idx": 1, "name": "1", "path": "2_Pool", "type": "sentence_transformers.models.Pooling"}]"#;
        std::fs::write(root.join("modules.json"), modules).unwrap();
        assert_eq!(pooling(root), Some(Ok("cls".into())));
        write("2_Pool", r#"{"pooling_mode_max_tokens": true, "pooling_mode_mean_tokens": true}"#);
        let e = pooling(root).unwrap().unwrap_err();
        assert!(e.ends_with("2_Pool/config.json: pooling mean + max (runlens pools `mean` or `cls`, one of them)"), "{e}");
        write("2_Pool", "{ not json");
        assert!(pooling(root).unwrap().unwrap_err().contains("not JSON"));
    }
}
