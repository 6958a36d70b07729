"""`engram import FILE --company C`: prior memories from a JSON-lines file, each record at most once.

Two passes over the file, line by line. The first parses and checks every record (its form, that it
belongs to the importing company, the text and time rules of the API, secrets, the person's
directory scope) and writes nothing: any problem refuses the whole file, with line numbers and codes.
The second writes record by record, each in its own short transactions, as the person
(`remember` for a confirmed record, `propose` for a candidate).

A record's memory id is an HMAC, under a key the derivation root (ADR 0030) derives for the company, of its person,
source and text. Importing it again finds the memory (a duplicate) or its tombstone (forgotten,
rejected or expired: skipped before anything is written), also after the database was restored to
a backup taken before the first import: the tombstones live where a restore cannot roll them back.
The id is keyed so it reveals no text to anyone who guesses one. Nothing here reports any text.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from engram.domain.access import Access
from engram.domain.errors import Conflict, DomainError, MemoryForgotten, SourceRevoked
from engram.domain.evidence import Source
from engram.domain.instant import InvalidTime, check_instant
from engram.domain.memory import Memory
from engram.domain.memory_rules import EXPIRED, FORGOTTEN, PENDING, REJECTED, check_valid_time
from engram.domain.review import refuse_secrets
from engram.domain.scope import GENERAL, RESTRICTED, Caller, Scope
from engram.domain.text import is_valid_id, validate_text

from .memories import MemoryService
from .pending_writes import PendingWrites, collecting

IMPORT_ACTOR = "import"  # the history's actor of an imported memory's first event
CONFIRMED_STATUS, CANDIDATE_STATUS = "confirmed", "candidate"
FIELDS = frozenset({"company", "person", "text", "source", "occurred_at", "status", "visibility", "team",
                    "valid_from", "valid_to"})
SOURCE_FIELDS = frozenset({"kind", "id", "message_id"})
MAX_LINE_BYTES = 1024 * 1024  # a record is one request body's worth at most
MAX_PROBLEMS_LISTED = 100
FENCE_WAIT_SECONDS = 30.0
_FIELD_NAME = re.compile(r"[A-Za-z_]{1,32}")  # a field name safe to repeat in a report


class RecordProblem(DomainError):
    """One line that cannot be imported; `detail` never holds its text."""

    code, status, title = "invalid_record", 422, "Record is not valid"

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


class ImportRefused(DomainError):
    code, status, title = "import_refused", 422, "Import refused"


@dataclass(frozen=True)
class ImportRecord:
    company: str
    person: str
    text: str
    source: Source
    occurred_at: datetime
    confirmed: bool
    visibility: str = GENERAL
    team: str | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


def _instant(value: Any, what: str, *, required: bool) -> datetime | None:
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise RecordProblem("invalid_time", f"{what} must be an RFC 3339 time with an offset")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise RecordProblem("invalid_time", f"{what} must be an RFC 3339 time with an offset") from None
    try:
        check_instant(parsed, what)
    except InvalidTime as e:
        raise RecordProblem(e.code, e.detail) from None
    return parsed


def _optional_id(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not is_valid_id(value):
        raise RecordProblem("invalid_record", f"{what} must be 1 to 200 printable characters")
    return str(value)


def _unknown(names: set[str], where: str) -> RecordProblem:
    shown = sorted(n for n in names if _FIELD_NAME.fullmatch(n))
    listed = f": {', '.join(shown)}" if shown and len(shown) == len(names) else ""
    return RecordProblem("invalid_record", f"unknown field(s) in {where}{listed}")


class _DuplicateKey(Exception):
    pass


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise _DuplicateKey
    return document


def parse_record(line: str, *, company: str, max_text_bytes: int) -> ImportRecord:
    """One JSON line as a record of `company`, checked as the API checks a remember; RecordProblem otherwise."""
    try:
        data = json.loads(line, object_pairs_hook=_once_each)
    except _DuplicateKey:  # `{"company": "a", "company": "b"}`: which one was meant is not ours to guess
        raise RecordProblem("duplicate_key", "a field is given twice in one object") from None
    except (ValueError, RecursionError):
        raise RecordProblem("invalid_json", "the line is not JSON") from None
    if not isinstance(data, dict):
        raise RecordProblem("invalid_record", "the line is not a JSON object")
    if set(data) - FIELDS:
        raise _unknown(set(data) - FIELDS, "the record")
    if data.get("company") != company:
        raise RecordProblem("other_company", "the record belongs to another company (or names none)")
    person = data.get("person")
    if not isinstance(person, str) or not is_valid_id(person):
        raise RecordProblem("invalid_person", "person must be 1 to 200 printable characters")
    text = data.get("text")
    if not isinstance(text, str):
        raise RecordProblem("invalid_text", "text must be a string")
    try:
        validate_text(text, max_text_bytes)
    except DomainError as e:
        raise RecordProblem(e.code, e.detail) from None
    raw_source = data.get("source")
    if not isinstance(raw_source, dict):
        raise RecordProblem("invalid_source", "source must be an object with kind and id")
    if set(raw_source) - SOURCE_FIELDS:
        raise _unknown(set(raw_source) - SOURCE_FIELDS, "source")
    if not all(v is None or isinstance(v, str) for v in raw_source.values()):
        raise RecordProblem("invalid_source", "source fields must be strings")
    try:
        source = Source.of(raw_source)
    except DomainError:
        raise RecordProblem("invalid_source", "source needs a kind and an id of printable characters") from None
    occurred_at = _instant(data.get("occurred_at"), "occurred_at", required=True)
    assert occurred_at is not None
    status = data.get("status", CONFIRMED_STATUS)
    if status not in (CONFIRMED_STATUS, CANDIDATE_STATUS):
        raise RecordProblem("invalid_status", 'status must be "confirmed" or "candidate"')
    visibility = data.get("visibility", GENERAL)
    if visibility not in (GENERAL, RESTRICTED):
        raise RecordProblem("invalid_scope", 'visibility must be "general" or "restricted"')
    team = _optional_id(data.get("team"), "team")
    valid_from = _instant(data.get("valid_from"), "valid_from", required=False)
    valid_to = _instant(data.get("valid_to"), "valid_to", required=False)
    try:
        check_valid_time(valid_from, valid_to)
        Scope(company, person, visibility, team, source.id)
    except DomainError as e:
        raise RecordProblem(e.code, e.detail) from None
    return ImportRecord(company, person, text, source, occurred_at, status == CONFIRMED_STATUS,
                        visibility, team, valid_from, valid_to)


def comparable(text: str) -> str:
    """A text as the fence compares it: Unicode's compatibility form, case folded, runs of white space as
    one space and none at either end. A forgotten text given again with a trailing space, in capitals or
    with full-width letters is the same text, and stays forgotten."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def record_id(key: bytes, record: ImportRecord) -> UUID:
    """The memory id of a record: keyed, so a guessed text cannot be confirmed from an id; of its text
    as the fence compares it (`comparable`)."""
    return _keyed_id(key, record, comparable(record.text))


def exact_record_id(key: bytes, record: ImportRecord) -> UUID:
    """The id imports gave before texts were compared (of the text exactly): a file imported then, and
    the tombstones of what was forgotten since, still recognise it."""
    return _keyed_id(key, record, record.text)


def _keyed_id(key: bytes, record: ImportRecord, text: str) -> UUID:
    name = json.dumps([record.person, record.source.kind, record.source.id, record.source.message_id, text],
                      ensure_ascii=False, separators=(",", ":"))
    n = int.from_bytes(hmac.new(key, name.encode(), hashlib.sha256).digest()[:16], "big")
    n = (n & ~(0xF << 76)) | (0x8 << 76)  # version 8: an id of our own making (RFC 9562)
    n = (n & ~(0x3 << 62)) | (0x2 << 62)  # the RFC variant
    return UUID(int=n)


def lines(path: Path) -> Iterator[tuple[int, str | RecordProblem]]:
    """(line number, text) for each non-blank line, one at a time; a problem for a line that cannot be read."""
    with path.open("rb") as f:
        number = 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # skip the rest of this line without holding it
                    raw = f.readline(MAX_LINE_BYTES)
                yield number, RecordProblem("line_too_long", f"the line is longer than {MAX_LINE_BYTES} bytes")
                continue
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError:
                yield number, RecordProblem("invalid_encoding", "the line is not UTF-8")
                continue
            if text.strip():
                yield number, text


@dataclass
class ImportReport:
    """Counts and line numbers only: never any text."""

    company: str
    records: int = 0
    imported: int = 0
    candidates: int = 0
    duplicates: int = 0
    skipped_forgotten: int = 0
    skipped_revoked: int = 0
    refused: int = 0
    problems: list[dict[str, Any]] = field(default_factory=list)
    aborted: str | None = None

    def refuse(self, line: int, code: str, detail: str) -> None:
        self.refused += 1
        if len(self.problems) < MAX_PROBLEMS_LISTED:
            self.problems.append({"line": line, "code": code, "detail": detail})

    def as_dict(self) -> dict[str, Any]:
        out = {"company": self.company, "records": self.records, "imported": self.imported,
               "candidates": self.candidates, "duplicates": self.duplicates,
               "skipped_forgotten": self.skipped_forgotten, "skipped_revoked": self.skipped_revoked,
               "refused": self.refused, "problems": self.problems}
        if self.aborted:
            out["aborted"] = self.aborted
        return out


class MemoryImporter:
    """Imports a file into one company, as each record's person; see the module's docstring."""

    ACCESS_CACHE = 4096  # people whose standing is kept during one pass
    SETTLE_BATCH = 200  # stored events waited for together

    def __init__(self, memories: MemoryService, forgotten: Container[str], id_key: Callable[[str], bytes],
                 fence_ready: Callable[[float], bool]) -> None:
        self.memories = memories
        self.ledger = memories.ledger
        self.forgotten = forgotten  # ids with a tombstone, read from where a database restore cannot reach
        self.id_key = id_key
        self.fence_ready = fence_ready

    def _access(self, cache: OrderedDict[str, Access], company: str, person: str) -> Access:
        access = cache.get(person)
        if access is None:
            access = self.ledger.access(Caller(company, person, "user", entry="import"))
            cache[person] = access
            if len(cache) > self.ACCESS_CACHE:
                cache.popitem(last=False)
        else:
            cache.move_to_end(person)
        return access

    @staticmethod
    def _check_scope(record: ImportRecord, access: Access) -> None:
        """What `remember` would refuse for the person's standing (checked again before each write)."""
        access.admit()
        access.require_may_act()
        if record.visibility == RESTRICTED and record.source.id not in access.revoked_sources:
            access.require_restricted_scope(record.team, record.source.id)

    def check(self, path: Path, company: str) -> ImportReport:
        """The first pass: every record parsed and checked, nothing written."""
        report = ImportReport(company)
        cache: OrderedDict[str, Access] = OrderedDict()
        for number, line in lines(path):
            report.records += 1
            try:
                if isinstance(line, RecordProblem):
                    raise line
                record = parse_record(line, company=company, max_text_bytes=self.memories.max_text_bytes)
                refuse_secrets(self.memories.policy, record.text)  # remember and propose refuse them again
                self._check_scope(record, self._access(cache, company, record.person))
            except DomainError as e:
                report.refuse(number, e.code, e.detail)
        return report

    def run(self, path: Path, company: str) -> ImportReport:
        """Check the whole file; when every record passes, write them one by one."""
        if not is_valid_id(company):
            raise ImportRefused("the company must be 1 to 200 printable characters")
        if not self.fence_ready(FENCE_WAIT_SECONDS):
            raise ImportRefused("the tombstones could not be read; nothing was imported (retry when the "
                                "tombstone journal is reachable)")
        before = path.stat()
        report = self.check(path, company)
        if report.refused:
            return report
        after = path.stat()
        if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
            raise ImportRefused("the file changed while it was checked; nothing was imported")
        # Where projectors run elsewhere (distributed mode), wait for visibility once per batch, not per
        # record; in-process projectors apply each write before `save` returns, as for any caller.
        with collecting() as pending:
            self._write_all(report, path, company, pending)
            self._settle(pending)  # also after an abort: what was written is visible when the command ends
        return report

    def _write_all(self, report: ImportReport, path: Path, company: str, pending: PendingWrites) -> None:
        key = self.id_key(company)
        cache: OrderedDict[str, Access] = OrderedDict()
        for number, line in lines(path):
            try:
                if isinstance(line, RecordProblem):
                    raise line
                record = parse_record(line, company=company, max_text_bytes=self.memories.max_text_bytes)
                self._write(report, record, record_id(key, record), self._access(cache, company, record.person),
                            earlier=exact_record_id(key, record))
            except DomainError as e:  # the file or the directory changed since the check
                report.aborted = f"line {number}: {e.code}"
                return
            if len(pending.recordings) >= self.SETTLE_BATCH:
                self._settle(pending)

    def _settle(self, pending: PendingWrites) -> None:
        if pending.recordings:
            self.ledger.settler.settle_recordings(pending.recordings)
            pending.recordings.clear()

    def _write(self, report: ImportReport, record: ImportRecord, memory_id: UUID, access: Access, *,
               earlier: UUID | None = None) -> None:
        """`earlier`: the id an import of the same record had before texts were compared (the same
        fence and the same duplicate)."""
        ids = [memory_id] if earlier is None or earlier == memory_id else [memory_id, earlier]
        if any(str(i) in self.forgotten for i in ids):  # a tombstone: also when the database was restored to before it
            report.skipped_forgotten += 1
            return
        existing = next((m for m in (self.ledger.get(i, Memory) for i in ids) if m is not None), None)
        if existing is not None:
            if existing.status in (FORGOTTEN, REJECTED, EXPIRED):  # its tombstone is in another process's fence
                report.skipped_forgotten += 1
            else:
                report.duplicates += 1
            return
        if record.source.id in access.revoked_sources:
            report.skipped_revoked += 1
            return
        self._check_scope(record, access)
        caller = access.caller
        try:
            if record.confirmed:
                stored = self.memories.remember(
                    caller, text=record.text, source=record.source.as_dict(), occurred_at=record.occurred_at,
                    visibility=record.visibility, team=record.team, valid_from=record.valid_from,
                    valid_to=record.valid_to, id=memory_id, actor=IMPORT_ACTOR)
            else:
                stored = self.memories.propose(
                    caller, text=record.text, quote=record.text, source=record.source.as_dict(),
                    occurred_at=record.occurred_at, visibility=record.visibility, team=record.team, id=memory_id,
                    valid_from=record.valid_from, valid_to=record.valid_to, actor=IMPORT_ACTOR)
        except MemoryForgotten:  # its key was destroyed (the database knows, the fence may not yet)
            report.skipped_forgotten += 1
            return
        except Conflict:  # the same record, imported concurrently
            report.duplicates += 1
            return
        except SourceRevoked:
            report.skipped_revoked += 1
            return
        if stored.status == PENDING:
            report.candidates += 1
        else:
            report.imported += 1
