"""The LLM judge matcher against a local fake OpenAI-compatible server: strict verdicts,
cached answers (never asked twice), failures counted as missing."""

from __future__ import annotations

import numpy as np
import pytest

from medibench.judges import JudgeConfig
from medibench.knowledge_edit import Probe
from medibench.knowledge_edit._judge import JudgeMatcher, parse_verdict
from tests.judges._server import FakeJudgeServer, Reply, first_text


def _probe(q, gold):
    return Probe("p-" + q, "reliability", "T0", "img", q, gold)


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ('{"correct": true}', True),
        ('```json\n{"correct": false}\n```', False),
        ("Correct.", True),
        ("incorrect", False),
        ('{"correct": "yes"}', None),
        ("The answer is correct because ...", None),
        ('{"correct": true, "why": "x"}', None),
        (None, None),
    ],
)
def test_parse_verdict_is_strict(text, verdict):
    assert parse_verdict(text) is verdict


def test_judge_matcher_caches_in_the_run_store(tmp_path, monkeypatch):
    from medibench.runs import RunStore

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789")

    def responder(body, n):
        text = first_text(body)
        if "Model answer: lung" in text:
            return Reply(content='{"correct": true}')
        if "Model answer: ???" in text:
            return Reply(content="I cannot tell.")
        return Reply(content='{"correct": false}')

    image = np.zeros((4, 4, 3), np.uint8)
    items = [
        (_probe("Which organ?", "Lung"), "lung", image),
        (_probe("Which organ?", "Lung"), "liver", image),
        (_probe("Which side?", "left"), "???", image),
    ]
    with FakeJudgeServer(responder) as server:
        config = JudgeConfig(model="judge-x", base_url=server.base_url, max_attempts=1)
        with RunStore(tmp_path / "run") as store:
            m = JudgeMatcher(config, store)
            got = m.match_batch(items)
            assert [g.correct for g in got] == [True, False, None]
            assert [g.score for g in got] == [1.0, 0.0, None]
            assert server.count == 3
            again = JudgeMatcher(config, store).match_batch(items[:2])
            assert [g.correct for g in again] == [True, False]
            assert server.count == 3  # cached: never asked twice
            _, rows = store.table_rows("edit_judgements")
            assert sorted(r[3] for r in rows) == ["ok", "ok", "unparsable"]
