"""Tiny copies of MedGEN-Bench's VQA and generation records in the three layouts (the prepared
folder, the Table IV view with a contact sheet, the Parquet release), and a scripted
OpenAI-compatible server on 127.0.0.1 that plays a VLM, an image editor and a judge."""

from __future__ import annotations

import base64
import io
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
from PIL import Image

CHOICES = ["A. Normal chest", "B. Pneumonia", "C. Pleural effusion"]
REPORT = {"FINDINGS": "Small left pleural effusion.", "IMPRESSION": "Effusion.", "NOTE": "x"}


def code_scores(store) -> list:
    """A run's ``medgen@code`` score rows (runs score ``medgen@1`` beside it)."""
    return [s for s in store.scores("medgen") if s.protocol_version == "code"]


def pixels(seed: int, shape=(24, 28, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def png_bytes(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


def _save(path: Path, array: np.ndarray) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png_bytes(array))
    return path.name


def records() -> dict[str, list[dict[str, object]]]:
    """The records of each file (image paths relative to the folder)."""
    vqa: list[dict[str, object]] = [
        {
            "sample_id": "medgen:VQA:multiple-choice:1",
            "category": "VQA",
            "paper_task": "multiple-choice",
            "instruction": "What does the chest X-ray show?",
            "input_image": "images/q1.png",
            "answer": "B. Pneumonia",
            "choice": CHOICES,
            "modality": "X-ray",
        },
        {
            "sample_id": "medgen:VQA:report-generation:2",
            "category": "VQA",
            "paper_task": "report-generation",
            "paper_subtask": "chest",
            "instruction": "Write the radiology report.",
            "input_images": ["images/q2a.png", "images/q2b.png", "images/q2c.png"],
            "answer": REPORT,
            "modality": "X-ray",
        },
        {
            "sample_id": "medgen:VQA:question-answering:3",
            "category": "VQA",
            "paper_task": "question-answering",
            "instruction": "Which organ is shown?",
            "input_image": "images/q3.png",
            "modality": "CT",
        },
    ]
    gen: list[dict[str, object]] = [
        {
            "sample_id": "medgen:MultimodalGeneration:disease-prediction:1",
            "category": "MMGeneration",
            "paper_task": "disease-prediction",
            "instruction": "Predict the scan in one year and describe it.",
            "input_image": "images/g1.png",
            "ground_truth_image": "images/g1_gt.png",
            "answer": "The lung nodule grows.",
            "modality": "CT",
        }
    ]
    return {"vqa.jsonl": vqa, "gen.jsonl": gen}


def build_folder(root: Path) -> Path:
    """The prepared folder: vqa.jsonl and gen.jsonl with their images."""
    for i, name in enumerate(["q1", "q2a", "q2b", "q2c", "q3", "g1", "g1_gt"]):
        _save(root / "images" / f"{name}.png", pixels(i))
    for file, recs in records().items():
        (root / file).write_text("".join(json.dumps(r) + "\n" for r in recs))
    return root


def build_release(root: Path) -> Path:
    """The Parquet release's vqa and multimodal_generation configs (and one editing row)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def cell(seed):
        return [{"bytes": png_bytes(pixels(seed)), "path": f"img{seed}.png"}]

    vqa = [
        {
            "input_images": cell(0),
            "instruction": "What does the chest X-ray show?",
            "task": "multiple-choice",
            "subtask": None,
            "modality": "X-ray",
            "answer": "B. Pneumonia",
            "choice": CHOICES,
        },
        {
            "input_images": cell(1) + cell(2),
            "instruction": "Write the radiology report.",
            "task": "report-generation",
            "subtask": "chest",
            "modality": "X-ray",
            "answer": json.dumps(REPORT),
            "choice": [],
        },
    ]
    gen = [
        {
            "input_images": cell(5),
            "output_images": cell(6),
            "instruction": "Predict the scan in one year and describe it.",
            "task": "disease-prediction",
            "subtask": None,
            "modality": "CT",
            "answer": "The lung nodule grows.",
        }
    ]
    edit = [
        {
            "input_images": cell(7),
            "output_images": cell(8),
            "instruction": "Remove the noise.",
            "task": "noise-reconstruction",
            "subtask": None,
            "modality": "CT",
        }
    ]
    for config, rows in (("vqa", vqa), ("multimodal_generation", gen), ("image_editing", edit)):
        folder = root / "parquet" / config
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), folder / "train-00000-of-00001.parquet")
    return root


# -- the scripted server ----------------------------------------------------------------------
#: The editor's answer: a constant image, so its scores are known.
EDITED = np.full((24, 28, 3), 90, np.uint8)
JUDGE_LINE = re.compile(r"^- ([A-Z][A-Za-z\- ]+):", re.M)


def judge_reply(text: str, overall: int) -> str:
    """Every dimension the prompt lists scored 7, overall ``overall``."""
    scale = 5 if "to 5 (excellent)" in text else 10
    names = [n for n in JUDGE_LINE.findall(text.split("Score the model")[-1])]
    return "\n".join(
        f"{n}: [{overall if n == 'Overall' else min(7, scale)}]/{scale}" for n in names
    )


class FakeOpenAI:
    """``/v1/chat/completions`` and ``/v1/images/edits`` on 127.0.0.1.

    ``vlm(prompt_text, n_images) -> text`` answers VLM calls, ``judge(prompt_text, images) ->
    text`` answers judge calls (a prompt naming the judge's dimensions). Requests are kept.
    """

    def __init__(self, vlm, judge=None) -> None:
        self.vlm = vlm
        self.judge = judge or (lambda text, images: judge_reply(text, 8))
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                data = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/images/edits":
                    prompt = re.search(rb'name="prompt"\r\n\r\n(.*?)\r\n', data, re.S)
                    said = prompt.group(1).decode() if prompt else None
                    fake.requests.append({"path": self.path, "prompt": said})
                    b64 = base64.b64encode(png_bytes(EDITED)).decode()
                    return self._send({"created": 1, "data": [{"b64_json": b64}]})
                body = json.loads(data)
                parts = body["messages"][-1]["content"]
                text = "\n".join(p["text"] for p in parts if p["type"] == "text")
                images = [p["image_url"]["url"] for p in parts if p["type"] == "image_url"]
                fake.requests.append({"path": self.path, "text": text, "images": len(images)})
                if "Score the model's answer" in text:
                    content = fake.judge(text, images)
                else:
                    content = fake.vlm(text, len(images))
                self._send(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                    }
                )

            def _send(self, obj) -> None:
                out = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
