"""A profile's replay against the real run it was profiled from, side by side.

Generates photo-like JPEGs (an ImageFolder) in a temporary directory, profiles it
(``iobench profile``), then runs, interleaved PAIRS times, the real pipeline
(``iobench loader DIR --existing --profile P``) and the replay (``iobench loader TARGET
--profile P``), and prints each AU beside what each side spent by its own CPU clocks
(``scripts/replay_cpu_probe.py``): the workers' process CPU per sample (read, decode or burn,
collate, hand-off), the main loop's thread CPU per step, and the image decode's thread CPU per
sample (the profile's process and the real workers; each worker's first decode apart). Then
the medians, ranges and the replay's difference (docs/validation/replay.md). Needs Pillow.
Each pair takes about 40 s on 2 cores; the load average is printed with every pair.

    python scripts/bench_replay.py [--files 200] [--pairs 3] [--buffered]
        [--set batch_size=8 --set compute_s=0.02 --set workers=2 --set epochs=3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

LOOP = ["batch_size=8", "compute_s=0.02", "workers=2", "epochs=3"]


def make_jpegs(root: str, n: int, seed: int = 7) -> None:
    """``n`` ImageNet-sized JPEGs (about 90 KiB): smooth gradients plus noise, quality 90."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(n):
        d = os.path.join(root, f"class{i % 4}")
        os.makedirs(d, exist_ok=True)
        h, w = 375 + int(rng.integers(-40, 40)), 500 + int(rng.integers(-60, 60))
        y, x = np.mgrid[0:h, 0:w]
        slopes = [(rng.uniform(0.2, 0.6), rng.uniform(0.1, 0.5)) for _ in range(3)]
        base = np.stack([(x * a + y * b + 60 * k) % 256 for k, (a, b) in enumerate(slopes)], -1)
        img = np.clip(base + rng.normal(0, 18, (h, w, 3)), 0, 255).astype(np.uint8)
        Image.fromarray(img).save(os.path.join(d, f"{i:04d}.jpg"), quality=90)


PROBE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replay_cpu_probe.py")


def iobench(probe_dir: str, *args: str) -> dict:
    """``iobench ARGS --json`` under the CPU probes (their records into ``probe_dir``)."""
    os.makedirs(probe_dir)
    cmd = [sys.executable, PROBE, probe_dir, *args, "--no-history", "--json", "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)


def cpu(probe_dir: str) -> dict[str, float]:
    """The probes' figures of one command's run phase: CPU seconds per unit for each kind
    (worker: per sample, main: per step, decode: per sample) and the mean first decode."""
    tot: dict[str, list[float]] = {}
    firsts: list[float] = []
    for name in os.listdir(probe_dir):
        with open(os.path.join(probe_dir, name)) as fh:
            r = json.load(fh)
        if r["phase"] != "run":
            continue
        t = tot.setdefault(r["kind"], [0.0, 0.0])
        t[0] += r["cpu_s"]
        t[1] += r["units"]
        if r["kind"] == "decode" and r["first_s"] >= 0:
            firsts.append(r["first_s"])
    out = {k: c / u for k, (c, u) in tot.items() if u}
    if firsts:
        out["first_decode"] = statistics.fmean(firsts)
    return out


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.2f}"


def pair(tmp: str, k: int, data: str, target: str, prof: str, buffered: bool) -> dict:
    """One real run then one replay: their AU and CPU figures."""
    r = iobench(os.path.join(tmp, f"cpu-real{k}"), "loader", data, "--existing",
                "--profile", prof, "--output", os.path.join(tmp, f"real{k}"))  # fmt: skip
    extra = ["--buffered"] if buffered else []
    s = iobench(os.path.join(tmp, f"cpu-rep{k}"), "loader", target, "--profile", prof, *extra,
                "--output", os.path.join(tmp, f"rep{k}"))  # fmt: skip
    cr, cs = cpu(os.path.join(tmp, f"cpu-real{k}")), cpu(os.path.join(tmp, f"cpu-rep{k}"))
    split = r["loader"]["existing"]["split"]
    return {
        "au": (r["loader"]["au"], s["loader"]["au"]),
        "worker": (cr.get("worker"), cs.get("worker")),
        "main": (cr.get("main"), cs.get("main")),
        "decode": (split["decode_cpu_s_per_sample"], s["loader"]["decode"]["cpu_s_per_sample"]),
        "probe_decode": cr.get("decode"),
        "first_decode": cr.get("first_decode"),
        "collate": split["collate_cpu_s_per_batch"],
        "load": load(),
    }


def report(p: dict, k: int) -> None:
    (ar, as_), (wr, ws), (mr, mp), (dr, ds) = p["au"], p["worker"], p["main"], p["decode"]
    print(
        f"pair {k + 1} (load {p['load']}): AU real {ar:.3f} replay {as_:.3f} ({100 * (as_ - ar):+.1f})"
        f" | worker CPU/sample real {ms(wr)} replay {ms(ws)} ms | main CPU/step real {ms(mr)}"
        f" replay {ms(mp)} ms | decode CPU/sample real {ms(dr)} (probe {ms(p['probe_decode'])},"
        f" first in a worker {ms(p['first_decode'])}) replay burn+format {ms(ds)} ms"
        f" | real collate CPU/batch {ms(p['collate'])} ms",
        flush=True,
    )


def med(pairs: list[dict], key: str, side: int) -> float:
    vals = [p[key][side] for p in pairs if p[key][side] is not None]
    return statistics.median(vals) if vals else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--buffered", action="store_true", help="the replay reads buffered")
    ap.add_argument("--set", action="append", dest="sets", default=None)
    a = ap.parse_args()
    t0 = time.monotonic()
    print(f"load at start {load()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="iobench-replay-") as tmp:
        data, target, prof = (os.path.join(tmp, n) for n in ("imgs", "target", "p.toml"))
        os.mkdir(target)
        make_jpegs(data, a.files)
        sets = [x for s in (a.sets or LOOP) for x in ("--set", s)]
        pdir = os.path.join(tmp, "cpu-profile")
        os.makedirs(pdir)
        subprocess.run([sys.executable, PROBE, pdir, "profile", data, "--output", prof, *sets], check=True)  # fmt: skip
        with open(prof) as fh:
            got = [ln for ln in fh if ln.startswith(("decode_s", "decode_wall_s"))]
        pc = cpu(pdir)
        print(f"profile: {' '.join(x.strip() for x in got)}; probe: decode CPU "
              f"{ms(pc.get('decode'))} ms/sample (load {load()})", flush=True)  # fmt: skip
        pairs = []
        for k in range(a.pairs):
            pairs.append(pair(tmp, k, data, target, prof, a.buffered))
            report(pairs[-1], k)
    print(f"medians of {a.pairs} pairs ({time.monotonic() - t0:.0f} s, load at end {load()}):")
    for key, unit in (("au", ""), ("worker", " ms"), ("main", " ms"), ("decode", " ms")):
        r, s = med(pairs, key, 0), med(pairs, key, 1)
        scale, diff = (1, f"{100 * (s - r):+.1f} points") if key == "au" else (
            1e3, f"{100 * (s / r - 1):+.1f} %")  # fmt: skip
        print(
            f"  {key:6s} real {r * scale:.3f}{unit}  replay {s * scale:.3f}{unit}  "
            f"replay - real {diff}"
        )


if __name__ == "__main__":
    main()
