"""Executes one notebook with the GoNB kernel and checks its pictures.

    /usr/bin/python3 execute.py NOTEBOOK OUTDIR

Runs every cell in a fresh kernel with the notebook's folder as working
directory (Debian's nbclient: what `jupyter nbconvert --execute` runs),
writes the executed copy to OUTDIR/<name>.ipynb even when a cell fails, and
each picture to OUTDIR/<name>-<k>.png (or .svg). On failure it prints the
failing cell with its output. Exit status 1 when a cell failed, or when the
pictures (image/png or image/svg+xml outputs, each a valid image) are not
exactly as many as the notebook's metadata names: "gozoo": {"images": N}.
Called by run.sh.
"""
import base64
import os
import struct
import sys

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError


def indent(text, n=40):
    return "\n".join("    " + line for line in text.splitlines()[-n:])


def main(src, out):
    name = os.path.splitext(os.path.basename(src))[0]
    nb = nbformat.read(src, as_version=4)
    want = nb.metadata.get("gozoo", {}).get("images")
    client = NotebookClient(nb, kernel_name="gonb", timeout=600,
                            resources={"metadata": {"path": os.path.dirname(os.path.abspath(src))}})
    problems = []
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as e:
        for i, cell in enumerate(nb.cells):
            outs = cell.get("outputs", [])
            if any(o.get("output_type") == "error" for o in outs):
                print(f"  cell {i} failed:\n{indent(cell.source, 1000)}")
                for o in outs:
                    if o.get("output_type") == "stream":
                        print(f"  {o['name']}:\n{indent(o['text'])}")
                    elif o.get("output_type") == "error":
                        print(f"  error: {o.get('ename')}: {o.get('evalue')}")
                break
        else:
            print(f"  {type(e).__name__}: {e}")
        problems.append("a cell failed")
    finally:
        nbformat.write(nb, os.path.join(out, name + ".ipynb"))

    pictures = []
    for i, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if "image/png" in data:
                b = base64.b64decode(data["image/png"])
                if b[:8] != b"\x89PNG\r\n\x1a\n" or b[12:16] != b"IHDR":
                    problems.append(f"cell {i}: its image/png output is not a PNG")
                    continue
                w, h = struct.unpack(">II", b[16:24])
                if w < 32 or h < 32:
                    problems.append(f"cell {i}: a {w}x{h} PNG")
                pictures.append((i, "png", b, f"{w}x{h}"))
            if "image/svg+xml" in data:
                svg = data["image/svg+xml"]
                if "<svg" not in svg:
                    problems.append(f"cell {i}: its image/svg+xml output holds no <svg>")
                pictures.append((i, "svg", svg.encode(), f"{len(svg)} bytes"))
    for k, (i, ext, b, _) in enumerate(pictures):
        with open(os.path.join(out, f"{name}-{k}.{ext}"), "wb") as f:
            f.write(b)
    if not problems:
        if want is None:
            problems.append('its metadata names no picture count ("gozoo": {"images": N})')
        elif len(pictures) != want:
            problems.append(f"{len(pictures)} pictures, want {want}")
    print("  pictures: " + (", ".join(f"cell {i} {ext} {size}" for i, ext, _, size in pictures) or "none"))
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
