use std::path::Path;

use serde_json::json;

use super::*;

/// A generation bench of two backends at two prompt lengths, figures chosen so
/// that prefill (tokens/s) and TTFT (ms) differ in every cell.
fn generation_json() -> serde_json::Value {
    let row = |backend: &str, prompt_len: usize, ttft_ms: f64, decode: f64, bytes: u64, fraction: f64| {
        json!({
            "backend": backend, "cache": "static", "prompt_len": prompt_len, "gen_tokens": 32, "runs": 3,
            "ttft_ms": ttft_ms, "ttft_min_ms": ttft_ms, "ttft_max_ms": ttft_ms,
            "prompt_tokens_per_s": prompt_len as f64 / ttft_ms * 1e3,
            "decode_tokens_per_s": decode, "decode_min": decode, "decode_max": decode,
            "ttft_speedup_vs_python": null, "decode_speedup_vs_python": null,
            "weight_bytes_per_token": bytes, "achieved_gbps": 1.0, "fraction_of_read_bandwidth": fraction,
            "runtime_decode_ms_per_token": null, "wrapper_overhead": null
        })
    };
    json!({
        "machine": {"cpu": "test", "cores": 2, "os": "test", "arch": "x86_64", "runlens": "0.1.0", "versions": {}},
        "model": "m", "weights": "random", "threads": 2, "command": "runlens bench", "gen_tokens": 32,
        "warmup": 1, "iters": 3, "max_seconds": 1.0, "python_iters": null, "interrupted": false,
        "results": [
            row("xnnpack-int8", 8, 7.73, 262.19, 135_301_028, 1.4477),
            row("llamacpp-q8_0", 8, 19.62, 176.28, 143_025_408, 1.0289),
            row("xnnpack-int8", 128, 51.2138, 191.14, 135_301_028, 1.0554),
            row("llamacpp-q8_0", 128, 273.51, 114.37, 143_025_408, 0.6675),
        ],
        "loads": [{"backend": "xnnpack-int8", "load_ms": 866.3, "rss_mb": 410.24}, {"backend": "llamacpp-q8_0", "load_ms": 52.1, "rss_mb": 548.96}],
        "skipped": []
    })
}

fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("gen.json"), serde_json::to_string_pretty(&generation_json()).unwrap()).unwrap();
    dir
}

const SPEC: &str = "gen.json
cols: xnnpack-int8 = XNNPACK int8 | llamacpp-q8_0 = llama.cpp q8_0
rows: decode_tokens_per_s@8 = decode after 8 tokens, tokens/s
    | prompt_tokens_per_s@128 = prefill of 128 tokens, tokens/s
    | ttft_ms@128 = TTFT at 128 tokens, ms
corner: SmolLM2
bold: xnnpack-int8, llamacpp-q8_0
";

fn rendered(dir: &Path, spec: &str) -> Result<String, String> {
    render(&Spec::parse(spec)?, dir)
}

#[test]
fn three_significant_figures_as_the_docs_write_them() {
    let sig3 = |v: f64| Format::Sig3.apply(v);
    assert_eq!(sig3(0.617983), "0.618");
    assert_eq!(sig3(0.922623), "0.923");
    assert_eq!(sig3(5.369855), "5.37");
    assert_eq!(sig3(20.316159), "20.3");
    assert_eq!(sig3(29.982719), "30.0");
    assert_eq!(sig3(156.631039), "157");
    assert_eq!(sig3(1859.125247), "1859");
    assert_eq!(sig3(99.96), "100");
    assert_eq!(sig3(9.996), "10.0");
    assert_eq!(sig3(0.09996), "0.100");
    assert_eq!(sig3(0.0), "0");
    let fraction = metric::metric("fraction_of_read_bandwidth").unwrap();
    assert_eq!(fraction.show(0.887853, fraction.format), "89%");
    assert_eq!(fraction.show(1.4477, Format::Decimals(1)), "144.8%");
    assert_eq!(Format::Decimals(1).apply(91.745287), "91.7");
    assert_eq!(Format::Whole.apply(71.4449), "71");
    assert_eq!(Format::parse(".1"), Ok(Format::Decimals(1)));
    assert!(Format::parse("sig4").unwrap_err().contains("sig4"));
}

#[test]
fn renders_backends_across_with_the_faster_bold() {
    let dir = fixture();
    let table = rendered(dir.path(), SPEC).unwrap();
    assert_eq!(
        table,
        "| SmolLM2 | XNNPACK int8 | llama.cpp q8_0 |
| --- | --- | --- |
| decode after 8 tokens, tokens/s | **262** | 176 |
| prefill of 128 tokens, tokens/s | **2499** | 468 |
| TTFT at 128 tokens, ms | **51.2** | 274 |
"
    );
}

#[test]
fn renders_backends_down_with_loads_percentages_and_formats() {
    let dir = fixture();
    let spec = "gen.json
rows: llamacpp-q8_0 | xnnpack-int8 as .1
cols: weight_mb_per_token@8 = MB a token | fraction_of_read_bandwidth@8 | rss_mb = load RSS MB | ttft_ms@8 as int
";
    assert_eq!(
        rendered(dir.path(), spec).unwrap(),
        "| | MB a token | of read bandwidth @8 | load RSS MB | TTFT ms @8 |
| --- | --- | --- | --- | --- |
| llamacpp-q8_0 | 143 | 103% | 549 | 20 |
| xnnpack-int8 | 135.3 | 144.8% | 410.2 | 8 |
"
    );
}

#[test]
fn a_swapped_column_is_caught() {
    let dir = fixture();
    let table = rendered(dir.path(), SPEC).unwrap();
    // The two backends' figures exchanged, their titles left: the README's mistake.
    let swapped: Vec<String> = table
        .lines()
        .enumerate()
        .map(|(i, line)| {
            if i < 2 {
                return line.to_string();
            }
            let c: Vec<&str> = line.split(" | ").collect();
            format!("{} | {} | {} |", c[0], c[2].trim_end_matches(" |"), c[1])
        })
        .collect();
    let lines: Vec<&str> = swapped.iter().map(String::as_str).collect();
    let (at, row, col, found, expected) = first_difference(&lines, 10, &table).expect("the swap is seen");
    assert_eq!((at, row.as_str(), col.as_str(), found.as_str(), expected.as_str()), (12, "decode after 8 tokens, tokens/s", "XNNPACK int8", "176", "**262**"));
    // The same table unswapped, spaced differently, is not stale.
    let spaced: Vec<String> = table.lines().map(|l| l.replace(" | ", "  |  ")).collect();
    assert_eq!(first_difference(&spaced.iter().map(String::as_str).collect::<Vec<_>>(), 1, &table), None);
    // A row fewer is seen too.
    assert!(first_difference(&table.lines().take(3).collect::<Vec<_>>(), 1, &table).is_some());
}

#[test]
fn errors_name_what_is_wrong() {
    let dir = fixture();
    let err = |spec: &str| rendered(dir.path(), spec).unwrap_err();
    let e = err("gen.json\ncols: xnnpack | eager\nrows: decode_tokens_per_s@8");
    assert!(e.contains("`xnnpack`") && e.contains("xnnpack-int8, llamacpp-q8_0"), "{e}");
    let e = err("gen.json\ncols: xnnpack-int8\nrows: decode_tokens_per_sec@8");
    assert!(e.contains("unknown metric `decode_tokens_per_sec`") && e.contains("decode_tokens_per_s"), "{e}");
    let e = err("missing.json\ncols: xnnpack-int8\nrows: decode_tokens_per_s@8");
    assert!(e.contains("missing.json"), "{e}");
    let e = err("gen.json\ncols: xnnpack-int8\nrows: decode_tokens_per_s@32");
    assert!(e.contains("32 tokens") && e.contains("8, 128"), "{e}");
    let e = err("gen.json\ncols: xnnpack-int8\nrows: decode_tokens_per_s");
    assert!(e.contains("needs a length"), "{e}");
    let e = err("gen.json\ncols: xnnpack-int8\nrows: rss_mb@8");
    assert!(e.contains("not per length"), "{e}");
    let e = err("gen.json\ncols: xnnpack-int8\nrows: p50_ms@8");
    assert!(e.contains("encoder benches") && e.contains("a generation bench"), "{e}");
    let e = err("gen.json\ncols: xnnpack-int8 | p50_ms@8\nrows: decode_tokens_per_s@8");
    assert!(e.contains("mixed"), "{e}");
    let e = err("gen.json\ncols: xnnpack-int8\nrows: decode_tokens_per_s@8\ncolour: red");
    assert!(e.contains("colour") && e.contains("unknown key"), "{e}");
    let e = err("gen.json\ncols: xnnpack-int8\nrows: decode_tokens_per_s@8\nbold: xnnpack-int8, eager");
    assert!(e.contains("`eager`"), "{e}");
    let e = err("a=gen.json b=gen.json\ncols: xnnpack-int8\nrows: decode_tokens_per_s@8");
    assert!(e.contains("in ALIAS"), "{e}");
    // Two sources, each cell's named.
    let two = rendered(dir.path(), "a=gen.json b=gen.json\ncols: xnnpack-int8\nrows: decode_tokens_per_s@8 in a = A | ttft_ms@8 in b = B").unwrap();
    assert!(two.contains("| A | 262 |") && two.contains("| B | 7.73 |"), "{two}");
}

#[test]
fn without_rows_and_cols_a_generation_bench_has_backends_down() {
    let dir = fixture();
    let table = rendered(dir.path(), "gen.json").unwrap();
    let header = table.lines().next().unwrap();
    assert_eq!(header, "| | decode t/s @8 | prefill t/s @8 | TTFT ms @8 | decode t/s @128 | prefill t/s @128 | TTFT ms @128 | load RSS MB |");
    assert!(table.contains("| xnnpack-int8 | 262 | 1035 | 7.73 | 191 | 2499 | 51.2 | 410 |"), "{table}");
    // A backend without a load: no RSS column by default.
    let mut json = generation_json();
    json["loads"].as_array_mut().unwrap().pop();
    std::fs::write(dir.path().join("unloaded.json"), json.to_string()).unwrap();
    let table = rendered(dir.path(), "unloaded.json").unwrap();
    assert!(table.lines().next().unwrap().ends_with("| TTFT ms @128 |"), "{table}");
    // The spec a marker would carry reads back to the same table.
    let spec = Spec::parse("gen.json\ncols: ttft_ms@8 as .2 in x = t | rss_mb\nrows: xnnpack-int8\nbold: a, b\nformat: int\nthreads: 2\ncorner: c").unwrap();
    assert_eq!(spec.text(), "gen.json\nrows: xnnpack-int8\ncols: ttft_ms@8 in x as .2 = t\n    | rss_mb\ncorner: c\nbold: a, b\nformat: int\nthreads: 2");
    assert_eq!(Spec::parse(&spec.text()).unwrap().text(), spec.text());
}

#[test]
fn blocks_skip_code_fences_and_must_be_closed() {
    let text = "# t\n\n```\n<!-- report: x.json -->\n```\n\n<!-- report: gen.json\ncols: a\n-->\n\n| x |\n\n<!-- /report -->\ntail\n";
    let found = blocks(text).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].line, 7);
    assert_eq!(found[0].spec, " gen.json\ncols: a\n");
    assert_eq!(found[0].body, 9..12);
    assert_eq!(blocks("<!-- report: a.json -->\n| x |\n").unwrap_err().0, 1);
    assert_eq!(blocks("text\n<!-- report: a.json\ncols: a\n").unwrap_err().0, 2);
    assert!(blocks("<!-- /report -->\n").unwrap_err().1.contains("without"));
}

#[test]
fn check_and_write_a_file() {
    let dir = fixture();
    let md = dir.path().join("doc.md");
    let marker = format!("<!-- report: {SPEC}-->");
    std::fs::write(&md, format!("# Figures\n\n{marker}\n| stale |\n<!-- /report -->\n\nAfter.\n")).unwrap();
    let checked = check_file(&md).unwrap();
    assert_eq!(checked.blocks, 1);
    assert_eq!(checked.stale.len(), 1);
    let stale = &checked.stale[0];
    assert_eq!((stale.line, stale.at, stale.sources.as_str(), stale.found.as_str()), (3, 11, "gen.json", "stale"));
    assert!(stale.to_string().contains("doc.md:3: the table of gen.json differs"), "{stale}");
    assert_eq!(write_file(&md).unwrap(), (1, 1));
    let written = std::fs::read_to_string(&md).unwrap();
    assert!(written.starts_with(&format!("# Figures\n\n{marker}\n\n| SmolLM2 |")), "{written}");
    assert!(written.ends_with("| **51.2** | 274 |\n\n<!-- /report -->\n\nAfter.\n"), "{written}");
    assert_eq!(check_file(&md).unwrap().stale, vec![]);
    assert_eq!(write_file(&md).unwrap(), (1, 0));
    // A block that cannot render is an error naming the file, line and JSON.
    std::fs::write(&md, "<!-- report: nothing.json\ncols: a\n-->\n<!-- /report -->\n").unwrap();
    let err = check_file(&md).unwrap_err();
    assert!(err.at.ends_with("doc.md:1 (nothing.json)") && err.why.contains("nothing.json"), "{err}");
}

/// `runlens eval --json`'s report renders as a bench does: one figure a column, no length;
/// the reference's own comparisons are `–`, a column that never parts from it `none`.
#[test]
fn an_eval_report_renders_its_columns_and_names_what_is_missing() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
    let spec = "eval-smollm2-135m.json
rows: eager | xnnpack | xnnpack-8da4w
cols: bits | top1_agreement | median_first_divergence | mean_kl | perplexity_ratio
";
    let table = render(&Spec::parse(spec).unwrap(), &base).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[0], "| | bits | top-1 | median first divergence | mean KL | vs reference |");
    assert_eq!(lines[2], "| eager | 32 | – | – | – | 1.0000 |", "the reference compared with itself: no figures");
    assert_eq!(lines[3], "| xnnpack | 32 | 100.0% | none | 3.09e-11 | 1.0000 |");
    assert_eq!(lines[4], "| xnnpack-8da4w | 4 | 61.7% | 0 | 7.18e-1 | 1.7124 |");
    let err = |spec: &str| render(&Spec::parse(spec).unwrap(), &base).unwrap_err();
    assert!(err("eval-smollm2-135m.json\nrows: eager\ncols: top1_agreement@8").contains("one figure per column"));
    let missing = err("eval-smollm2-135m.json\nrows: portable\ncols: top1_agreement");
    assert!(missing.contains("no column `portable`") && missing.contains("llamacpp-q4_1"), "{missing}");
    let wrong_kind = err("eval-smollm2-135m.json\nrows: eager\ncols: decode_tokens_per_s@8");
    assert!(wrong_kind.contains("an eval report"), "{wrong_kind}");
    assert_eq!(Format::parse("e2"), Ok(Format::Sci(2)));
    assert_eq!(Format::Sci(2).apply(0.0049018), "4.90e-3");
}
