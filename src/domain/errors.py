"""Domain errors: values with a code, raised here and mapped to HTTP once at the edge."""

from __future__ import annotations


class DomainError(Exception):
    code = "domain_error"
    status = 400
    title = "Request refused"
    reason: str | None = None  # a 401's: which check failed (missing, signature, expired, lifetime, issuer, revoked)

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail or self.title)
        self.detail = detail or self.title


class NotFound(DomainError):
    code, status, title = "not_found", 404, "Not found"


class Forbidden(DomainError):
    code, status, title = "forbidden", 403, "Forbidden"


class TokenRevoked(DomainError):
    """Issued before its person signed out everywhere (or an admin did it for them)."""

    code, status, title, reason = "token_revoked", 401, "Token revoked", "revoked"


class RateLimited(DomainError):
    """Too many requests, or heavy reads, for now: try again after `retry_after` seconds."""

    code, status, title = "rate_limited", 429, "Too many requests"

    def __init__(self, detail: str, retry_after: int) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class KeyRevoked(DomainError):
    """A bot key revoked by an admin, or of a bot the company's directory no longer registers."""

    code, status, title, reason = "key_revoked", 401, "Key revoked", "revoked"


class PersonSuspended(Forbidden):
    """An admin suspended the person: nothing acts for them until resumed; their memories stay."""

    code, title = "person_suspended", "Person suspended"


class PersonOnly(Forbidden):
    """The person reviews what bots may use: their bots never confirm, reject or edit it."""

    code, title = "person_only", "Only the person may review this"


class InvalidText(DomainError):
    code, status, title = "invalid_text", 422, "Text is not valid"


class TextTooLarge(DomainError):
    code, status, title = "text_too_large", 413, "Text is too large"


class InvalidScope(DomainError):
    code, status, title = "invalid_scope", 422, "Scope is not valid"


class InvalidTags(DomainError):
    code, status, title = "invalid_tags", 422, "Tags are not valid"


class InvalidValidTime(DomainError):
    code, status, title = "invalid_valid_time", 422, "Valid time is not valid"


class MemoryForgotten(DomainError):
    code, status, title = "memory_forgotten", 409, "The memory was forgotten"


class NotAConfirmedMemory(DomainError):
    code, status, title = "not_confirmed", 409, "The memory is not confirmed"


class NotACandidate(DomainError):
    code, status, title = "not_a_candidate", 409, "Not a pending candidate"


class SensitiveAckRequired(DomainError):
    code, status, title = "sensitive_ack_required", 409, "Sensitive content needs acknowledgement"


class Conflict(DomainError):
    code, status, title = "conflict", 409, "Changed concurrently; read it again and retry"


class SourceRevoked(DomainError):
    code, status, title = "source_revoked", 409, "The source was revoked"
