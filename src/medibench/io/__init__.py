"""Reading medical images into arrays, atomic writes and content hashes."""

from medibench.io._write import (
    atomic_write_bytes,
    atomic_write_text,
    sha256_bytes,
    sha256_file,
    write_image,
)

__all__ = [
    "atomic_write_bytes",
    "atomic_write_text",
    "sha256_bytes",
    "sha256_file",
    "write_image",
]
