"""Loaded by Hindsight, not by Engram:

    HINDSIGHT_API_TENANT_EXTENSION=hindsight_guard.extension:EngramTenant
    HINDSIGHT_API_TENANT_ENGRAM_PUBLIC_KEY=<output of `engram hindsight-key`>
    HINDSIGHT_API_OPERATION_VALIDATOR_EXTENSION=hindsight_guard.extension:EngramBankGuard
    HINDSIGHT_API_OPERATION_VALIDATOR_ENGRAM_PUBLIC_KEY=<the same>

While Engram's master key is rotated, give both public keys, the new one first, separated by a comma
(ADR 0030).

The tenant extension answers 401 to any request without a valid Engram service token. The validator
allows a token exactly what Engram does (`engram.adapters.hindsight.HindsightClient`), on exactly the
banks it names: create the bank (with Hindsight's defaults: no settings), read its profile, retain
a document (text only), recall, read and delete a document, list the bank's facts and observations
(a document's, or all of them for the insight proposer, ADR 0022). Everything
else answers 403 for every token: bank settings, missions and names, aliases (an alias named after
another person's bank id would capture that person's requests), mental models, directives,
webhooks, imports, reflect, consolidation, memory-unit edits, bank deletion, exports.
Background work Hindsight runs for itself (`internal`) was authorized when it was submitted.
"""

from __future__ import annotations

import time
from typing import Any

from hindsight_api.config import get_config
from hindsight_api.extensions.operation_validator import (
    BankListScope,
    OperationValidatorExtension,
    PrecheckOperation,
    ValidationResult,
)
from hindsight_api.extensions.tenant import AuthenticationError, Tenant, TenantContext, TenantExtension

from .tokens import InvalidServiceToken, load_public_keys, presented, verify_any

# The operations Engram performs, by the names Hindsight gives them; nothing else is allowed.
ENGRAM_PRECHECKS = frozenset({PrecheckOperation.RETAIN, PrecheckOperation.RECALL})
ENGRAM_READS = frozenset({"get_bank_profile", "get_document", "list_memory_units"})
ENGRAM_WRITES = frozenset({"delete_document"})


class _Verifier:
    """Verifies tokens, remembering recent answers for 30 s at most and never past the token's expiry."""

    def __init__(self, config: dict[str, str]) -> None:
        text = config.get("engram_public_key")
        if not text:
            raise ValueError("ENGRAM_PUBLIC_KEY is required for the Engram guard (see `engram hindsight-key`)")
        self.keys = load_public_keys(text)
        self._seen: dict[str, tuple[frozenset[str], float]] = {}

    def banks(self, token: str | None) -> frozenset[str]:
        token = presented(token)
        if token in self._seen:
            banks, until = self._seen[token]
            if time.time() < until:
                return banks
            del self._seen[token]
        banks, valid_until = verify_any(self.keys, token)
        if len(self._seen) > 4096:
            self._seen.clear()
        self._seen[token] = (banks, min(valid_until, time.time() + 30))
        return banks


class EngramTenant(TenantExtension):
    def __init__(self, config: dict[str, str]) -> None:
        super().__init__(config)
        self.verifier = _Verifier(config)
        self.schema = config.get("schema") or get_config().database_schema

    async def authenticate(self, context: Any) -> TenantContext:
        try:
            self.verifier.banks(context.api_key)
        except InvalidServiceToken as e:
            raise AuthenticationError(str(e)) from None
        return TenantContext(schema_name=self.schema)

    async def list_tenants(self) -> list[Tenant]:
        return [Tenant(schema=self.schema)]


class EngramBankGuard(OperationValidatorExtension):
    def __init__(self, config: dict[str, str]) -> None:
        super().__init__(config)
        self.verifier = _Verifier(config)

    def _bank(self, bank_id: str, request_context: Any) -> ValidationResult:
        if request_context is not None and getattr(request_context, "internal", False):
            return ValidationResult.accept()
        try:
            banks = self.verifier.banks(getattr(request_context, "api_key", None))
        except InvalidServiceToken as e:
            return ValidationResult.reject(str(e), 401)
        if bank_id not in banks:
            return ValidationResult.reject("the service token does not name this bank", 403)
        return ValidationResult.accept()

    @staticmethod
    def _internal(request_context: Any) -> bool:
        return request_context is not None and bool(getattr(request_context, "internal", False))

    def _never(self, what: str, request_context: Any = None) -> ValidationResult:
        if self._internal(request_context):  # Hindsight's own background work
            return ValidationResult.accept()
        return ValidationResult.reject(f"{what} is not an operation Engram performs", 403)

    async def precheck(self, ctx: Any) -> ValidationResult:
        if str(ctx.operation) not in ENGRAM_PRECHECKS:
            return self._never(str(ctx.operation), ctx.request_context)
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_retain(self, ctx: Any) -> ValidationResult:
        if not self._internal(ctx.request_context):
            if getattr(ctx, "attachments", None) or getattr(ctx, "fact_type_override", None):
                return self._never("retaining attachments or typed facts")
            if not all(isinstance(item, dict) and item.get("document_id") for item in ctx.contents or []):
                return self._never("retaining text outside a document")
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_recall(self, ctx: Any) -> ValidationResult:
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_reflect(self, ctx: Any) -> ValidationResult:
        return self._never("reflect", ctx.request_context)

    async def validate_consolidate(self, ctx: Any) -> ValidationResult:
        return self._never("consolidation on request", ctx.request_context)

    async def validate_bank_read(self, ctx: Any) -> ValidationResult:
        if str(ctx.operation) not in ENGRAM_READS:
            return self._never(str(ctx.operation), ctx.request_context)
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_bank_write(self, ctx: Any) -> ValidationResult:
        if str(ctx.operation) not in ENGRAM_WRITES:
            return self._never(str(ctx.operation), ctx.request_context)
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_create_bank(self, ctx: Any) -> ValidationResult:
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_import(self, ctx: Any) -> ValidationResult:
        return self._never("import", ctx.request_context)

    async def validate_mental_model_get(self, ctx: Any) -> ValidationResult:
        return self._never("mental models", ctx.request_context)

    async def validate_mental_model_refresh(self, ctx: Any) -> ValidationResult:
        return self._never("mental models", ctx.request_context)

    async def validate_memory_update(self, ctx: Any) -> ValidationResult:
        return self._never("editing memory units", ctx.request_context)

    async def bank_list_scope(self, request_context: Any) -> BankListScope | None:
        if self._internal(request_context):
            return None
        return BankListScope(bank_ids=[])  # Engram never lists banks: a token sees none
