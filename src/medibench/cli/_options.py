"""Typer option types that mean the same in several commands: one declaration, one help text.

A command writes ``progress: ProgressOption = True`` instead of repeating the ``Annotated``
declaration; options that only look alike but mean something else per command (``--seed`` of a
bootstrap or a shuffle, ``--workers``) stay declared where they are used. ``prompt_tuning``'s
commands declare their own (``prompt_tuning`` does not import ``cli``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = [
    "ByBinsOption",
    "CsvOption",
    "DatasetOption",
    "DatasetOptionsOption",
    "JsonOption",
    "DownloadOption",
    "ExecutorOption",
    "ModelOptionsOption",
    "OutputsPerSampleOption",
    "PredictionsOption",
    "ProgressOption",
    "ProtocolsOption",
    "RayAddressOption",
    "RunSeedOption",
    "SampleLimitOption",
    "bin_specs",
]

#: ``--dataset``: the dataset a command reads (:func:`medibench.datasets.load_dataset`'s spec).
DatasetOption = Annotated[
    str,
    typer.Option(
        help="dataset spec: KIND:ARG (native:DIR, medebench:DIR, miedb:DIR, starter, ...), "
        "hf:OWNER/NAME, or a folder"
    ),
]

#: ``--predictions``: the model outputs a command reads (``Dataset.find_predictions``).
PredictionsOption = Annotated[
    Path,
    typer.Option(
        help="folder with one sub-folder per model (generated_images/, eval_results/, "
        "model_outputs/), or one model's <sample_id>_<k>.png files"
    ),
]

#: ``--download``: fetch an ``hf:OWNER/NAME`` dataset that is not in the local Hugging Face cache.
DownloadOption = Annotated[
    bool,
    typer.Option(
        help="fetch an hf:OWNER/NAME[@REVISION] dataset that is not in the local Hugging Face "
        "cache (offline first otherwise)"
    ),
]

#: ``--dataset-option key=value``: a keyword for the dataset's loader (values read as YAML).
DatasetOptionsOption = Annotated[
    list[str] | None,
    typer.Option(
        help="dataset loader option key=value (repeatable), e.g. formats=all for medgen (its "
        "VQA and generation records too), config=TinyGrafixBench for paintbench"
    ),
]


def dataset_options(texts: list[str] | None) -> dict:
    """``--dataset-option`` values as loader keywords; a malformed one is a ``ValueError``."""
    from medibench.models._spec import parse_option

    out = {}
    for text in texts or ():
        try:
            key, value = parse_option(text)
        except ValueError as exc:
            raise ValueError(str(exc).replace("model option", "dataset option")) from None
        out[key] = value
    return out


#: ``--csv FILE``: a summary command's printed rows, also as CSV (one row per table row).
CsvOption = Annotated[Path | None, typer.Option("--csv", help="also write the summary rows as CSV")]

#: ``--json FILE``: a summary command's printed rows, also as a JSON list of objects.
JsonOption = Annotated[
    Path | None, typer.Option("--json", help="also write the summary rows as JSON")
]

#: ``--progress / --no-progress``: progress bars on stderr.
ProgressOption = Annotated[bool, typer.Option(help="show progress bars")]

#: ``--protocol``: the scoring protocols (none given: the dataset's default protocols).
ProtocolsOption = Annotated[
    list[str] | None,
    typer.Option(help="protocol name@version (repeatable; default: the dataset's)"),
]

#: ``--model-option key=value``: a setting given to every model (values read as YAML).
ModelOptionsOption = Annotated[
    list[str] | None,
    typer.Option(help="model option key=value (repeatable; given to each --model)"),
]

#: ``--k``: outputs per sample of a run, each seeded from (run seed, sample, k) (``run``,
#: ``analyze attention``: the same images).
OutputsPerSampleOption = Annotated[
    int, typer.Option("--k", min=1, help="outputs per sample, each with its own seed")
]

#: ``--seed``: the seed of a run, from which each (sample, k) seed derives
#: (:func:`medibench._identity.seed_for`).
RunSeedOption = Annotated[int, typer.Option(help="run seed (per-item seeds derive from it)")]

#: ``--limit``: a dataset's first N samples only (``score``, ``analyze attention``).
SampleLimitOption = Annotated[
    int | None, typer.Option(min=1, help="only the first N samples of the dataset")
]

#: ``--executor``: where a command's work runs, this process or a Ray cluster (``--ray-address``).
ExecutorOption = Annotated[str, typer.Option(help="local or ray")]

#: ``--ray-address``: the Ray cluster a ``--executor ray`` command joins.
RayAddressOption = Annotated[
    str | None,
    typer.Option(help="Ray cluster to join (ray start --head prints it); default: local"),
]


#: ``--by-bins PROP=EDGES``: the scores broken down by bins of a sample property (``score``,
#: ``report``; :mod:`medibench.report._bins`).
ByBinsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--by-bins",
        metavar="PROP=EDGES",
        help="break the scores down by bins of a sample property (repeatable): "
        "mask_fraction=0,0.01,0.05,0.2,1 (edges increasing; a bin holds its lower edge, the "
        "last bin its upper edge too), "
        "metadata.KEY=EDGES for a numeric metadata field, or a categorical property by name "
        "(PaintBench: background_complexity, color_scheme); per bin the mean with its bootstrap "
        "CI, and Spearman's rho of the metric with the property and its p-value",
    ),
]


def bin_specs(texts: list[str] | None) -> list:
    """``--by-bins`` values as :class:`medibench.report._bins.BinSpec`; a malformed one, or a
    property given twice (its tables would have one name), is a ``ValueError`` naming it."""
    from medibench.report._bins import parse_bins

    specs = [parse_bins(t) for t in texts or ()]
    names = [s.prop for s in specs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"--by-bins: {', '.join(twice)} given more than once; give each once")
    return specs
