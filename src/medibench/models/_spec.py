"""Model specs: how a user names a model on the command line or in a config file.

Three forms, tried in this order:

- a YAML (or JSON) file, ``configs/ip2p.yaml``::

      model: ip2p                 # a registry name, or module:callable
      path: /weights/instruct-pix2pix
      name: ip2p-512              # the name recorded in the run (optional)
      options: {steps: 50, image_guidance_scale: 1.5}

- ``NAME:ARG``, a registry name and its main argument: a weights path for local models
  (``ip2p:/weights/ip2p``, ``diffusers:/weights/omnigen2``), the provider's model id for API
  models (``openai-image:gpt-image-1``), the endpoint for ``http:URL``;
- ``NAME`` alone, or ``module:callable`` for a user's own factory (any ``NAME:ARG`` whose
  ``NAME`` is not registered);
- ``VLM + EDITOR``, a compositional system (:mod:`medibench.models.compose`).

Options (``--model-option key=value`` or the YAML ``options``) become keyword arguments of the
model's factory; an option the factory does not take is an error that lists the ones it does
(:func:`model_options` lists them for ``medibench models``).
"""

from __future__ import annotations

import inspect
import json
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medibench.registry import import_object

__all__ = [
    "ModelOption",
    "ModelOptionError",
    "ModelSpec",
    "model_options",
    "parse_model_spec",
    "parse_option",
]

_SPEC_SUFFIXES = (".yaml", ".yml", ".json")
_SPEC_KEYS = {"model", "path", "name", "options"}


class ModelOptionError(ValueError):
    """An option a model does not take, or a malformed option or spec file."""


@dataclass(frozen=True)
class ModelOption:
    """One keyword option of a model factory, for listings."""

    name: str
    default: Any = inspect.Parameter.empty
    annotation: str = ""

    def __str__(self) -> str:
        if self.default is inspect.Parameter.empty:
            return f"{self.name} (required)"
        return f"{self.name}={self.default!r}"


@dataclass(frozen=True)
class ModelSpec:
    """A model to build: a registry name or ``module:callable``, plus keyword options.

    Specs are plain data (picklable): Ray workers receive the spec and build the model themselves.
    """

    model: str
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_registered(self) -> bool:
        from medibench.models import MODELS

        return self.model in MODELS

    @property
    def name(self) -> str:
        """The name the model will record: the ``name`` option, else the registry name.

        For ``module:callable`` factories the name is only known once the model is built.
        """
        return str(self.options.get("name") or self.model)

    def factory(self) -> Callable[..., Any]:
        """The callable that builds the model (imported now)."""
        if self.is_registered:
            from medibench.models import MODELS

            return MODELS.get(self.model)
        if ":" not in self.model:
            from medibench.models import MODELS

            return MODELS.get(self.model)  # raises UnknownNameError with close matches
        return import_object(self.model)

    def check_options(self) -> None:
        """Raise :class:`ModelOptionError` for options the factory does not take."""
        factory = self.factory()
        accepted = _accepted(factory)
        if accepted is None:  # the factory takes **kwargs: anything goes
            return
        unknown = sorted(set(self.options) - set(accepted))
        if unknown:
            valid = ", ".join(str(o) for o in model_options(factory)) or "(none)"
            raise ModelOptionError(
                f"model '{self.model}' has no option {', '.join(map(repr, unknown))}. "
                f"Valid options: {valid}"
            )

    def load(self):
        """Build the model (checking the options first)."""
        from medibench.models._base import EditModel, is_answering_model

        self.check_options()
        model = self.factory()(**dict(self.options))
        if not isinstance(model, EditModel) and not is_answering_model(model):
            raise TypeError(
                f"model factory '{self.model}' returned {type(model).__name__}, not an EditModel"
            )
        return model

    def to_dict(self) -> dict[str, Any]:
        """The spec as recorded in the run config."""
        return {"model": self.model, "options": dict(self.options)}


#: Option names the registered models no longer take, still read: old -> (new, value map).
RENAMED_OPTIONS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "timeout_s": ("timeout", lambda v: v),  # openai-chat, named as the image APIs
    "retries": ("max_attempts", lambda v: int(v) + 1),  # image APIs, named as openai-chat
}


def migrate_options(model: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` of the registered ``model`` with its old option names (:data:`RENAMED_OPTIONS`)
    renamed, each with a ``FutureWarning``; other models' options are left as they are."""
    out = dict(options)
    for old, (new, convert) in RENAMED_OPTIONS.items():
        if old in out and new not in out and _renamed_in(model, old, new):
            out[new] = convert(out.pop(old))
            warnings.warn(
                f"model option {old!r} of '{model}' is now {new!r}: read as {new}={out[new]!r}",
                FutureWarning,
                stacklevel=2,
            )
    return out


def _renamed_in(model: str, old: str, new: str) -> bool:
    from medibench.models import MODELS

    if model not in MODELS:
        return False
    try:
        accepted = _accepted(MODELS.get(model))
    except Exception:  # a plug-in that cannot be imported: its own options stand
        return False
    return accepted is not None and new in accepted and old not in accepted


def parse_model_spec(text: str, options: Iterable[str] | Mapping[str, Any] = ()) -> ModelSpec:
    """Parse a model spec (see the module docstring) with extra ``key=value`` options.

    Options given here override those of a spec file. Raises :class:`ModelOptionError` for a
    malformed option or file, and ``FileNotFoundError`` for a spec file that does not exist.
    """
    extra = dict(options) if isinstance(options, Mapping) else dict(map(parse_option, options))
    if text.endswith(_SPEC_SUFFIXES):
        model, opts = _read_spec_file(Path(text))
        return ModelSpec(model, migrate_options(model, {**opts, **extra}))
    from medibench.models import MODELS

    if "+" in text:  # "VLM + EDITOR": a compositional system (medibench.models.compose)
        return ModelSpec("compose", {"system": text, **extra})
    head, sep, arg = text.partition(":")
    if sep and head in MODELS:
        key = _main_argument(MODELS.get(head))
        if key is None:
            raise ModelOptionError(f"model '{head}' takes no '{head}:ARG' argument; use '{head}'")
        return ModelSpec(head, migrate_options(head, {key: arg, **extra}))
    return ModelSpec(text, migrate_options(text, extra))


def parse_option(text: str) -> tuple[str, Any]:
    """``"key=value"`` -> ``(key, value)``; the value is read as YAML (``3``, ``1.5``, ``true``,
    ``null``, ``[1, 2]``), anything else stays a string."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key.isidentifier():
        raise ModelOptionError(f"model option {text!r} must look like key=value")
    return key, _scalar(value.strip())


def model_options(factory) -> list[ModelOption]:
    """The keyword options a model factory (a class or a function) takes, in order."""
    out = []
    for p in _signature(factory).parameters.values():
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self":
            ann = (
                p.annotation
                if isinstance(p.annotation, str)
                else getattr(p.annotation, "__name__", "")
            )
            out.append(ModelOption(p.name, p.default, ann))
    return out


# -- helpers ----------------------------------------------------------------------------------
def _read_spec_file(path: Path) -> tuple[str, dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"model spec file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # yaml.YAMLError, json.JSONDecodeError
        raise ModelOptionError(f"{path}: not valid {path.suffix[1:].upper()} ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("model"), str):
        raise ModelOptionError(f"{path}: expected a mapping with a 'model' key (a model name)")
    unknown = sorted(set(data) - _SPEC_KEYS)
    if unknown:
        raise ModelOptionError(
            f"{path}: unknown key(s) {unknown}; a spec file has {sorted(_SPEC_KEYS)} "
            "(model options go under 'options')"
        )
    opts = data.get("options") or {}
    if not isinstance(opts, dict):
        raise ModelOptionError(f"{path}: 'options' must be a mapping")
    model, sep, arg = data["model"].partition(":")
    from medibench.models import MODELS

    if sep and model in MODELS:  # "ip2p:PATH" inside a file
        key = _main_argument(MODELS.get(model))
        opts = {key: arg, **opts} if key else opts
    else:
        model = data["model"]
    for key in ("path", "name"):
        if data.get(key) is not None:
            value = data[key]
            if (
                key == "path"
                and not Path(str(value)).is_absolute()
                and Path(path.parent, str(value)).exists()
            ):
                value = str(path.parent / str(value))  # relative to the spec file
            opts[_main_argument_for(model, key)] = value
    return model, opts


def _main_argument(factory) -> str | None:
    # Adapters say which option ``NAME:ARG`` fills (path, model id, url); else a "path" option.
    key = getattr(factory, "spec_argument", None)
    if key:
        return key
    accepted = _accepted(factory)
    return "path" if accepted is None or "path" in accepted else None


def _main_argument_for(model: str, key: str) -> str:
    if key != "path":
        return key
    from medibench.models import MODELS

    if model in MODELS:
        return _main_argument(MODELS.get(model)) or key
    return key


def _accepted(factory) -> list[str] | None:
    params = _signature(factory).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _signature(factory) -> inspect.Signature:
    try:
        return inspect.signature(factory)
    except (TypeError, ValueError):  # builtins without a signature take anything
        return inspect.Signature([inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)])


def _scalar(value: str) -> Any:
    if not value:
        return ""
    try:
        import yaml

        parsed = yaml.safe_load(value)
    except Exception:  # not YAML: keep the text
        return value
    if isinstance(parsed, str):  # YAML 1.1 reads "1e-3" as text
        try:
            return float(parsed)
        except ValueError:
            return parsed
    return parsed
