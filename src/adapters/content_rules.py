"""Review rules for personal text: secrets are refused, sensitive content waits for review.

Secrets: detect-secrets' pattern plugins (cloud keys, tokens, private keys, JWTs, ...) plus our
rules for secrets stated in words, in English and Chinese ("my password is ...", "密码是...").
Its entropy plugins are left out: on prose they flag ordinary words.
Sensitive: keyword lists for medical, financial and customer data, and patterns for card
numbers (Luhn-checked), IBANs, e-mail addresses, phone numbers and Chinese ID numbers.
See docs/adr/0005-review-rules.md for the categories and their limits.
"""

from __future__ import annotations

import re
from functools import lru_cache

from engram.domain.review import NORMAL_CONTENT, SECRET_CONTENT, SENSITIVE_CONTENT

_PLUGINS = [
    "ArtifactoryDetector", "AWSKeyDetector", "AzureStorageKeyDetector", "BasicAuthDetector",
    "CloudantDetector", "DiscordBotTokenDetector", "GitHubTokenDetector", "GitLabTokenDetector",
    "IbmCloudIamDetector", "IbmCosHmacDetector", "JwtTokenDetector", "KeywordDetector",
    "MailchimpDetector", "NpmDetector", "OpenAIDetector", "PrivateKeyDetector", "PypiTokenDetector",
    "SendGridDetector", "SlackDetector", "SoftlayerDetector", "SquareOAuthDetector", "StripeDetector",
    "TelegramBotTokenDetector", "TwilioKeyDetector",
]

_SECRET_WORDS = [
    # "my password is X", "the wifi passcode: X", "api key = X", "PIN is 1234"
    re.compile(
        r"\b(?:password|passwd|passcode|passphrase|pass\s*word|pin(?:\s*code)?|api[\s_-]*key|secret[\s_-]*key|"
        r"access[\s_-]*key|access[\s_-]*token|auth[\s_-]*token|bearer[\s_-]*token|token|private[\s_-]*key|"
        r"security\s+code|cvv|one[\s-]*time\s+code|otp)\b"
        r"(?:\s+(?:for|to|of|on)\s+[\w.@-]+(?:\s+[\w.@-]+)?)?\s*(?:is|was|=|:|are)\s*[\"'`]?\S{3,}",
        re.IGNORECASE,
    ),
    re.compile(r"(?:密码|口令|密钥|私钥|令牌|验证码|支付码|PIN码?|pin码?)\s*(?:是|为|：|:|=)\s*\S{2,}"),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\b(?:sk|rk|pk)-(?:proj-|live-|test-)?[A-Za-z0-9_-]{20,}\b"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),
]

_SENSITIVE_WORDS = re.compile(
    r"\b(?:diagnos\w*|prescri\w*|medication|medicine|insulin|chemo\w*|therap\w*|depress\w*|anxiety|"
    r"hiv|cancer|tumou?r|diabet\w*|surgery|pregnan\w*|blood\s+pressure|psychiatr\w*|disorder|illness|"
    r"disease|hospital\w*|salary|salaries|income|payslip|bank\s+account|account\s+number|routing\s+number|"
    r"credit\s+card|debit\s+card|iban|mortgage|loan|debt|tax\s+return|net\s+worth|"
    r"customer|client'?s?\s+(?:phone|email|e-mail|address|account|data|record)s?)\b"
    r"|诊断|处方|药物|吃药|用药|胰岛素|化疗|抑郁|焦虑症|癌|糖尿病|手术|怀孕|血压|精神科|医院|病历|"
    r"工资|薪水|薪资|收入|银行卡|银行账户|账号|信用卡|贷款|债务|房贷|税单|客户",
    re.IGNORECASE,
)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b")
_PHONE = re.compile(
    r"(?<![\w+])\+\d[\d\s().-]{7,}\d(?!\w)"  # international, with a plus
    r"|(?<!\d)1[3-9]\d{9}(?!\d)"  # Chinese mobile
    r"|(?<!\d)\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4}(?!\d)"  # North American
)
_CN_ID = re.compile(r"(?<!\d)\d{17}[\dXx](?!\d)")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:\s?[A-Z0-9]{4}){2,7}(?:\s?[A-Z0-9]{1,4})?\b")
_CARD = re.compile(r"(?<!\d)(?:\d[ -]?){13,19}(?!\d)")


def _luhn(digits: str) -> bool:
    total, parity = 0, len(digits) % 2
    for i, ch in enumerate(digits):
        d = int(ch)
        if i % 2 == parity:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


@lru_cache(maxsize=1)
def _detect_secrets_settings() -> dict:
    return {"plugins_used": [{"name": name} for name in _PLUGINS], "filters_used": []}


def _library_finds_secret(text: str) -> bool:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import transient_settings

    with transient_settings(_detect_secrets_settings()):
        for line in text.splitlines() or [text]:
            for _secret in scan_line(line):
                return True
    return False


class ContentRules:
    """The ContentPolicy of domain.review, backed by detect-secrets and pattern lists."""

    def classify(self, text: str) -> str:
        if any(p.search(text) for p in _SECRET_WORDS) or _library_finds_secret(text):
            return SECRET_CONTENT
        if _SENSITIVE_WORDS.search(text) or _EMAIL.search(text) or _CN_ID.search(text) or _IBAN.search(text):
            return SENSITIVE_CONTENT
        for match in _CARD.finditer(text):
            digits = re.sub(r"\D", "", match.group())
            if 13 <= len(digits) <= 19 and _luhn(digits):
                return SENSITIVE_CONTENT
        if _PHONE.search(text):
            return SENSITIVE_CONTENT
        return NORMAL_CONTENT
