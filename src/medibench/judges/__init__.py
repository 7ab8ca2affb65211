"""VLM judges: reproducible, cached, never inventing a score.

* :func:`judge_run` judges a run's predictions with one or more judge protocols and fills the
  judged metrics of its score rows (``ea``, ``vq``, ``rubric``, the MedGEN dimensions).
* :class:`JudgeConfig` / :func:`load_judge_config`: model, endpoint, decoding, retries, prices.
* :class:`JudgeClient`: one OpenAI-compatible chat call with jittered exponential retries.
* :class:`CachePolicy`, :class:`JudgementStore`, :func:`cache_key`: the judge cache in the run.
* :func:`parse_answer`: the score parser: many answer shapes, all or nothing, real score
  statements only (format quotes and refusals never score).
* ``JUDGES`` / :func:`load_judge`: the judge protocols (``medebench-judge@paper-structure``,
  ``miedb-rubric@1``, ``medgen-checklist@1``, ...).
* :mod:`medibench.judges.agreement`: judge-judge and judge-human agreement, per sample;
  :mod:`medibench.judges.correlate`: agreement of evaluators and benchmarks across models.
"""

from medibench.calls import MissingAPIKeyError
from medibench.judges._client import Completion, JudgeClient, JudgeSetupError
from medibench.judges._config import (
    JudgeConfig,
    JudgeConfigError,
    MissingApiKeyError,
    load_judge_config,
)
from medibench.judges._images import ImageTooLargeError, collage, png_data_url
from medibench.judges._judging import JudgeReport, judge_run, judge_run_async
from medibench.judges._parsing import ParsedAnswer, ScoreField, parse_answer
from medibench.judges._prompts import PromptFile, load_prompt
from medibench.judges._protocols import (
    DEFAULT_JUDGE,
    JUDGES,
    Fill,
    JudgeProtocol,
    load_judge,
    prompt_files,
)
from medibench.judges._records import (
    FAILED,
    CachePolicy,
    Judgement,
    JudgementStore,
    cache_key,
)

__all__ = [
    "DEFAULT_JUDGE",
    "FAILED",
    "JUDGES",
    "CachePolicy",
    "Completion",
    "Fill",
    "ImageTooLargeError",
    "Judgement",
    "JudgementStore",
    "JudgeClient",
    "JudgeConfig",
    "JudgeConfigError",
    "JudgeProtocol",
    "JudgeReport",
    "JudgeSetupError",
    "MissingAPIKeyError",
    "MissingApiKeyError",
    "ParsedAnswer",
    "PromptFile",
    "ScoreField",
    "cache_key",
    "collage",
    "judge_run",
    "judge_run_async",
    "load_judge",
    "load_judge_config",
    "load_prompt",
    "parse_answer",
    "png_data_url",
    "prompt_files",
]
