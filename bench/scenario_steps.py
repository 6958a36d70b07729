"""The step functions of the frozen scenarios (bench/data/scenarios/scenarios.json), over HTTP as
API.md describes. Each takes the run's context and the scenario's parameters and raises `Failed` at the
first outcome that differs from the contract; a restore step is a generator that yields `BACKUP`, then
`RESTORE`, where the runner takes one backup and restores it for every restore scenario of the run."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import httpx

BACKUP, RESTORE = "backup", "restore"
Json = dict[str, Any]


class Failed(Exception):
    """An observed outcome differs from the contract."""


def check(condition: object, what: str) -> None:
    if not condition:
        raise Failed(what)


def instant(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


class Service:
    """A running Engram: its URL, how tokens are made for it, and what it may be asked to do."""

    def __init__(self, url: str, make_token: Callable[..., str], *, model: Any = None,
                 backup: Callable[[], None] | None = None, restore: Callable[[], None] | None = None,
                 ready: Callable[[], None] = lambda: None) -> None:
        self.url, self.make_token, self.model = url, make_token, model
        self.backup, self.restore, self.ready = backup, restore, ready
        self.http = httpx.Client(base_url=url, timeout=60)

    def close(self) -> None:
        self.http.close()


class Ctx:
    """One run of one scenario: fresh company and person names, and the endpoints it exercised."""

    def __init__(self, service: Service, tag: str) -> None:
        self.service, self.tag = service, tag
        self.endpoints: set[str] = set()

    def company(self, name: str = "co") -> str:
        return f"{name}-{self.tag}"

    def person(self, user: str = "ana", company: str | None = None, role: str = "user", bot: str | None = None,
               entry: str = "api") -> Who:
        token = self.service.make_token(company=company or self.company(), user=user, role=role, bot=bot, entry=entry)
        return Who(self, token)

    def admin(self, company: str | None = None) -> Who:
        return self.person("root", company, role="admin")

    def source(self, name: str = "chat") -> Json:
        return {"kind": "chat", "id": f"{name}-{self.tag}", "message_id": "m-" + uuid.uuid4().hex[:10]}

    def wait(self, probe: Callable[[], Any], what: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            got = probe()
            if got:
                return got
            if time.monotonic() > deadline:
                raise Failed(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.2)


class Who:
    """Requests with one token; `route` is API.md's path with `{name}` placeholders filled from `ids`.
    With `expect` (and `code`) a call checks the status (and the problem's code) and gives the JSON body;
    without, it gives the response."""

    def __init__(self, ctx: Ctx, token: str) -> None:
        self.ctx, self.headers = ctx, {"Authorization": f"Bearer {token}"}

    def call(self, method: str, route: str, body: Any = None, *, expect: int | None = None, code: str | None = None,
             params: Json | None = None, **ids: str) -> Any:
        self.ctx.endpoints.add(f"{method} {route}")
        r = self.ctx.service.http.request(method, route.format(**ids), json=body, params=params, headers=self.headers)
        if expect is not None:
            check(r.status_code == expect, f"{method} {route} answered {r.status_code}, not {expect}: {r.text[:200]}")
        if code is not None:
            check(r.headers.get("content-type", "").startswith("application/problem+json")
                  and r.json().get("code") == code, f"{method} {route}: problem code is not {code}: {r.text[:200]}")
        return r.json() if expect is not None and r.content else r

    def get(self, route: str, **kw: Any) -> Any:
        return self.call("GET", route, **kw)

    def post(self, route: str, body: Any = None, **kw: Any) -> Any:
        return self.call("POST", route, body, **kw)

    def put(self, route: str, body: Any, **kw: Any) -> Any:
        return self.call("PUT", route, body, **kw)

    # the calls most scenarios make
    def remember(self, text: str, source: Json | None = None, expect: int = 201, **extra: Any) -> Json:
        body = {"text": text, "explicit": True, "source": source or self.ctx.source(), **extra}
        return self.post("/v1/memories", body, expect=expect)  # type: ignore[no-any-return]

    def recall(self, query: str, **extra: Any) -> Json:
        return self.post("/v1/recall", {"query": query, **extra}, expect=200)  # type: ignore[no-any-return]

    def recalled(self, query: str, **extra: Any) -> list[Json]:
        return list(self.recall(query, **extra)["items"])

    def candidates(self) -> list[Json]:
        return list(self.get("/v1/candidates", expect=200)["items"])

    def say(self, text: str, occurred_at: str | None = None, source: Json | None = None) -> str:
        """One user message as a receipt; its receipt id."""
        rid = "r-" + uuid.uuid4().hex[:12]
        body = {"receipt_id": rid, "author": "user", "text": text, "source": source or self.ctx.source()}
        if occurred_at:
            body["occurred_at"] = occurred_at
        got = self.post("/v1/receipts", body, expect=202)
        check(got == {"receipt_id": rid, "state": "queued"}, f"receipt not queued: {got}")
        return rid

    def learned(self, rid: str, count: int = 1) -> list[str]:
        """The candidate ids learned from a receipt, once it is done."""
        def done() -> Json | None:
            status = self.get("/v1/receipts/{rid}", expect=200, rid=rid)
            return status if status["state"] in ("done", "failed", "ignored") else None
        status = self.ctx.wait(done, "the receipt to be learned from")
        check(status["state"] == "done" and len(status["candidate_ids"]) == count,
              f"receipt ended {status['state']} with {len(status['candidate_ids'])} candidates, not {count}")
        return list(status["candidate_ids"])

    def say_and_confirm(self, text: str) -> Json:
        [cid] = self.learned(self.say(text))
        return self.post("/v1/candidates/{id}/confirm", {}, expect=200, id=cid)  # type: ignore[no-any-return]

    def forget_done(self, forget_id: str) -> Json:
        def complete() -> Json | None:
            status = self.get("/v1/forgets/{forget_id}", expect=200, forget_id=forget_id)
            return status if status["status"] == "purge_complete" else None
        return self.ctx.wait(complete, "purge_complete")  # type: ignore[no-any-return]


def ids(items: list[Json]) -> list[str]:
    return [i["id"] for i in items]


def texts(items: list[Json]) -> list[str]:
    return [i["text"] for i in items]


# ---------------------------------------------------------------- capture

def receipt_to_candidate(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    source = ctx.source()
    [cid] = ana.learned(ana.say(p["message"], source=source))
    [candidate] = [c for c in ana.candidates() if c["id"] == cid]
    check(candidate["text"] == p["candidate"], f"candidate text {candidate['text']!r}")
    check(candidate["status"] == "pending_review" and candidate["review"] == "normal", "candidate not pending/normal")
    [evidence] = candidate["evidence"]
    check(evidence["quote"] == p["quote"] and evidence["quote"] in p["message"], "quote is not the exact words")
    check(evidence["source"] == source, "evidence names another source")
    check(ana.recalled(p["candidate"]) == [], "an unreviewed candidate was recalled")


def conversation_batch(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    source = ctx.source()
    messages = [{"receipt_id": f"r-{i}-{ctx.tag}", "author": author, "text": text,
                 "source": {**source, "message_id": f"m-{i}"}}
                for i, (author, text) in enumerate((("assistant", p["assistant"]), ("user", p["user"]),
                                                    ("user", p["question"])))]
    got = ana.post("/v1/receipts", {"messages": messages}, expect=202)["items"]
    check([g["state"] for g in got] == ["ignored", "queued", "queued"], f"states {[g['state'] for g in got]}")
    check(got[0].get("reason") == "not_user_text", "the assistant's words were not ignored as not_user_text")
    [cid] = ana.learned(messages[1]["receipt_id"])
    ana.learned(messages[2]["receipt_id"], count=0)  # a question is not a memory
    check(texts(ana.candidates()) == [p["candidate"]], "the candidates are not only the person's statement")
    again = ana.post("/v1/receipts", {"messages": messages}, expect=202)["items"]
    check([g["state"] for g in again[1:]] == ["done", "done"], "redelivery was not recognised as done")
    time.sleep(0.5)
    check(ids(ana.candidates()) == [cid], "redelivery added candidates")


def secret_refused(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    ana.post("/v1/memories", {"text": p["explicit"], "explicit": True, "source": ctx.source()}, expect=422,
             code="secret_refused")
    rid = "r-" + ctx.tag
    got = ana.post("/v1/receipts", {"receipt_id": rid, "author": "user", "text": p["message"],
                                    "source": ctx.source()}, expect=202)
    check(got["state"] == "ignored" and got.get("reason") == "secret_refused", f"a key in chat was {got}")
    check(ana.get("/v1/memories", expect=200)["items"] == [], "something was stored")
    check(ana.candidates() == [] and ana.recalled(p["query"]) == [], "a secret reached review or recall")


def explicit_idempotent(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    source = ctx.source()
    first = ana.remember(p["text"], source)
    check(first["status"] == "confirmed" and first["text"] == p["text"], "not confirmed with the exact text")
    second = ana.remember(p["text"], source, expect=200)
    check(second["id"] == first["id"], "the same message made a second memory")
    check(ids(ana.get("/v1/memories", expect=200)["items"]) == [first["id"]], "the list holds more than one")
    check(ids(ana.recalled(p["query"])) == [first["id"]], "recall does not return it once")


# ---------------------------------------------------------------- review

def confirm_candidate(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    [cid] = ana.learned(ana.say(p["message"]))
    body = {"text": p["edit"]} if p["edit"] else {}
    memory = ana.post("/v1/candidates/{id}/confirm", body, expect=200, id=cid)
    check(memory["status"] == "confirmed", "confirm did not confirm")
    expected = p["edit"] or p["quote"].rstrip("。.")
    check(memory["text"] == expected, f"confirmed text {memory['text']!r}")
    check(cid not in ids(ana.candidates()), "a confirmed candidate stayed in the queue")
    [item] = [i for i in ana.recalled(p["query"]) if i["id"] == memory["id"]]
    check(item["text"] == expected and item["evidence"][0]["quote"] == p["quote"], "recalled without its quote")


def reject_candidate(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    [cid] = ana.learned(ana.say(p["message"]))
    ana.post("/v1/candidates/{id}/reject", expect=200, id=cid)
    check(ana.candidates() == [], "a rejected candidate stayed in the queue")
    check(ana.recalled(p["query"]) == [], "a rejected candidate was recalled")
    late = ana.post("/v1/candidates/{id}/confirm", {}, id=cid)  # no longer a candidate: 404 or 409, never a memory
    check(late.status_code in (404, 409) and late.json().get("code"), f"confirm after reject answered {late.status_code}")


def sensitive_ack(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    got = ana.remember(p["text"], expect=202)
    check(got["status"] == "pending_review" and got["review"] == "sensitive", f"not held as sensitive: {got['status']}")
    check(ana.recalled(p["query"]) == [], "a sensitive fact was recalled before review")
    ana.post("/v1/candidates/{id}/confirm", {}, expect=409, code="sensitive_ack_required", id=got["id"])
    memory = ana.post("/v1/candidates/{id}/confirm", {"acknowledge_sensitive": True}, expect=200, id=got["id"])
    check(memory["status"] == "confirmed" and memory["text"] == p["text"], "not confirmed as said")
    check(ids(ana.recalled(p["query"])) == [memory["id"]], "the acknowledged memory is not recalled")


# ---------------------------------------------------------------- recall

def recall_with_evidence(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    source = ctx.source()
    memory = ana.remember(p["text"], source, occurred_at=p["occurred_at"])
    [item] = ana.recalled(p["query"])
    check(item["id"] == memory["id"] and item["kind"] == "memory" and item["text"] == p["text"], "wrong item")
    [evidence] = item["evidence"]
    check(evidence["quote"] == p["text"] and evidence["source"] == source, "evidence is not the message")
    check(instant(evidence["occurred_at"]) == instant(p["occurred_at"]), "evidence time moved")
    check(item["revision"] == 1 and isinstance(item["score"], (int, float)), "revision or score missing")


def recall_byte_budget(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    long_text = (p["sentence"] * p["repeat"]).strip()
    ana.remember(long_text)
    ana.remember(p["short"])
    whole = ana.recall(p["query"])
    check(sorted(texts(whole["items"])) == sorted([long_text, p["short"]]), "default max_bytes did not return both whole")
    cut = ana.recall(p["query"], max_bytes=p["max_bytes"])
    check(cut["bytes"] <= p["max_bytes"], f"bytes {cut['bytes']} over max_bytes")
    truncated = [i for i in cut["items"] if i.get("truncated")]
    check(len(truncated) >= 1, "no item is marked truncated")
    check(all(long_text.startswith(i["text"]) or p["short"].startswith(i["text"]) for i in truncated),
          "a truncated text is not a prefix of the memory")
    check(len(cut["items"]) + cut.get("omitted", 0) == 2, "an item was left out without being counted")


def recall_use_paused(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    memory = ana.remember(p["text"])
    ana.put("/v1/settings", {"learning_paused": False, "use_paused": True}, expect=200)
    paused = ana.recall(p["query"])
    check(paused["items"] == [] and paused.get("paused") is True, "recall served while use was paused")
    ana.put("/v1/settings", {"learning_paused": False, "use_paused": False}, expect=200)
    check(ids(ana.recalled(p["query"])) == [memory["id"]], "resuming did not serve the memory again")


def recall_tags(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    tagged = ana.remember(p["tagged"], tags=p["tags"])
    other = ana.remember(p["other"], tags=p["tags"][:1])
    check(ids(ana.recalled(p["query"], tags=p["tags"])) == [tagged["id"]], "tags did not filter to all of them")
    check(sorted(ids(ana.recalled(p["query"], tags=p["tags"][:1]))) == sorted([tagged["id"], other["id"]]),
          "one tag did not match both")


# ---------------------------------------------------------------- correct

def correct_replace(ctx: Ctx, p: Json) -> None:
    ana = ctx.person("ana")
    memory = ana.remember(p["text"])
    body = {"text": p["corrected"], "reason": "said again differently"}
    if p["source"]:
        body["source"] = {**p["source"], "id": p["source"]["id"] + "-" + ctx.tag}
    fixed = ana.post("/v1/memories/{id}/correct", body, expect=200, id=memory["id"])
    check(fixed["revision"] == 2 and fixed["text"] == p["corrected"], "not revision 2 with the new text")
    history = ana.get("/v1/memories/{id}/history", expect=200, id=memory["id"])["events"]
    said = [e["text"] for e in history]
    check(p["text"] in said and p["corrected"] in said, "history lost a revision's text")
    check([e["revision"] for e in history][-1] == 2, "history does not end at revision 2")
    [item] = ana.recalled(p["query"])
    check(item["text"] == p["corrected"] and item["revision"] == 2, "recall serves the replaced text")
    [evidence] = item["evidence"]
    check(p["text"] not in (evidence["quote"] or ""), "the current evidence quotes the replaced text")
    expected = body.get("source") or {"kind": "correction", "id": "ana"}
    check(all(evidence["source"].get(k) == v for k, v in expected.items()), f"evidence source {evidence['source']}")


def correct_supersede(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    memory = ana.remember(p["text"], valid_from=p["valid_from"])
    ana.post("/v1/memories/{id}/correct", {"text": p["corrected"], "valid_from": p["changed_from"]}, expect=200,
             id=memory["id"])
    [now] = ana.recalled(p["query"])
    check(now["text"] == p["corrected"] and now["revision"] == 2, "now does not answer the new text")
    check(instant(now["valid_from"]) == instant(p["changed_from_utc"]), "the new revision's valid_from moved")
    [then] = ana.recalled(p["query"], as_of=p["before"])
    check(then["text"] == p["text"] and then["revision"] == 1, "as_of before the change is not the old text")
    check(instant(then["valid_to"]) == instant(p["changed_from_utc"]), "the old revision's valid_to is not the change")


# ---------------------------------------------------------------- forget

def _unusable(ana: Who, memory_id: str, query: str) -> None:
    check(memory_id not in ids(ana.recalled(query)), "a forgotten memory was recalled")
    got = ana.get("/v1/memories/{id}", id=memory_id)
    check(got.status_code == 404 or (got.status_code == 200 and got.json()["status"] == "forgotten"
                                     and got.json()["text"] is None), "a forgotten memory still shows its text")


def forget_one(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    memory = ana.say_and_confirm(p["text"]) if p["learned"] else ana.remember(p["text"])
    check(ids(ana.recalled(p["query"])) == [memory["id"]], "not recalled before the forget")
    got = ana.post("/v1/memories/{id}/forget", expect=202, id=memory["id"])
    check(got["status"] == "stopped_using", "forget did not answer stopped_using")
    _unusable(ana, memory["id"], p["query"])  # at once, in the next request
    history = ana.get("/v1/memories/{id}/history", expect=200, id=memory["id"])["events"]
    check(history and all(e["text"] is None for e in history), "history kept text after the forget")
    done = ana.forget_done(got["forget_id"])
    copies = {c["copy"]: c for c in done["copies"]}
    check({"event_store", "recall_view", "review_queue", "inbox"} <= copies.keys(), f"copies {sorted(copies)}")
    check(all(c["state"] == "purged" and c["evidence"] for c in copies.values()), "a copy lacks purge evidence")
    _unusable(ana, memory["id"], p["query"])
    check(got["forget_id"] in [f["forget_id"] for f in ana.get("/v1/forgets", expect=200)["items"]],
          "the forget is not listed")


def forget_by_source(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    garden = ctx.source("garden")
    kept = ana.remember(p["elsewhere"])
    gone = [ana.remember(t, {**garden, "message_id": f"m-{i}"})["id"] for i, t in enumerate(p["on_source"])]
    got = ana.post("/v1/memories/forget", {"source_id": garden["id"]}, expect=202)
    check(len(got["forget_ids"]) == len(gone), f"{len(got['forget_ids'])} forgets for {len(gone)} memories")
    check(ids(ana.recalled(p["query"])) == [kept["id"]], "recall is not only the other source's memory")
    listed = [f["forget_id"] for f in ana.get("/v1/forgets", expect=200)["items"]]
    check(set(got["forget_ids"]) <= set(listed), "a forget is not listed")
    for forget_id in got["forget_ids"]:
        ana.forget_done(forget_id)


def forget_me(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    bob = ctx.person("bob")
    memory = ana.remember(p["memory"])
    ana.learned(ana.say(p["message"]))
    bobs = bob.remember(p["memory"])
    got = ana.post("/v1/me/forget", expect=202)
    # API.md names stopped_using; the service answers the forget's status, which may already be complete
    check(got["status"] in ("stopped_using", "purge_complete"), f"the account forget answered {got['status']}")
    check(ana.recalled(p["query"]) == [] and ana.candidates() == [], "the person's memories or candidates remain")
    check(ana.get("/v1/memories", expect=200)["items"] == [], "the list still holds memories")
    _unusable(ana, memory["id"], p["query"])
    ana.forget_done(got["forget_id"])
    check(ids(bob.recalled(p["query"])) == [bobs["id"]], "another person's memory went too")


def revoke_source(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    club = ctx.source("club")
    revoked = ana.remember(p["on_source"], club)
    kept = ana.remember(p["elsewhere"])
    check(sorted(ids(ana.recalled(p["query"]))) == sorted([revoked["id"], kept["id"]]), "not both recalled first")
    ana.post("/v1/sources/{source_id}/revoke", expect=202, source_id=club["id"])
    check(ids(ana.recalled(p["query"])) == [kept["id"]], "the revoked source's memory is still recalled")
    ana.post("/v1/memories", {"text": p["on_source"] + " again", "explicit": True,
                              "source": {**club, "message_id": "m-later"}}, expect=409, code="source_revoked")


# ---------------------------------------------------------------- isolation

def _directory(ctx: Ctx, document: Json, company: str | None = None) -> None:
    ctx.admin(company).put("/v1/admin/directory", document, expect=200)


def other_company(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    memory = ana.remember(p["text"])
    _directory(ctx, {"bots": {"b-helper": {}}})
    _directory(ctx, {"bots": {"b-helper": {}}}, ctx.company("rival"))
    own_bot = ctx.person(bot="b-helper", role="bot", entry="channel")
    check(ids(own_bot.recalled(p["query"])) == [memory["id"]], "the company's own bot does not recall it")
    for who in (ctx.person(company=ctx.company("rival"), role="bot", bot="b-helper", entry="channel"),
                ctx.person(company=ctx.company("rival"))):  # the same names, in another company
        who.get("/v1/memories/{id}", expect=404, code="not_found", id=memory["id"])
        who.get("/v1/memories/{id}/history", expect=404, id=memory["id"])
        who.post("/v1/memories/{id}/correct", {"text": "changed"}, expect=404, id=memory["id"])
        who.post("/v1/memories/{id}/forget", expect=404, id=memory["id"])
        check(who.recalled(p["query"]) == [], "another company recalled the memory")
    check(ana.get("/v1/memories/{id}", expect=200, id=memory["id"])["revision"] == 1, "the memory changed")


def other_person(ctx: Ctx, p: Json) -> None:
    ana, bob = ctx.person("ana"), ctx.person("bob")
    memory = ana.remember(p["text"])
    [cid] = ana.learned(ana.say(p["message"]))
    bob.get("/v1/memories/{id}", expect=404, code="not_found", id=memory["id"])
    bob.post("/v1/memories/{id}/forget", expect=404, id=memory["id"])
    bob.post("/v1/candidates/{id}/confirm", {}, expect=404, id=cid)
    check(bob.recalled(p["query"]) == [] and bob.candidates() == [], "another person saw the memory or candidate")
    ctx.admin().get("/v1/memories/{id}", expect=404, id=memory["id"])  # an admin reads no one's memories
    check(ids(ana.recalled(p["query"])) == [memory["id"]] and ids(ana.candidates()) == [cid], "the owner lost them")


def team_removal(ctx: Ctx, p: Json) -> None:
    directory = {"teams": {"t-ops": {"members": ["ana", "bob"]}},
                 "sources": {"s-wiki": {"team": "t-ops", "members": ["ana", "bob"]}}}
    _directory(ctx, directory)
    ana, bob = ctx.person("ana"), ctx.person("bob")
    memory = ana.remember(p["text"], {"kind": "wiki", "id": "s-wiki", "message_id": "m-1"},
                          visibility="restricted", team="t-ops")
    check(memory["visibility"] == "restricted" and memory["team"] == "t-ops", "not stored as restricted")
    check(ids(ana.recalled(p["query"])) == [memory["id"]], "not recalled while in the source")
    check(bob.recalled(p["query"]) == [], "a restricted memory is someone else's too")
    directory["sources"]["s-wiki"]["members"] = ["bob"]
    _directory(ctx, directory)
    check(ana.recalled(p["query"]) == [], "still recalled after leaving the source")
    directory["sources"]["s-wiki"]["members"] = ["ana", "bob"]
    _directory(ctx, directory)
    check(ids(ana.recalled(p["query"])) == [memory["id"]], "not recalled again after rejoining")


def bot_sources(ctx: Ctx, p: Json) -> None:
    _directory(ctx, {"teams": {"t-sales": {"members": ["ana"]}},
                     "sources": {"s-crm": {"team": "t-sales", "members": ["ana"]}},
                     "bots": {"b-crm": {"teams": ["t-sales"], "sources": ["s-crm"]}, "b-chat": {}}})
    ana = ctx.person()
    restricted = ana.remember(p["restricted"], {"kind": "crm", "id": "s-crm", "message_id": "m-1"},
                              visibility="restricted", team="t-sales")
    general = ana.remember(p["general"])
    crm = ctx.person(role="bot", bot="b-crm", entry="channel")
    chat = ctx.person(role="bot", bot="b-chat", entry="channel")
    check(sorted(ids(crm.recalled(p["query"]))) == sorted([restricted["id"], general["id"]]), "b-crm misses one")
    check(ids(chat.recalled(p["query"])) == [general["id"]], "b-chat recalls beyond its sources")
    chat.get("/v1/memories/{id}", expect=404, id=restricted["id"])


def unregistered_bot(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    memory = ana.remember(p["text"])
    ghost = ctx.person(role="bot", bot="b-ghost", entry="channel")

    def refused() -> None:
        ghost.post("/v1/memories", {"text": p["text"] + " too", "explicit": True, "source": ctx.source()},
                   expect=403, code="bot_not_registered")
        ghost.post("/v1/receipts", {"receipt_id": "r-" + uuid.uuid4().hex[:8], "author": "user", "text": p["text"],
                                    "source": ctx.source()}, expect=403, code="bot_not_registered")
        check(ghost.recalled(p["query"]) == [], "an unregistered bot recalled a memory")

    refused()
    _directory(ctx, {"bots": {"b-ghost": {}}})
    check(ids(ghost.recalled(p["query"])) == [memory["id"]], "a registered bot does not recall the general memory")
    _directory(ctx, {"bots": {}})
    refused()
    check(len(ana.get("/v1/memories", expect=200)["items"]) == 1, "a refused bot stored something")


# ---------------------------------------------------------------- time

def valid_window(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    memory = ana.remember(p["text"], valid_from=p["valid_from"], valid_to=p["valid_to"])
    check(ana.recalled(p["query"]) == [], "a memory valid only in the past was recalled now")
    [item] = ana.recalled(p["query"], as_of=p["inside"])
    check(item["id"] == memory["id"] and instant(item["valid_to"]) == instant(p["valid_to"]), "window not kept")
    check(ana.recalled(p["query"], as_of=p["valid_to"]) == [], "recalled at its valid_to (the end is exclusive)")


def extreme_times(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    memory = ana.remember(p["text"])
    for value in p["values"]:
        for field in ("valid_from", "valid_to", "occurred_at"):
            ana.post("/v1/memories", {"text": p["text"] + " " + field, "explicit": True, "source": ctx.source(),
                                      field: value}, expect=422, code="invalid_time")
        ana.post("/v1/memories/{id}/correct", {"text": p["text"] + "!", "valid_from": value}, expect=422,
                 code="invalid_time", id=memory["id"])
        ana.post("/v1/receipts", {"receipt_id": "r-" + uuid.uuid4().hex[:8], "author": "user", "text": p["text"],
                                  "occurred_at": value, "source": ctx.source()}, expect=422, code="invalid_time")
        ana.post("/v1/recall", {"query": p["query"], "as_of": value}, expect=422, code="invalid_time")
    check(ids(ana.get("/v1/memories", expect=200)["items"]) == [memory["id"]], "a refused time stored a memory")
    check(ana.get("/v1/memories/{id}", expect=200, id=memory["id"])["revision"] == 1, "a refused correction applied")


def edge_times(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    early = ana.remember(p["early"], valid_from=p["early_from"])
    late = ana.remember(p["late"], valid_from=p["late_from"])
    check(instant(ana.get("/v1/memories/{id}", expect=200, id=early["id"])["valid_from"]) == instant(p["early_from"]),
          "1900-01-01 did not read back")
    check(instant(ana.get("/v1/memories/{id}", expect=200, id=late["id"])["valid_from"]) == instant(p["late_from_utc"]),
          "the 2199 edge did not read back")
    check(ids(ana.recalled(p["early_query"], as_of=p["early_as_of"])) == [early["id"]], "not recalled as of 1950")
    check(ids(ana.recalled(p["late_query"], as_of=p["late_as_of"])) == [late["id"]], "not recalled as of 2199")
    check(ana.recalled(p["late_query"]) == [], "a memory valid from 2199 was recalled now")


def offset_evidence(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    [cid] = ana.learned(ana.say(p["message"], occurred_at=p["occurred_at"]))
    [candidate] = [c for c in ana.candidates() if c["id"] == cid]
    [evidence] = candidate["evidence"]
    check(instant(evidence["occurred_at"]) == instant(p["utc"]), f"evidence time {evidence['occurred_at']}")
    check(evidence["quote"] in p["message"], "the quote is not the message's words")


# ---------------------------------------------------------------- insights

def _proposed_insight(ctx: Ctx, ana: Who, said: list[str]) -> tuple[Json, list[str]]:
    memories = [ana.remember(text)["id"] for text in said]
    insight = ctx.wait(lambda: ana.get("/v1/insights", expect=200, params={"status": "proposed"})["items"],
                       "a proposed insight")
    check(len(insight) == 1, f"{len(insight)} insights proposed")
    check(sorted(insight[0]["evidence_memory_ids"]) == sorted(memories), "the insight rests on other memories")
    check(sorted(e["quote"] for e in insight[0]["evidence"]) == sorted(said), "the insight's quotes are not the words")
    return insight[0], memories


def insight_confirmed(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    ana.remember(p["unrelated"])
    insight, memories = _proposed_insight(ctx, ana, p["said"])
    check(all(i["kind"] == "memory" for i in ana.recalled(p["query"])), "a proposed insight was recalled")
    confirmed = ana.post("/v1/insights/{id}/confirm", expect=200, id=insight["id"])
    check(confirmed["status"] == "confirmed", "not confirmed")
    found = [i for i in ana.recalled(p["query"]) if i["kind"] == "insight"]
    check(ids(found) == [insight["id"]], "the confirmed insight is not recalled")
    check(sorted(e["quote"] for e in found[0]["evidence"]) == sorted(p["said"]), "recalled without its evidence")
    ctx.person("bob").post("/v1/insights/{id}/reject", expect=404, id=insight["id"])


def insight_invalidated(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    insight, memories = _proposed_insight(ctx, ana, p["said"])
    ana.post("/v1/insights/{id}/confirm", expect=200, id=insight["id"])
    check([i["kind"] for i in ana.recalled(p["query"])].count("insight") == 1, "not recalled once confirmed")
    ana.post("/v1/memories/{id}/forget", expect=202, id=memories[0])
    check(not [i for i in ana.recalled(p["query"]) if i["kind"] == "insight"], "still recalled after the forget")
    [after] = [i for i in ana.get("/v1/insights", expect=200)["items"] if i["id"] == insight["id"]]
    check(after["status"] == "invalidated", f"status {after['status']}")
    ana.post("/v1/insights/{id}/confirm", expect=409, code="insight_invalidated", id=insight["id"])


# ---------------------------------------------------------------- budgets (the service with the fake model)

def _call_limit(ctx: Ctx, company: str | None = None) -> int:
    budget = ctx.admin(company).get("/v1/admin/status", expect=200)["budget_today"]
    check(budget["calls"] == 0, "a fresh company has spent budget already")
    return int(budget["call_limit"])


def _exhaust(ctx: Ctx, ana: Who, messages: list[str], company: str | None = None) -> tuple[list[str], list[str]]:
    """Say every message; the receipts learned from (exactly the call limit) and those left deferred."""
    limit = _call_limit(ctx, company)
    check(len(messages) > limit, f"the daily call limit {limit} is more than this scenario can spend")
    model = ctx.service.model
    for text in messages:
        model.proposals[text] = [{"text": text.rstrip("."), "quote": text}]
    rids = [ana.say(text) for text in messages]

    def states() -> list[str] | None:
        got = [ana.get("/v1/receipts/{rid}", expect=200, rid=rid)["state"] for rid in rids]
        return got if got.count("done") >= limit else None
    ctx.wait(states, "the receipts within budget to be learned from")
    time.sleep(1.5)  # several worker turns: a receipt over budget must stay deferred
    final = [ana.get("/v1/receipts/{rid}", expect=200, rid=rid) for rid in rids]
    done = [r for r, s in zip(rids, final, strict=True) if s["state"] == "done"]
    deferred = [r for r, s in zip(rids, final, strict=True) if s["state"] == "deferred" and s["reason"] == "budget"]
    check(len(done) == limit and len(deferred) == len(rids) - limit, f"{len(done)} done, {len(deferred)} deferred "
          f"for the budget, limit {limit}")
    spent = ctx.admin(company).get("/v1/admin/status", expect=200)["budget_today"]
    check(spent["calls"] == limit, f"{spent['calls']} calls charged for a limit of {limit}")
    called = {m["content"] for c in model.calls for m in c.get("messages", []) if m.get("role") == "user"}
    check(len(called & set(messages)) == limit, "the model was called past the budget")
    return done, deferred


def budget_exhausted(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    names = [f"{n} {ctx.tag}" for n in p["names"]]
    messages = [p["template"].format(n) for n in names[:_call_limit(ctx) + 2]]
    done, _deferred = _exhaust(ctx, ana, messages)
    check(len(ana.candidates()) == len(done), "the receipts within budget did not all become candidates")


def budget_explicit(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    _exhaust(ctx, ana, [p["template"].format(f"{i}-{ctx.tag}") for i in range(_call_limit(ctx) + 1)])
    memory = ana.remember(p["text"])
    ana.post("/v1/memories/{id}/correct", {"text": p["corrected"]}, expect=200, id=memory["id"])
    check(texts(ana.recalled(p["query"])) == [p["corrected"]], "the corrected memory is not recalled")
    ana.post("/v1/memories/{id}/forget", expect=202, id=memory["id"])
    check(ana.recalled(p["query"]) == [], "recalled after the forget")


def budget_per_company(ctx: Ctx, p: Json) -> None:
    ana = ctx.person()
    names = [f"{n} {ctx.tag}" for n in p["names"]]
    _exhaust(ctx, ana, [p["template"].format(n) for n in names[:_call_limit(ctx) + 1]])
    other_company = ctx.company("other")
    _call_limit(ctx, other_company)
    bea = ctx.person("bea", other_company)
    text = p["other"].replace("orange", f"orange {ctx.tag}")
    ctx.service.model.proposals[text] = [{"text": text.rstrip("."), "quote": text}]
    bea.learned(bea.say(text))
    check(texts(bea.candidates()) == [text.rstrip(".")], "the other company did not learn")


# ---------------------------------------------------------------- restore (a generator: the runner backs up and restores)

def restore_fence(ctx: Ctx, p: Json) -> Iterator[str]:
    ana = ctx.person()
    memory = ana.remember(p["text"])
    yield BACKUP
    forget = ana.post("/v1/memories/{id}/forget", expect=202, id=memory["id"])
    backups = {c["copy"]: c for c in ana.get("/v1/forgets/{forget_id}", expect=200,
                                             forget_id=forget["forget_id"])["copies"]}["backups"]
    check(backups["state"] == "pending", "the backups copy is not pending while a backup holds the memory")
    yield RESTORE
    _unusable(ana, memory["id"], p["query"])
    status = ana.get("/v1/forgets/{forget_id}", expect=200, forget_id=forget["forget_id"])
    check(status["status"] == "stopped_using", "a forget whose backup is kept reports purge_complete")


def restore_point_in_time(ctx: Ctx, p: Json) -> Iterator[str]:
    ana = ctx.person()
    source = ctx.source()
    before = ana.remember(p["before"], source)
    yield BACKUP
    after = ana.remember(p["after"])
    yield RESTORE
    [item] = [i for i in ana.recalled(p["query"]) if i["id"] == before["id"]]
    check(item["text"] == p["before"] and item["evidence"][0]["source"] == source, "restored without its evidence")
    ana.get("/v1/memories/{id}", expect=404, id=after["id"])


def restore_fence_person(ctx: Ctx, p: Json) -> Iterator[str]:
    ana = ctx.person()
    memories = [ana.remember(text)["id"] for text in p["texts"]]
    check(len(ana.recalled(p["query"])) == len(memories), "not recalled before the backup")
    yield BACKUP
    ana.post("/v1/me/forget", expect=202)
    yield RESTORE
    check(ana.recalled(p["query"]) == [], "a forgotten person's memory came back with the backup")
    check(ana.get("/v1/memories", expect=200)["items"] == [], "the list holds a forgotten person's memories")
    for memory_id in memories:
        _unusable(ana, memory_id, p["query"])


STEPS: dict[str, Callable[[Ctx, Json], Any]] = {f.__name__: f for f in (
    receipt_to_candidate, conversation_batch, secret_refused, explicit_idempotent,
    confirm_candidate, reject_candidate, sensitive_ack,
    recall_with_evidence, recall_byte_budget, recall_use_paused, recall_tags,
    correct_replace, correct_supersede,
    forget_one, forget_by_source, forget_me, revoke_source,
    other_company, other_person, team_removal, bot_sources, unregistered_bot,
    valid_window, extreme_times, edge_times, offset_evidence,
    insight_confirmed, insight_invalidated,
    budget_exhausted, budget_explicit, budget_per_company,
    restore_fence, restore_point_in_time, restore_fence_person)}
