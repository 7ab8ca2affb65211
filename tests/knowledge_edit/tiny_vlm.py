"""The tiny LLaVA's builders, now :mod:`medibench.knowledge_edit.tiny_llava` (run it with
``python -m medibench.knowledge_edit.tiny_llava``): re-exported for bench/edit_table.py."""

from medibench.knowledge_edit.tiny_llava import (  # noqa: F401
    build_tiny_llava,
    taught_items,
    teach,
    vocabulary,
)
