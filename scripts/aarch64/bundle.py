"""Lay out what a Raspberry Pi 5 needs to run the cross-built runlens:

    bundle.py BINARY SITE OUT_DIR [--dlopen LIBRARY ...]

OUT_DIR/runlens          the aarch64 binary, its run path set to $ORIGIN/lib
OUT_DIR/lib/             every shared library it loads that comes from the
                         aarch64 wheels unpacked in SITE (found by walking the
                         ELF DT_NEEDED entries with readelf), each with its run
                         path set to $ORIGIN so they find one another there
                         and every --dlopen LIBRARY (a library the binary opens at
                         run time, which no DT_NEEDED names: ONNX Runtime's, which
                         runlens looks for in lib/ beside itself), with what it needs
OUT_DIR/MANIFEST.txt     the files and their sizes

The system libraries (libc, libstdc++, libgcc_s, libm ...) are left to the Pi's
own OS. Needs readelf (binutils) and patchelf.
"""

import os
import re
import shutil
import subprocess
import sys


def needed(path: str) -> list[str]:
    out = subprocess.run(["readelf", "-d", path], check=True, capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)


def main() -> int:
    binary, site, out = sys.argv[1:4]
    rest = sys.argv[4:]
    dlopened = [rest[i + 1] for i, flag in enumerate(rest) if flag == "--dlopen" and i + 1 < len(rest)]
    for lib in dlopened:
        if not os.path.isfile(lib):
            print(f"error: --dlopen {lib}: no such file", file=sys.stderr)
            return 1
    available = {}
    for root, _, files in os.walk(site):
        for name in files:
            if ".so" in name:
                available.setdefault(name, os.path.join(root, name))
    bundled: dict[str, str] = {}
    system: set[str] = set()
    for lib in dlopened:
        bundled[os.path.basename(lib)] = lib
    todo = [binary, *dlopened]
    while todo:
        for name in needed(todo.pop()):
            if name in bundled or name in system:
                continue
            if name in available:
                bundled[name] = available[name]
                todo.append(available[name])
            else:
                system.add(name)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "lib"))
    shutil.copy2(binary, os.path.join(out, "runlens"))
    subprocess.run(["patchelf", "--set-rpath", "$ORIGIN/lib", os.path.join(out, "runlens")], check=True)
    lines = []
    total = os.path.getsize(os.path.join(out, "runlens"))
    lines.append(f"{total:>12}  runlens")
    for name, src in sorted(bundled.items()):
        dst = os.path.join(out, "lib", name)
        shutil.copy2(src, dst)
        subprocess.run(["patchelf", "--set-rpath", "$ORIGIN", dst], check=True)
        size = os.path.getsize(dst)
        total += size
        lines.append(f"{size:>12}  lib/{name}")
    lines.append(f"{total:>12}  total ({total / 1e6:.0f} MB); from the Pi's OS: {', '.join(sorted(system))}")
    with open(os.path.join(out, "MANIFEST.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"bundle: {out}: runlens + {len(bundled)} libraries, {total / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
