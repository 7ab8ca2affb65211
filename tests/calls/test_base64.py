"""b64_text: the standard library's base64 text, byte for byte, and without holding the GIL."""

from __future__ import annotations

import base64
import os
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from medibench.calls import b64_text
from medibench.judges._images import file_data_url
from medibench.models._http import to_base64


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_it_is_the_standard_librarys_base64_for_any_bytes(data):
    assert b64_text(data) == base64.b64encode(data).decode("ascii")


def test_every_length_mod_3_and_a_large_buffer_match():
    for n in (0, 1, 2, 3, 4, 5, 197_280, 197_281, 197_282):
        data = os.urandom(n)
        assert b64_text(data) == base64.b64encode(data).decode("ascii")
        assert to_base64(data) == b64_text(data)


def test_a_png_sent_byte_for_byte_is_its_files_base64(tmp_path):
    import cv2
    import numpy as np

    path = tmp_path / "x.png"
    rgb = np.random.default_rng(0).integers(0, 256, (32, 48, 3), dtype=np.uint8)
    cv2.imwrite(str(path), rgb)
    url, note = file_data_url(path, max_side=64)
    assert note is None
    assert url == "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def test_other_threads_run_while_it_encodes():
    """The point of it: a body made on a thread does not stop the event loop's thread. A
    spinning thread keeps 0.5-0.6 of its free rate while 64 MB are encoded (the ASCII decode
    of the result holds the GIL); under the standard library's b2a_base64, which holds the GIL
    throughout, it kept 0.05."""
    import time

    data = os.urandom(64 << 20)
    ticks, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        time.sleep(0.05)
        before, t0 = ticks[0], time.perf_counter()
        time.sleep(0.2)
        free = (ticks[0] - before) / (time.perf_counter() - t0)
        before, t0 = ticks[0], time.perf_counter()
        for _ in range(3):
            b64_text(data)
        during = (ticks[0] - before) / (time.perf_counter() - t0)
    finally:
        stop.set()
        spinner.join()
    assert during / free > 0.25
