"""Loaded by Hindsight, not by Engram:

    HINDSIGHT_API_TENANT_EXTENSION=hindsight_guard.extension:EngramTenant
    HINDSIGHT_API_TENANT_ENGRAM_PUBLIC_KEY=<output of `engram hindsight-key`>
    HINDSIGHT_API_OPERATION_VALIDATOR_EXTENSION=hindsight_guard.extension:EngramBankGuard
    HINDSIGHT_API_OPERATION_VALIDATOR_ENGRAM_PUBLIC_KEY=<the same>

The tenant extension answers 401 to any request without a valid Engram service token; the validator
answers 403 to any operation on a bank the token does not name, and refuses reflect, mental models
and imports outright (Engram never uses them; they would keep text Engram cannot purge).
Background work Hindsight runs for itself (`internal`) was authorized when it was submitted.
"""

from __future__ import annotations

import time
from typing import Any

from hindsight_api.config import get_config
from hindsight_api.extensions.operation_validator import (
    BankListScope,
    OperationValidatorExtension,
    ValidationResult,
)
from hindsight_api.extensions.tenant import AuthenticationError, Tenant, TenantContext, TenantExtension

from .tokens import InvalidServiceToken, load_public_key, presented, verify_until


class _Verifier:
    """Verifies tokens, remembering recent answers for 30 s at most and never past the token's expiry."""

    def __init__(self, config: dict[str, str]) -> None:
        text = config.get("engram_public_key")
        if not text:
            raise ValueError("ENGRAM_PUBLIC_KEY is required for the Engram guard (see `engram hindsight-key`)")
        self.key = load_public_key(text)
        self._seen: dict[str, tuple[frozenset[str], float]] = {}

    def banks(self, token: str | None) -> frozenset[str]:
        token = presented(token)
        if token in self._seen:
            banks, until = self._seen[token]
            if time.time() < until:
                return banks
            del self._seen[token]
        banks, valid_until = verify_until(self.key, token)
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
    def _never(what: str) -> ValidationResult:
        return ValidationResult.reject(f"{what} is disabled for Engram banks", 403)

    async def precheck(self, ctx: Any) -> ValidationResult:
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_retain(self, ctx: Any) -> ValidationResult:
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_recall(self, ctx: Any) -> ValidationResult:
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_reflect(self, ctx: Any) -> ValidationResult:
        return self._never("reflect")

    async def validate_consolidate(self, ctx: Any) -> ValidationResult:
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_bank_read(self, ctx: Any) -> ValidationResult:
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_bank_write(self, ctx: Any) -> ValidationResult:
        if str(ctx.operation) in ("create_mental_model", "update_mental_model", "create_knowledge_page",
                                  "update_knowledge_page", "import_documents"):
            return self._never(str(ctx.operation))
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_create_bank(self, ctx: Any) -> ValidationResult:
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_import(self, ctx: Any) -> ValidationResult:
        return self._never("import")

    async def validate_mental_model_get(self, ctx: Any) -> ValidationResult:
        return self._bank(ctx.bank_id, ctx.request_context)

    async def validate_mental_model_refresh(self, ctx: Any) -> ValidationResult:
        return self._never("mental models")

    async def validate_memory_update(self, ctx: Any) -> ValidationResult:
        return self._never("editing memory units")

    async def bank_list_scope(self, request_context: Any) -> BankListScope | None:
        try:
            return BankListScope(bank_ids=sorted(self.verifier.banks(getattr(request_context, "api_key", None))))
        except InvalidServiceToken:
            return BankListScope(bank_ids=[])
