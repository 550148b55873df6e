"""runlens' memory estimate against the measured peak resident memory, per column (docs/memory.md).

Usage: python3 scripts/memory_vs_estimate.py MODEL_DIR... (TEXT=... for the prompt;
RUNLENS=... for another binary than target/release/runlens)

For each column: `runlens memory --json` gives its peak; runlens' own memory at the
check of `run` is read from a refusal's message (--memory-budget 1M); the measured
peak is /usr/bin/time -f %M of `runlens run` with that column alone.
"""
import json, os, re, subprocess, sys, tempfile

B = os.environ.get("RUNLENS", "target/release/runlens")
TEXT = os.environ.get("TEXT", "The cat sat on the [MASK].")
RSS_FILE = os.path.join(tempfile.mkdtemp(), "rss")
UNIT = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}

def run(*args, **kw):
    return subprocess.run([B, *args], capture_output=True, text=True, **kw)

print(f"{'model':<24} {'column':<18} {'itself':>7} {'est':>7} {'meas':>7} {'est/meas':>8}   (MiB)")
for model in sys.argv[1:]:
    report = json.loads(run("--model", model, "memory", "--json").stdout)
    refusal = run("--model", model, "--memory-budget", "1M", "run", "--max-new-tokens", "16", TEXT).stderr
    m = re.search(r"runlens' own ([0-9.]+) ([KMG]iB)", refusal)
    own = float(m.group(1)) * UNIT[m.group(2)]
    for c in report["columns"]:
        cmd = ["/usr/bin/time", "-o", RSS_FILE, "-f", "%M", B, "--model", model, "--threads", "2",
               "--backends", c["name"], "run", "--max-new-tokens", "16", TEXT]
        r = subprocess.run(cmd, capture_output=True, text=True)
        meas = int(open(RSS_FILE).read().split()[-1]) / 1024
        # The estimate itself: "peak" is what the check uses, a measured figure once the probe has one.
        est = own + c["estimated_peak"] / 2**20
        flag = "" if r.returncode == 0 else f"  (exit {r.returncode})"
        print(f"{os.path.basename(model):<24} {c['name']:<18} {own:7.0f} {est:7.0f} {meas:7.0f} {est/meas:8.2f}{flag}")
