"""Forty frozen scenarios over HTTP, each run several times, with a JSON report of what was exercised.

    .venv/bin/python -m bench.scenarios [--runs 3] [--only ID_OR_AREA,...] [--out FILE]
    .venv/bin/python -m bench.scenarios --url http://127.0.0.1:8080 --token-secret SECRET [--runs 3]
    .venv/bin/python -m bench.scenarios --url http://127.0.0.1:8080 --token-command "engram token" [--runs 3]

The scenarios (bench/data/scenarios/scenarios.json: id, area, one-line purpose, step, parameters) cover
capture, review, recall, correct, forget, isolation (companies, teams, sources, bots), time, insights,
budgets and restore; their steps (bench/scenario_steps.py) drive API.md's endpoints and check what a
client can observe. Every run of a scenario uses companies and people of its own, so its runs are
independent of each other and of whatever else the service holds.

Without `--url` the program starts two `engram serve` on the embedded default in a temporary
directory (bench/harness.py): one as shipped (rule-based extraction, SQL recall), with quick background
intervals, for everything but budgets and restore; and one whose model is the suite's fake
OpenAI-compatible server (tests/support/fake_llm.py) with a daily budget of `--daily-calls` model calls per
company, for the budget scenarios and for the restore scenarios, which back it up with `engram backup`,
stop it, `engram restore` and start it again (once a run, for all of them together).
With `--url` it drives that service, signing tokens with `--token-secret` (or ENGRAM_TOKEN_SECRET), or
asking `--token-command` for each (run with `--company C --user U --role R --entry E [--bot B]` added,
it prints one, as `engram token` does in the service's environment); budgets and restore are then
reported as not exercised, with the reason.

The report (printed, and written to `--out`) gives per scenario its id, area, purpose, the result of each
run (`passed`, `failed` or `not_exercised`), the reason of each failure, the endpoints it exercised and
the reason it was not exercised; a summary with the counts per area and in total and the time taken;
and the endpoints of the service's /openapi.json that no scenario exercised. Exit status 1 when any run
failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from engram.api.identity import issue_token

from bench.harness import ROOT, EmbeddedServe
from bench.scenario_steps import BACKUP, RESTORE, STEPS, Ctx, Failed, Service

DATA = ROOT / "bench" / "data" / "scenarios" / "scenarios.json"
MODEL_AREAS = ("budgets", "restore")  # the areas served by the second service
NOT_WITH_URL = {
    "budgets": "needs a service whose model is this program's fake with a small daily call budget "
               "(the service given with --url has its own model and budgets)",
    "restore": "needs the CLI and the service's database: `engram backup`, stopping the service and "
               "`engram restore` on its data (run without --url)",
}
PASSED, FAILED, NOT_EXERCISED = "passed", "failed", "not_exercised"


def load(only: list[str]) -> list[dict[str, Any]]:
    scenarios = json.loads(DATA.read_text(encoding="utf-8"))["scenarios"]
    unknown = sorted({s["step"] for s in scenarios} - STEPS.keys())
    if unknown:
        raise SystemExit(f"steps not defined in bench/scenario_steps.py: {unknown}")
    if only:
        scenarios = [s for s in scenarios if s["id"] in only or s["area"] in only]
    return scenarios


def signer(secret: str) -> Callable[..., str]:
    def make_token(*, company: str, user: str, role: str, bot: str | None, entry: str) -> str:
        return issue_token(secret, company=company, user=user, role=role, bot=bot, entry=entry)
    return make_token


def token_command(command: str) -> Callable[..., str]:
    """Tokens from a command such as `engram token`, with the claims as its options; each asked once."""
    made: dict[tuple[str, ...], str] = {}

    def make_token(*, company: str, user: str, role: str, bot: str | None, entry: str) -> str:
        claims = ("--company", company, "--user", user, "--role", role, "--entry", entry,
                  *(("--bot", bot) if bot else ()))
        if claims not in made:
            done = subprocess.run([*shlex.split(command), *claims], capture_output=True, text=True, timeout=60)
            if done.returncode != 0 or not done.stdout.strip():
                raise Failed(f"the token command failed: {done.stderr.strip()[-300:]}")
            made[claims] = done.stdout.strip().splitlines()[-1]
        return made[claims]
    return make_token


@contextmanager
def own_services(tmp: Path, daily_calls: int) -> Iterator[dict[str, Service]]:
    """The shipped service and the fake-model one, on the embedded default. The second starts in the
    background while the first serves its scenarios; `Service.ready` waits for it."""
    from tests.support.fake_llm import FakeLLM  # the suite's fake model

    secret = "scenarios-" + uuid.uuid4().hex * 2
    quick = {"ENGRAM_WORKER_INTERVAL": "0.2", "ENGRAM_POLL_INTERVAL": "0.2"}
    model = FakeLLM().start()
    plain = EmbeddedServe(tmp / "shipped", secret, **quick)
    modelled = EmbeddedServe(tmp / "model", secret, **quick, ENGRAM_LLM_BASE_URL=model.url,
                             ENGRAM_LLM_MODEL="fake", ENGRAM_DAILY_CALLS=str(daily_calls),
                             ENGRAM_PERSON_DAILY_CALLS=str(daily_calls))
    errors: list[BaseException] = []

    def start_modelled() -> None:
        try:
            modelled.start()
        except BaseException as exc:  # noqa: BLE001 - raised by `ready`, in the main thread
            errors.append(exc)

    starting = threading.Thread(target=start_modelled)

    def ready() -> None:
        starting.join()
        if errors:
            raise errors[0]

    backups = tmp / "backups"
    taken: list[Path] = []

    def backup() -> None:
        taken.append(backups / f"b{len(taken) + 1}")
        done = modelled.command("backup", str(taken[-1]))
        if done.returncode != 0:
            raise Failed(f"engram backup failed: {done.stderr[-300:]}")

    def restore() -> None:
        modelled.stop()
        try:
            done = modelled.command("restore", str(taken[-1]))
            if done.returncode != 0:
                raise Failed(f"engram restore failed: {done.stderr[-300:]}")
        finally:
            modelled.start()

    services: dict[str, Service] = {}
    try:
        plain.start()
        starting.start()  # after the first: two clusters initialised at once each take twice as long
        make_token = signer(secret)
        services = {"shipped": Service(plain.url, make_token),
                    "model": Service(modelled.url, make_token, model=model, backup=backup, restore=restore,
                                     ready=ready)}
        yield services
    finally:
        if starting.ident is not None:
            starting.join()
        for service in services.values():
            service.close()
        plain.stop()
        modelled.stop()
        model.stop()


class Outcome:
    def __init__(self, scenario: dict[str, Any]) -> None:
        self.scenario = scenario
        self.results: list[str] = []
        self.failures: list[dict[str, Any]] = []
        self.seconds: list[float] = []
        self.endpoints: set[str] = set()
        self.not_exercised: str | None = None

    def record(self, run: int, ctx: Ctx, error: BaseException | None, seconds: float) -> None:
        self.endpoints |= ctx.endpoints
        self.seconds.append(round(seconds, 2))
        if error is None:
            self.results.append(PASSED)
        else:
            self.results.append(FAILED)
            why = str(error) if isinstance(error, Failed) else f"{type(error).__name__}: {error}"
            self.failures.append({"run": run, "reason": why[:500]})

    def as_json(self) -> dict[str, Any]:
        s = self.scenario
        return {"id": s["id"], "area": s["area"], "purpose": s["purpose"], "results": self.results,
                "failures": self.failures, "endpoints": sorted(self.endpoints), "seconds": self.seconds,
                "not_exercised_reason": self.not_exercised}


def run_plain(outcome: Outcome, service: Service, run: int) -> None:
    ctx = Ctx(service, uuid.uuid4().hex[:10])
    started = time.perf_counter()
    error: BaseException | None = None
    try:
        STEPS[outcome.scenario["step"]](ctx, outcome.scenario["params"])
    except Exception as exc:  # noqa: BLE001 - a scenario's failure is its result, the others still run
        error = exc
    outcome.record(run, ctx, error, time.perf_counter() - started)


def run_restores(outcomes: list[Outcome], service: Service, run: int) -> dict[str, Any]:
    """Every restore scenario up to its BACKUP, one backup, each up to RESTORE, one restore, each to its end;
    how long the backup and the restore (stop, `engram restore`, start) took."""
    live: list[tuple[Outcome, Ctx, Iterator[str], list[Any]]] = []  # outcome, ctx, steps, [error, seconds]
    for outcome in outcomes:
        ctx = Ctx(service, uuid.uuid4().hex[:10])
        live.append((outcome, ctx, STEPS[outcome.scenario["step"]](ctx, outcome.scenario["params"]), [None, 0.0]))

    def advance(expected: str | None) -> None:
        for _outcome, _ctx, steps, state in live:
            if state[0] is not None:
                continue
            started = time.perf_counter()
            try:
                got = next(steps, None)
                if got != expected:
                    raise Failed(f"the step yielded {got!r} where {expected!r} was due")
            except Exception as exc:  # noqa: BLE001 - recorded as this scenario's failure
                state[0] = exc
            state[1] += time.perf_counter() - started

    def everyone(action: Callable[[], None]) -> float:
        started = time.perf_counter()
        try:
            action()
        except Exception as exc:  # noqa: BLE001 - the backup or restore failed: every scenario waiting on it did
            for _outcome, _ctx, _steps, state in live:
                state[0] = state[0] or exc
        return round(time.perf_counter() - started, 1)

    advance(BACKUP)
    assert service.backup is not None and service.restore is not None
    backup_seconds = everyone(service.backup)
    advance(RESTORE)
    restore_seconds = everyone(service.restore)
    advance(None)
    for outcome, ctx, _steps, (error, seconds) in live:
        outcome.record(run, ctx, error, seconds)
    return {"run": run, "backup_seconds": backup_seconds, "restore_seconds": restore_seconds}


def ready(service: Service) -> float:
    """Wait until the service has started; how long that took."""
    started = time.perf_counter()
    service.ready()
    return time.perf_counter() - started


def openapi_endpoints(service: Service) -> set[str]:
    spec = service.http.get("/openapi.json").json()
    return {f"{method.upper()} {path}" for path, ops in spec.get("paths", {}).items() for method in ops
            if method in ("get", "post", "put", "delete", "patch") and path.startswith("/v1/")}


def shape(endpoint: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", endpoint)


def summarize(outcomes: list[Outcome], seconds: float) -> dict[str, Any]:
    def counts(selected: list[Outcome]) -> dict[str, int]:
        results = [r for o in selected for r in o.results]
        return {"scenarios": len(selected), PASSED: results.count(PASSED), FAILED: results.count(FAILED),
                NOT_EXERCISED: results.count(NOT_EXERCISED)}
    areas = list(dict.fromkeys(o.scenario["area"] for o in outcomes))
    return {"total": counts(outcomes),
            "per_area": {a: counts([o for o in outcomes if o.scenario["area"] == a]) for a in areas},
            "scenarios_passing_every_run": sum(1 for o in outcomes if o.results and set(o.results) == {PASSED}),
            "seconds": round(seconds, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated scenario ids or areas")
    parser.add_argument("--url", help="drive this running service instead of starting one")
    parser.add_argument("--token-secret", default=os.environ.get("ENGRAM_TOKEN_SECRET"),
                        help="with --url: the service's ENGRAM_TOKEN_SECRET, to sign tokens")
    parser.add_argument("--token-command", help="with --url: a command printing a token for the options it is given")
    parser.add_argument("--daily-calls", type=int, default=3, help="the fake-model service's daily call budget")
    parser.add_argument("--out", type=Path, help="also write the report here")
    args = parser.parse_args()
    scenarios = load([x.strip() for x in args.only.split(",") if x.strip()])
    outcomes = [Outcome(s) for s in scenarios]
    started = time.perf_counter()
    load_before = os.getloadavg()
    with ExitStack() as stack:
        if args.url:
            if args.token_command:
                make_token = token_command(args.token_command)
            elif args.token_secret:
                make_token = signer(args.token_secret)
            else:
                raise SystemExit("--url needs --token-secret (or ENGRAM_TOKEN_SECRET) or --token-command")
            url_service = Service(args.url, make_token)
            stack.callback(url_service.close)
            services: dict[str, Service | None] = {"shipped": url_service, "model": None}
            mode = {"service": args.url, "started_here": False}
        else:
            tmp = Path(tempfile.mkdtemp(prefix="engram-scenarios-"))
            stack.callback(shutil.rmtree, tmp, True)
            services = dict(stack.enter_context(own_services(tmp, args.daily_calls)))
            mode = {"service": "two `engram serve` on the embedded default, started here", "started_here": True,
                    "model_service": f"fake OpenAI-compatible model, ENGRAM_DAILY_CALLS={args.daily_calls}"}
        startup = time.perf_counter() - started
        cycles: list[dict[str, Any]] = []
        waited = 0.0  # for the fake-model service to finish starting, when its scenarios were due
        for o in outcomes:
            area = o.scenario["area"]
            if area in MODEL_AREAS and services["model"] is None:
                o.not_exercised = NOT_WITH_URL[area]
        for run in range(1, args.runs + 1):
            for o in outcomes:
                if o.not_exercised:
                    o.results.append(NOT_EXERCISED)
                elif o.scenario["area"] != "restore":
                    service = services["model" if o.scenario["area"] in MODEL_AREAS else "shipped"]
                    assert service is not None
                    waited += ready(service)
                    run_plain(o, service, run)
            restores = [o for o in outcomes if o.scenario["area"] == "restore" and not o.not_exercised]
            if restores:
                assert services["model"] is not None
                waited += ready(services["model"])
                cycles.append(run_restores(restores, services["model"], run))
            print(f"run {run}: " + json.dumps(summarize(outcomes, time.perf_counter() - started)["total"]), flush=True)
        shipped = services["shipped"]
        assert shipped is not None
        offered = openapi_endpoints(shipped)
    exercised = {shape(e) for o in outcomes for e in o.endpoints}
    report = {
        "program": "python -m bench.scenarios", "scenarios_file": str(DATA.relative_to(ROOT)), "runs": args.runs,
        "mode": mode, "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                  "load_average_before": [round(x, 2) for x in load_before],
                                  "load_average_after": [round(x, 2) for x in os.getloadavg()]},
        "startup_seconds": round(startup, 1), "model_service_wait_seconds": round(waited, 1),
        "restore_cycles": cycles,
        "summary": summarize(outcomes, time.perf_counter() - started),
        "scenarios": [o.as_json() for o in outcomes],
        "endpoints_exercised": sorted({e for o in outcomes for e in o.endpoints}),
        "endpoints_not_exercised": sorted(e for e in offered if shape(e) not in exercised),
    }
    text = json.dumps(report, indent=2, ensure_ascii=False)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 1 if report["summary"]["total"][FAILED] else 0


if __name__ == "__main__":
    raise SystemExit(main())
