"""Shared test settings: one thread everywhere, no network."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import cv2  # noqa: E402

cv2.setNumThreads(1)
