"""Review rules for personal text: secrets are refused, sensitive content waits for review.

Secrets: detect-secrets' pattern plugins (cloud keys, tokens, private keys, JWTs, ...) plus our
rules for secrets stated in words, in English and Chinese ("my password is ...", "密码是...").
Its entropy plugins are left out: on prose they flag ordinary words.
Sensitive: adapters/sensitive_rules.py (health, finances, identity documents, people's contact
details), measured on a labelled set by bench/sensitive.py; what they hold, a probe by meaning may let
through (adapters/sensitive_probe.py).
See docs/adr/0005-review-rules.md, docs/adr/0024-sensitive-rules.md and docs/adr/0043-probes-by-meaning-for-review.md.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

from engram.domain.review import NORMAL_CONTENT, SECRET_CONTENT, SENSITIVE_CONTENT

from .sensitive_rules import sensitive_kind

__all__ = ["ContentRules", "sensitive_kind"]

log = logging.getLogger("engram.embeddings")

_PLUGINS = [
    "ArtifactoryDetector", "AWSKeyDetector", "AzureStorageKeyDetector", "BasicAuthDetector",
    "CloudantDetector", "DiscordBotTokenDetector", "GitHubTokenDetector", "GitLabTokenDetector",
    "IbmCloudIamDetector", "IbmCosHmacDetector", "JwtTokenDetector", "KeywordDetector",
    "MailchimpDetector", "NpmDetector", "OpenAIDetector", "PrivateKeyDetector", "PypiTokenDetector",
    "SendGridDetector", "SlackDetector", "SoftlayerDetector", "SquareOAuthDetector", "StripeDetector",
    "TelegramBotTokenDetector", "TwilioKeyDetector",
]

_SECRET_WORDS = [
    # "my password is X", "the wifi passcode: X", "api key = X", "PIN is 1234", and what it is for in up to
    # four words: "the password for the billing portal is X"
    re.compile(
        r"\b(?:password|passwd|passcode|passphrase|pass\s*word|pin(?:\s*code)?|api[\s_-]*key|secret[\s_-]*key|"
        r"access[\s_-]*key|access[\s_-]*token|auth[\s_-]*token|bearer[\s_-]*token|token|private[\s_-]*key|"
        r"security\s+code|cvv|one[\s-]*time\s+code|otp)\b"
        r"(?:\s+(?:for|to|of|on)\s+[\w.@-]+(?:\s+[\w.@-]+){0,3})?\s*(?:is|was|=|:|are)\s*[\"'`]?"
        r"(?!(?:still|not|now|valid|invalid|expired|expiring|missing|wrong|incorrect|required|optional|refreshed|rotated|"
        r"stored|saved|set|sent|generated|created|updated|reset|changed|correct|case|fine|ok|okay|the|a|an|in|on|at|"
        r"for|too|very|being|used|needed|empty|blank|null|none|good|bad|weak|strong|long|short|only|also|never|always|"
        r"usually|just|same|different|hashed|encrypted|checked|verified)\b)"
        r"(?![a-z]+(?:ed|ing|ly)\b)\S{3,}",  # "the token is cached/expiring/usually ...": a word, not a value
        re.IGNORECASE,
    ),
    re.compile(r"(?:密码|口令|密钥|私钥|令牌|验证码|支付码|PIN码?|pin码?)\s*(?:是|为|：|:|=)\s*"
               r"(?!什么|多少|啥|哪|空|无效|错误|错的|对的|过期|必填|加密)\S{2,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\b(?:sk|rk|pk)-(?:proj-|live-|test-)?[A-Za-z0-9_-]{20,}\b"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
]

_configured = threading.Lock()
_ready = False
_plugins: list[Any] = []


def _configure_detect_secrets() -> None:
    """detect-secrets keeps its settings in one process-wide object: they are set once, here, to our
    plugins and no filters. (Setting them around each scan, as `transient_settings` does, cost a few
    milliseconds a message, and a scan in one thread could run with the defaults another thread's
    scan had just put back.) The plugins are made here too, under the lock: made by the first scans of
    several threads at once, their modules' imports deadlocked."""
    global _ready, _plugins
    with _configured:
        if not _ready:
            from detect_secrets.settings import cache_bust, configure_settings_from_baseline, get_plugins

            cache_bust()
            configure_settings_from_baseline(
                {"plugins_used": [{"name": name} for name in _PLUGINS], "filters_used": []})
            _plugins = list(get_plugins())
            _ready = True


def _library_finds_secret(text: str) -> bool:
    """detect-secrets' ad-hoc scan (`scan_line`) without its per-line set-up: it resets the settings'
    filters, rebuilds the code snippet and calls each plugin through its argument injection, a third of
    its cost. With the filters configured above (none that look at a secret or its context) and no
    verification, a plugin's `analyze_line` finding anything is exactly what `scan_line` yields."""
    if not _ready:
        _configure_detect_secrets()
    for line in text.splitlines() or [text]:
        for plugin in _plugins:
            if plugin.analyze_line(filename=_ADHOC, line=line, line_number=0, context=None):
                return True
    return False


_ADHOC = "adhoc-string-scan"  # the file name scan_line gives the plugins (KeywordDetector picks its patterns by it)


class ContentRules:
    """The ContentPolicy of domain.review, backed by detect-secrets and pattern lists; and, where given, a
    probe that lets through what the patterns hold but means nothing sensitive (ADR 0043)."""

    def __init__(self, ordinary: Callable[[str], bool] | None = None) -> None:
        self._ordinary = ordinary

    def is_secret(self, text: str) -> bool:
        return any(p.search(text) for p in _SECRET_WORDS) or _library_finds_secret(text)

    def classify(self, text: str) -> str:
        if self.is_secret(text):
            return SECRET_CONTENT
        if not sensitive_kind(text):
            return NORMAL_CONTENT
        if self._ordinary is not None:
            try:
                if self._ordinary(text):
                    return NORMAL_CONTENT
            except Exception:  # noqa: BLE001 - the model unavailable: the rules decide, and they hold
                log.warning("sensitive probe unavailable; the rules decide alone")
        return SENSITIVE_CONTENT
