"""The judges' names for the call layer's chat client (:mod:`medibench.calls._chat`)."""

from __future__ import annotations

from medibench.calls._chat import ChatClient, ChatSetupError, Completion

__all__ = ["Completion", "JudgeClient", "JudgeSetupError"]

#: The one OpenAI-compatible chat client, under the judges' older name.
JudgeClient = ChatClient
#: The endpoint rejects every call (authentication, permission, unknown model or URL).
JudgeSetupError = ChatSetupError
