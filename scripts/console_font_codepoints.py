#!/usr/bin/env python3
"""Code points the Linux text console can draw: read from the Unicode tables of
the PSF fonts in Debian's `console-setup-linux` package (the fonts Raspberry Pi
OS and Debian set up on the console).

    apt-get download console-setup-linux
    python3 scripts/console_font_codepoints.py console-setup-linux_*.deb \
        --out tests/data/console-font-codepoints.txt \
        --union-out tests/data/console-font-codepoints-union.txt

Writes one line per font (`# font NAME: N code points`) and then the code points
that EVERY listed font maps to a glyph, one `U+XXXX` per line. The intersection,
not the union (which `--union-out` writes, for reference): a character one font
lacks shows as that font's replacement glyph, and the user picks the font, not
runlens. Lat15 is a subset of Uni2 here, so the union is Uni2's table and would
let through `Δ` and the other characters a Lat15 console cannot draw. A screen
that passes the intersection shows on every one of the fonts, so it passes the
union too. `tests/tui_snapshots.rs` (mod glyphs) and `tests/tui_e2e.rs` (the
explorer under TERM=linux) check every cell drawn with the console glyph set
against the intersection.

Only the standard library: the .deb is an `ar` archive holding data.tar.*; the
fonts are gzip-compressed PSF1 or PSF2 files.
"""

import argparse
import gzip
import io
import lzma
import struct
import sys
import tarfile

# The 16-pixel faces console-setup offers for Latin text (FONTFACE Fixed,
# Terminus, TerminusBold, VGA) in the two code sets a Pi with a Latin locale gets
# (CODESET "guess" gives Lat15; Uni2 is the broader choice).
FONTS = [
    f"{codeset}-{face}16.psf.gz"
    for codeset in ("Lat15", "Uni2")
    for face in ("Fixed", "Terminus", "TerminusBold", "VGA")
]
FONT_DIR = "usr/share/consolefonts/"


def ar_members(data):
    """(name, bytes) of each member of an `ar` archive (a .deb)."""
    if data[:8] != b"!<arch>\n":
        raise SystemExit("error: not a .deb (ar) archive")
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        yield name, data[pos + 60 : pos + 60 + size]
        pos += 60 + size + (size & 1)


def data_tar(deb_bytes):
    for name, body in ar_members(deb_bytes):
        if name.startswith("data.tar"):
            if name.endswith(".xz"):
                body = lzma.decompress(body)
            elif name.endswith(".gz"):
                body = gzip.decompress(body)
            elif name.endswith(".zst"):
                raise SystemExit("error: data.tar.zst: unpack the .deb with dpkg-deb -x and pass the folder")
            return tarfile.open(fileobj=io.BytesIO(body))
    raise SystemExit("error: no data.tar in the .deb")


def psf_codepoints(psf):
    """Every single code point the font's Unicode table maps to a glyph
    (sequences of combining characters are skipped)."""
    if psf[:2] == b"\x36\x04":  # PSF1
        mode, charsize = psf[2], psf[3]
        glyphs = 512 if mode & 0x01 else 256
        if not mode & 0x06:
            raise ValueError("PSF1 font without a Unicode table")
        table = psf[4 + glyphs * charsize :]
        points, pos, in_sequence = set(), 0, False
        for _ in range(glyphs):
            while True:
                (u,) = struct.unpack_from("<H", table, pos)
                pos += 2
                if u == 0xFFFF:
                    in_sequence = False
                    break
                if u == 0xFFFE:
                    in_sequence = True
                elif not in_sequence:
                    points.add(u)
        return points
    if psf[:4] == b"\x72\xb5\x4a\x86":  # PSF2
        _version, header_size, flags, length, charsize = struct.unpack_from("<IIIII", psf, 4)
        if not flags & 0x01:
            raise ValueError("PSF2 font without a Unicode table")
        table = psf[header_size + length * charsize :]
        points = set()
        for entry in table.split(b"\xff")[:length]:
            single = entry.split(b"\xfe")[0]
            points.update(ord(c) for c in single.decode("utf-8"))
        return points
    raise ValueError("not a PSF font")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("deb", help="console-setup-linux_*.deb (from `apt-get download console-setup-linux`)")
    ap.add_argument("--out", required=True, help="the code points all the fonts draw (the tests use this list)")
    ap.add_argument("--union-out", help="also write the code points any of the fonts draws")
    args = ap.parse_args()
    with open(args.deb, "rb") as f:
        tar = data_tar(f.read())
    names = {m.name.lstrip("./"): m for m in tar.getmembers()}
    per_font = {}
    for font in FONTS:
        member = names.get(FONT_DIR + font)
        if member is None:
            raise SystemExit(f"error: {FONT_DIR}{font} is not in {args.deb}")
        psf = gzip.decompress(tar.extractfile(member).read())
        per_font[font] = psf_codepoints(psf)
    common = set.intersection(*per_font.values())
    version = args.deb.rsplit("/", 1)[-1]
    write_list(args.out, f"every one of these console fonts draws, from {version}", per_font, "in all of them", common)
    print(f"{len(common)} code points common to {len(FONTS)} fonts -> {args.out}", file=sys.stderr)
    if args.union_out:
        union = set.union(*per_font.values())
        write_list(args.union_out, f"at least one of these console fonts draws, from {version} (not used by the tests)", per_font, "in any of them", union)
        print(f"{len(union)} code points in any of {len(FONTS)} fonts -> {args.union_out}", file=sys.stderr)


def write_list(path, what, per_font, label, points):
    with open(path, "w") as out:
        out.write(f"# Code points {what}\n")
        out.write("# written by scripts/console_font_codepoints.py; do not edit\n")
        for font, font_points in per_font.items():
            out.write(f"# font {font}: {len(font_points)} code points\n")
        out.write(f"# {label}: {len(points)}\n")
        for p in sorted(points):
            out.write(f"U+{p:04X}\n")


if __name__ == "__main__":
    main()
