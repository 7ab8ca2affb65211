"""Where a benchmark's files come from, before an adapter parses them (docs/sources.md).

``resolve_source`` turns a dataset spec's path into a folder (or a Parquet file): a folder as
is, a ``.tar``/``.tar.gz``/``.tgz``/``.zip`` archive extracted once, safely, into a cache folder
next to it. ``parquet_files``, ``iter_parquet_rows`` and ``check_columns`` read Parquet shards
row group by row group; ``decode_image_cell`` decodes an image cell in the Hugging Face
``datasets`` encodings through the same decoders as files (:mod:`medibench.io`), and
``store_image_cell`` writes its bytes, unchanged, to a content-addressed file for samples that
point at files. Every failure is a :class:`SourceError` (a ``DatasetError``) naming the file; an
image cell that does not decode is an :class:`ImageCellError` (an ``ImageReadError``) naming the
file, row and column, that sample's problem only. ``download_source`` fetches a benchmark's
:class:`HubSource` at its pinned revision and records the files' sha256 in
``medibench-source.json``; ``verify_source`` re-checks them (``load_dataset`` does, for any
folder that has one). ``resolve_hf_path`` turns ``hf:OWNER/NAME[@REVISION]`` into its snapshot
in the local Hugging Face cache, offline first (``download=True`` fetches a missing one).
"""

from medibench.sources._archive import ARCHIVE_SUFFIXES, CACHE_SUFFIX, is_archive, resolve_source
from medibench.sources._cells import (
    ImageCellError,
    decode_image_cell,
    image_cell_bytes,
    image_format,
    map_rows_in_threads,
    store_image_cell,
    store_image_ref,
)
from medibench.sources._errors import SourceError
from medibench.sources._hf import HfSpec, is_hf_path, parse_hf_path, resolve_hf_path
from medibench.sources._hub import (
    SOURCE_MANIFEST,
    HubDownloadError,
    HubSource,
    SourceManifest,
    SourceMismatchError,
    download_source,
    verify_source,
)
from medibench.sources._index import cached_read
from medibench.sources._parquet import (
    ParquetRow,
    check_columns,
    iter_parquet_rows,
    parquet_files,
)

__all__ = [
    "ARCHIVE_SUFFIXES",
    "CACHE_SUFFIX",
    "SOURCE_MANIFEST",
    "HfSpec",
    "HubDownloadError",
    "HubSource",
    "ImageCellError",
    "ParquetRow",
    "SourceError",
    "SourceManifest",
    "SourceMismatchError",
    "cached_read",
    "check_columns",
    "decode_image_cell",
    "download_source",
    "image_cell_bytes",
    "image_format",
    "is_archive",
    "is_hf_path",
    "iter_parquet_rows",
    "map_rows_in_threads",
    "parquet_files",
    "parse_hf_path",
    "resolve_hf_path",
    "resolve_source",
    "store_image_cell",
    "store_image_ref",
    "verify_source",
]
