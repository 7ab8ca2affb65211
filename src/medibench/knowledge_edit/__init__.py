"""M3Bench-style model editing of medical VLMs (docs/knowledge_edit.md).

* Tasks: :func:`read_slake`, :func:`read_vqarad` (official layouts and Parquet copies),
  :func:`build_requests` (edit requests with T0-T4 probes), :func:`synthetic_taskset` (offline,
  exact answers, T0-T5), :func:`write_taskset` / :func:`read_taskset` (the sequential order).
* Answerers: ``answer(image, question) -> text``: :class:`TransformersAnswerer`,
  :class:`CallableAnswerer`, :class:`OpenAIAnswerer`, :func:`load_answerer`.
* Editors: ``edit(model, request) -> handle``, ``handle.undo()``: :class:`FineTuneEditor`,
  :class:`LoraEditor`, :class:`GracePaperEditor` (``grace@paper``),
  :class:`GraceTokensEditor` (``grace-tokens``; ``GraceEditor`` and ``GraceConfig`` are its old
  names), :class:`MendEditor` (``mend:DIR``; :func:`train_mend` trains its hypernetwork with a
  :class:`MendTrainConfig`, :func:`read_mend_config` reads one), :class:`BalancEditEditor`
  (``balancedit``), :class:`WiseEditor` (``wise``), :class:`InContextEditor`, ``EasyEditEditor``;
  :func:`load_editor` (over the versioned hyper-parameter files of :data:`EDITOR_CONFIGS`). A
  memory editor's ``memory(model)`` gives its router in an edited model (:class:`EditMemory`:
  ``query``, ``route_distance``, ``fires``).
* Memory editors, as ``medibench edit analyze`` reads them: :class:`MemoryEditor` (an editor
  with ``memory_site`` and ``fires``: ``grace@paper``), :class:`MemoryLookup`; an editor whose
  ``memory(model)`` gives an :class:`EditMemory` (``balancedit``, ``wise``) is read through it.
* Experiment and scores: :func:`run_edits`; the results JSONL (:func:`read_results`,
  :func:`write_results`); :func:`summarize` (reliability, generality, locality per edit, macro
  with bootstrap CIs, micro, per task type and stage); matchers :func:`exact_match`,
  :func:`fuzzy_match`, teacher-forced token accuracy and an LLM judge.
"""

from medibench.knowledge_edit._answerers import (
    Answerer,
    AnswererError,
    CallableAnswerer,
    OpenAIAnswerer,
    TransformersAnswerer,
    load_answerer,
)
from medibench.knowledge_edit._balancedit import BalancEditConfig, BalancEditEditor
from medibench.knowledge_edit._build import VQARow, build_requests, order_requests
from medibench.knowledge_edit._editing import EditMemory
from medibench.knowledge_edit._editors import (
    EDITOR_ALIASES,
    EDITOR_CONFIGS,
    EDITORS,
    EasyEditEditor,
    EditCase,
    EditError,
    EditHandle,
    Editor,
    FineTuneConfig,
    FineTuneEditor,
    InContextEditor,
    LoraConfig,
    LoraEditor,
    TrainConfig,
    editor_config,
    load_editor,
)
from medibench.knowledge_edit._experiment import (
    EditRecord,
    EditRunReport,
    Matcher,
    make_matchers,
    run_edits,
)
from medibench.knowledge_edit._grace import GraceTokensConfig, GraceTokensEditor
from medibench.knowledge_edit._grace_paper import GracePaperConfig, GracePaperEditor
from medibench.knowledge_edit._matching import (
    MATCHERS,
    Match,
    exact_match,
    fuzzy_match,
    normalise_answer,
)
from medibench.knowledge_edit._memory import MemoryEditor, MemoryLookup
from medibench.knowledge_edit._mend import MendEditor
from medibench.knowledge_edit._mend_train import MendTrainConfig, read_mend_config, train_mend
from medibench.knowledge_edit._metrics import METRICS, EditValue, edit_values, summarize
from medibench.knowledge_edit._readers import read_slake, read_vqarad
from medibench.knowledge_edit._results import (
    STAGES,
    ResultLine,
    ResultsFormatError,
    read_results,
    write_results,
)
from medibench.knowledge_edit._synthetic import synthetic_taskset
from medibench.knowledge_edit._tasks import (
    KINDS,
    TASK_TYPES,
    EditRequest,
    Probe,
    TaskError,
    TaskSet,
    new_taskset_folder,
    read_taskset,
    write_taskset,
)
from medibench.knowledge_edit._wise import WiseConfig, WiseEditor

#: the old names of ``grace-tokens``'s editor and config (it was ``grace`` before ``grace@paper``)
GraceEditor, GraceConfig = GraceTokensEditor, GraceTokensConfig

__all__ = [
    "EDITORS",
    "EDITOR_ALIASES",
    "EDITOR_CONFIGS",
    "KINDS",
    "MATCHERS",
    "METRICS",
    "STAGES",
    "TASK_TYPES",
    "Answerer",
    "AnswererError",
    "BalancEditConfig",
    "BalancEditEditor",
    "CallableAnswerer",
    "EasyEditEditor",
    "EditCase",
    "EditError",
    "EditHandle",
    "EditMemory",
    "EditRecord",
    "EditRequest",
    "EditRunReport",
    "EditValue",
    "Editor",
    "FineTuneConfig",
    "FineTuneEditor",
    "GraceConfig",
    "GraceEditor",
    "GracePaperConfig",
    "GracePaperEditor",
    "GraceTokensConfig",
    "GraceTokensEditor",
    "InContextEditor",
    "LoraConfig",
    "LoraEditor",
    "Match",
    "Matcher",
    "MendEditor",
    "MendTrainConfig",
    "MemoryEditor",
    "MemoryLookup",
    "OpenAIAnswerer",
    "Probe",
    "ResultLine",
    "ResultsFormatError",
    "TaskError",
    "TaskSet",
    "TrainConfig",
    "TransformersAnswerer",
    "VQARow",
    "WiseConfig",
    "WiseEditor",
    "build_requests",
    "edit_values",
    "editor_config",
    "exact_match",
    "fuzzy_match",
    "load_answerer",
    "load_editor",
    "make_matchers",
    "new_taskset_folder",
    "normalise_answer",
    "order_requests",
    "read_mend_config",
    "read_results",
    "read_slake",
    "read_taskset",
    "read_vqarad",
    "run_edits",
    "summarize",
    "synthetic_taskset",
    "train_mend",
    "write_results",
    "write_taskset",
]
