"""The person reviews what bots may use: a bot token confirming, rejecting or editing a candidate or an
insight gets 403 `person_only`, decided before its body is read, and nothing is written."""

from __future__ import annotations

from tests.support.helpers import auth, is_problem, put_directory, remember_body, stored_events


def test_a_bot_never_reviews_for_its_person(engram, client) -> None:
    put_directory(client, {"bots": {"b-helper": {}}})
    me = auth()
    candidate = client.post("/v1/memories", json=remember_body("My blood pressure medication is at 8am"),
                            headers=me).json()
    assert candidate["status"] == "pending_review"
    for text in ("Risks come first in every report", "Remember: risks first, always"):
        assert client.post("/v1/memories", json=remember_body(text), headers=me).status_code == 201
    assert engram.insights.propose_due() == 1
    [insight] = client.get("/v1/insights", headers=me).json()["items"]
    before = stored_events(engram)
    for bot in (auth(role="bot", bot="b-helper"), auth(role="bot", bot="b-rogue")):  # registered or not
        for path, body in ((f"/v1/candidates/{candidate['id']}/confirm", {"acknowledge_sensitive": True}),
                           (f"/v1/candidates/{candidate['id']}/confirm", {"text": "edited by the bot"}),
                           (f"/v1/candidates/{candidate['id']}/confirm", {"text": 42, "bogus": True}),  # bad body
                           (f"/v1/candidates/{candidate['id']}/reject", None),
                           ("/v1/candidates/not-a-uuid/reject", None),
                           (f"/v1/insights/{insight['id']}/confirm", None),
                           (f"/v1/insights/{insight['id']}/reject", None)):
            is_problem(client.post(path, json=body, headers=bot), 403, "person_only")
    assert stored_events(engram) == before
    # the person still reviews both
    r = client.post(f"/v1/candidates/{candidate['id']}/confirm", json={"acknowledge_sensitive": True}, headers=me)
    assert r.status_code == 200 and r.json()["status"] == "confirmed"
    assert client.post(f"/v1/insights/{insight['id']}/confirm", headers=me).json()["status"] == "confirmed"
    # an administrative token holds no memories: refused as before
    is_problem(client.post(f"/v1/insights/{insight['id']}/reject", headers=auth(user="root", role="admin")),
               403, "forbidden")
