"""The review rules: what may be remembered as stated, what needs the person's review, what never."""

from __future__ import annotations

from typing import Protocol

from .errors import DomainError

NORMAL_CONTENT = "normal"
SENSITIVE_CONTENT = "sensitive"
SECRET_CONTENT = "secret"


class SecretRefused(DomainError):
    code, status, title = "secret_refused", 422, "Secrets are never stored"


class ContentPolicy(Protocol):
    def classify(self, text: str) -> str:
        """One of NORMAL_CONTENT, SENSITIVE_CONTENT, SECRET_CONTENT."""
        ...

    def is_secret(self, text: str) -> bool:
        """`classify(text) == SECRET_CONTENT`, without deciding whether it is sensitive (which may cost an
        embedding): for the paths that only refuse secrets, such as a receipt's intake."""
        ...


def refuse_secrets(policy: ContentPolicy, *texts: str | None) -> str:
    """Raise for any secret; otherwise the strictest class among the texts."""
    verdict = NORMAL_CONTENT
    for text in texts:
        if text is None:
            continue
        kind = policy.classify(text)
        if kind == SECRET_CONTENT:
            raise SecretRefused("the text looks like a secret (password, key or token); it was not stored")
        if kind == SENSITIVE_CONTENT:
            verdict = SENSITIVE_CONTENT
    return verdict
