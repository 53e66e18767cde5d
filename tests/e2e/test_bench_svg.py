#!/usr/bin/python3
"""The bench's SVG writer (src/bench/svg_plot.cpp), through `dflash bench --plot-from F.json
--plot F.svg`: the output is well-formed XML (xml.etree), has one panel and one polyline per
expected curve with one point (and one marker) per data point, points inside the canvas, the
y axis pointing up (larger values higher), and text escaped (a model name with <&>"').

Two documents: `bench --vs-llamacpp` rows (per row: dflash, llama.cpp and the physical bound,
forward_ms[K] / forward_ms[1]) and a `bench --draft` result (cost curve; tok/s and speedup vs
block size per regime, with a draft2 row on one regime).
"""
import json
import os
import subprocess
import tempfile
import xml.etree.ElementTree as ET

from harness import BIN, SRC, check, finish  # noqa: E402
NS = "{http://www.w3.org/2000/svg}"
KS = [1, 2, 4, 5, 8, 16, 32]


def plot(doc, tmp, name):
    j, s = os.path.join(tmp, name + ".json"), os.path.join(tmp, name + ".svg")
    with open(j, "w") as f:
        json.dump(doc, f)
    r = subprocess.run([BIN, "bench", "--plot-from", j, "--plot", s], capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise SystemExit("FAIL: bench --plot-from: " + r.stderr)
    with open(s) as f:
        text = f.read()
    root = ET.fromstring(text)  # raises on malformed XML
    return root


def polylines(root):
    out = []
    for p in root.iter(NS + "polyline"):
        if p.get("class") != "series":
            continue
        pts = [tuple(map(float, xy.split(","))) for xy in p.get("points").split()]
        out.append((p.get("data-series"), pts))
    return out


def in_canvas(root, lines):
    w, h = float(root.get("width")), float(root.get("height"))
    return all(0 <= x <= w and 0 <= y <= h for _, pts in lines for x, y in pts)


def vs_doc():
    rows = []
    for model, quant in [("qwen2.5-0.5b", "q8_0"), ('m<&>"\'', "q4_0")]:
        d = {str(k): 10.0 + 2.0 * k for k in KS}
        ll = {str(k): 12.0 + 3.0 * k for k in KS}
        b = {str(k): 8.0 for k in KS}
        rows.append({"model": model, "quant": quant, "threads": 2, "bandwidth_gb_s": 10.0,
                     "bound_ms": b,
                     "dflash": {"pp512_tok_s": 100, "tg128_tok_s": 20, "forward_ms": d,
                                "roof_fraction": 0.6},
                     "llamacpp": {"pp512_tok_s": 90, "tg128_tok_s": 18, "forward_ms": ll},
                     "ratio": {"pp512_tok_s": 1.1, "tg128_tok_s": 1.1,
                               "forward_ms": {k: d[k] / ll[k] for k in d}}})
    return rows


def dflash_doc():
    bs = [2, 4, 8, 16]
    reg = []
    for name, with2 in [("code", True), ("long-edit", False)]:
        r = {"regime": name, "prompts": 3, "plain_tok_s": 20.0,
             "dflash": {str(b): {"tok_s": 20.0 + b, "speedup": 1 + b / 20, "accept_rate": 0.5,
                                 "tau": 2.0, "steps": 10} for b in bs}}
        if with2:
            r["draft2"] = {str(b): {"tok_s": 22.0 + b, "speedup": 1.1 + b / 20, "accept_rate": 0.6,
                                    "tau": 2.2, "steps": 9} for b in bs}
        reg.append(r)
    cost = [{"K": k, "forward_ms": 5.0 + k, "ratio": (5.0 + k) / 6.0, "draft_ratio": 0.1 * k if k > 1 else 0}
            for k in range(1, 17)]
    return {"regimes": reg, "cost_model": cost}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        root = plot(vs_doc(), tmp, "vs")
        check("vs: root is <svg>", root.tag == NS + "svg", root.tag)
        panels = [g for g in root.iter(NS + "g") if g.get("class") == "panel"]
        check("vs: one panel per row", len(panels) == 2, str(len(panels)))
        lines = polylines(root)
        names = [n for n, _ in lines]
        check("vs: 3 curves per row", names == ["dflash", "llama.cpp", "physical bound"] * 2, str(names))
        check("vs: one point per K", all(len(p) == len(KS) for _, p in lines),
              str([len(p) for _, p in lines]))
        markers = [c for c in root.iter(NS + "circle") if c.get("class") == "marker"]
        check("vs: one marker per point", len(markers) == 6 * len(KS), str(len(markers)))
        check("vs: points inside the canvas", in_canvas(root, lines))
        d = lines[0][1]
        check("vs: x increases with K", all(d[i][0] < d[i + 1][0] for i in range(len(d) - 1)), str(d))
        # dflash ratio (10+2K)/12 grows with K: svg y shrinks; the bound (flat) stays level.
        check("vs: y axis points up", all(d[i][1] > d[i + 1][1] for i in range(len(d) - 1)), str(d))
        bnd = lines[2][1]
        check("vs: flat bound is level", len({y for _, y in bnd}) == 1, str(bnd))
        # K=1 is ratio 1 for all three: the same pixel height.
        check("vs: ratio 1 at K=1 for every curve", len({pts[0][1] for _, pts in lines[:3]}) == 1,
              str([pts[0] for _, pts in lines[:3]]))
        titles = "".join(t.text or "" for t in root.iter(NS + "text"))
        check("vs: escaped model name survives", 'm<&>"\'' in titles, titles[:200])

        root = plot(dflash_doc(), tmp, "dflash")
        panels = [g for g in root.iter(NS + "g") if g.get("class") == "panel"]
        check("draft: 3 panels (cost, tok/s, speedup)", len(panels) == 3, str(len(panels)))
        lines = polylines(root)
        got = [(n, len(p)) for n, p in lines]
        want = [("target forward(K) / forward(1)", 16), ("draft block / forward(1)", 15),
                ("code plain", 2), ("code", 4), ("code (draft2)", 4),
                ("long-edit plain", 2), ("long-edit", 4),
                ("code", 4), ("code (draft2)", 4), ("long-edit", 4)]
        check("draft: curves and point counts", got == want, str(got))
        markers = [c for c in root.iter(NS + "circle") if c.get("class") == "marker"]
        check("draft: one marker per point", len(markers) == sum(n for _, n in want), str(len(markers)))
        check("draft: points inside the canvas", in_canvas(root, lines))

        # Nothing to plot is an error, not an empty picture.
        j = os.path.join(tmp, "empty.json")
        with open(j, "w") as f:
            json.dump({"nothing": 1}, f)
        r = subprocess.run([BIN, "bench", "--plot-from", j, "--plot", os.path.join(tmp, "e.svg")],
                           capture_output=True, text=True, timeout=60)
        check("empty document is an error", r.returncode != 0 and "nothing to plot" in r.stderr,
              r.stderr)
    finish()


if __name__ == "__main__":
    main()
