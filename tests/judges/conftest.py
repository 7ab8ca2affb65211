import numpy as np
import pytest

from medibench.io import write_image
from medibench.protocols._base import NOT_JUDGED
from medibench.runs import RunStore
from medibench.samples import Prediction, Sample, Score
from tests.judges._server import FakeJudgeServer


def build_run(
    run_dir,
    tags,
    *,
    models=("m1",),
    size=24,
    benchmark="medebench",
    perspectives=None,
    protocols=(("medebench", "paper"), ("medebench", "1")),
):
    """A tiny run: one sample per tag (its description starts with the tag, so the fake server
    can script the reply per sample), one output per model, score rows with judged metrics None."""
    rng = np.random.default_rng(0)
    data = run_dir / "data"
    samples = []
    for i, tag in enumerate(tags):
        sid = f"s{i:02d}"
        img = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
        target = img.copy()
        target[4:12, 4:12] = 255
        mask = np.zeros((size, size), np.uint8)
        mask[4:12, 4:12] = 255
        write_image(data / f"{sid}.png", img)
        write_image(data / f"{sid}_t.png", target)
        write_image(data / f"{sid}_m.png", mask)
        samples.append(
            Sample(
                sample_id=sid,
                benchmark=benchmark,
                input=str(data / f"{sid}.png"),
                target=str(data / f"{sid}_t.png"),
                mask=str(data / f"{sid}_m.png"),
                instruction=f"{tag}: remove the lesion",
                description=f"{tag}: the lesion is gone",
                perspective=(perspectives[i] if perspectives else "modification"),
                task="lesion removal",
                modality="dermoscopy",
            )
        )
    with RunStore(run_dir) as store:
        store.put_samples(samples)
        for model in models:
            for j, s in enumerate(samples):
                out = rng.integers(0, 255, (size, size, 3), dtype=np.uint8)
                path = write_image(run_dir / "outputs" / model / f"{s.sample_id}_0.png", out)
                store.put_prediction(
                    Prediction(
                        sample_id=s.sample_id,
                        model=model,
                        k=0,
                        seed=j,
                        path=str(path.relative_to(run_dir)),
                    )
                )
                for name, version in protocols:
                    judged = {
                        "medebench": ("ea", "vq"),
                        "miedb": ("rubric",),
                        "medgen": (
                            "anatomical_accuracy",
                            "clinical_finding_accuracy",
                            "instruction_compliance",
                            "cross_modal_consistency",
                            "hallucination_control",
                            "overall",
                        ),
                    }[name]
                    store.put_score(
                        Score(
                            sample_id=s.sample_id,
                            model=model,
                            k=0,
                            protocol=name,
                            protocol_version=version,
                            metrics={"cp": 0.9, **{m: None for m in judged}},
                            error="; ".join(f"{m}: {NOT_JUDGED}" for m in judged),
                        )
                    )
    return run_dir


@pytest.fixture
def server():
    with FakeJudgeServer() as s:
        yield s


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-0123456789")
    return "sk-test-secret-0123456789"
