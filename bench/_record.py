"""A bench script's measurement, recorded with the machine that made it.

``record("calibration", {"all_metrics_s": 0.52})`` appends one run to
``bench/results/calibration.json``: the figures, the time, the CPU model, the core count, Python,
and the load average before and after (a figure measured under load says so). The docs quote
these runs, and ``python docs/numbers.py --check`` compares the docs' text with them, so a
timing in the docs is never a number without a measurement and a machine behind it.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, object]:
    """The CPU model (``/proc/cpuinfo``'s ``model name``), cores, AVX-512, Python, OS."""
    model, flags = platform.processor() or "unknown", ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model in ("unknown", "x86_64", ""):
                model = value.strip()
            if key.strip() == "flags" and not flags:
                flags = value
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "avx512": "avx512f" in flags.split(),
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.machine()}",
    }


def record(
    script: str,
    figures: dict[str, float],
    *,
    load_before: float | None = None,
    settings: dict[str, object] | None = None,
) -> Path:
    """Append a run of ``script`` (its figures, settings, machine and load) to its results file.

    Returns:
        The results file, ``bench/results/<script>.json`` (``{"script": ..., "runs": [...]}``).
    """
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{script}.json"
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"runs": []}
    data["script"] = f"bench/{script}.py"
    after = os.getloadavg()[0]
    data["runs"].append(
        {
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": machine(),
            "load_average": [
                round(load_before if load_before is not None else after, 2),
                round(after, 2),
            ],
            "settings": settings or {},
            "figures": {k: float(v) for k, v in figures.items()},
        }
    )
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
