"""A profile's replay against the real run it was profiled from, side by side.

Generates photo-like JPEGs (an ImageFolder) in a temporary directory, profiles it
(``iobench profile``), then runs, interleaved PAIRS times, the real pipeline
(``iobench loader DIR --existing --profile P``) and the replay (``iobench loader TARGET
--profile P``), and prints each AU, the medians, their ranges and the replay's difference
(docs/validation/replay.md). Needs Pillow.

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


def iobench(*args: str) -> dict:
    cmd = [sys.executable, "-m", "iobench", *args, "--no-history", "--json", "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {out.returncode}: {out.stderr.strip()}")
    return json.loads(out.stdout)["loader"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--buffered", action="store_true", help="the replay reads buffered")
    ap.add_argument("--set", action="append", dest="sets", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="iobench-replay-") as tmp:
        data, target, prof = (os.path.join(tmp, n) for n in ("imgs", "target", "p.toml"))
        os.mkdir(target)
        make_jpegs(data, a.files)
        sets = [x for s in (a.sets or LOOP) for x in ("--set", s)]
        subprocess.run(
            [sys.executable, "-m", "iobench", "profile", data, "--output", prof, *sets],
            check=True,
        )
        real, rep = [], []
        for k in range(a.pairs):
            r = iobench("loader", data, "--existing", "--profile", prof,
                        "--output", os.path.join(tmp, f"real{k}"))  # fmt: skip
            extra = ["--buffered"] if a.buffered else []
            s = iobench("loader", target, "--profile", prof, *extra,
                        "--output", os.path.join(tmp, f"rep{k}"))  # fmt: skip
            t = r["existing"]["terms"]
            real.append(r["au"])
            rep.append(s["au"])
            print(
                f"pair {k + 1}: real AU {r['au']:.3f} (decode CPU "
                f"{t['decode_s_per_sample'] * 1e3:.2f} ms/sample)  replay AU {s['au']:.3f} "
                f"(decode CPU {s['decode']['cpu_s_per_sample'] * 1e3:.2f} ms/sample)"
            )
    mr, ms = statistics.median(real), statistics.median(rep)
    print(
        f"real   AU median {mr:.3f} range {min(real):.3f}-{max(real):.3f}\n"
        f"replay AU median {ms:.3f} range {min(rep):.3f}-{max(rep):.3f}\n"
        f"replay - real: {100 * (ms - mr):+.1f} points (medians of {a.pairs} pairs)"
    )


if __name__ == "__main__":
    main()
