// The client against a real `engram serve`: every method, its errors, its retries, bot keys, and its
// types generated from the service's own /openapi.json.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, test } from "node:test";

import { generate, TARGET } from "../scripts/types.mjs";
import { EngramClient, EngramError } from "../dist/index.js";
import { startServer, token } from "./server.mjs";

let server;
const source = (message) => ({ kind: "chat", id: "chat-ts", message_id: message });

before(async () => {
  server = await startServer();
});

after(async () => {
  await server?.stop();
});

test("its types are the service's reference: a new field cannot be missing here", async () => {
  const document = await (await fetch(server.url + "/openapi.json")).json();
  assert.equal(await generate(document), await readFile(TARGET, "utf8"),
    "src/openapi.ts differs from the service's /openapi.json: run `node scripts/types.mjs URL` and commit it");
});

test("remember, recall, read, correct, list every page, forget, export and settings", async () => {
  const alice = new EngramClient({ baseUrl: server.url, token: token({ user: "ts-alice" }) });
  const made = await alice.remember({ text: "I prefer weekly reports as short bullet points", source: source("m-1"),
    tags: ["reports"] });
  assert.equal(made.status, "confirmed");
  assert.deepEqual(made.tags, ["reports"]);
  const again = await alice.remember({ text: "I prefer weekly reports as short bullet points", source: source("m-1") });
  assert.equal(again.id, made.id); // the same message remembered twice is stored once

  const recalled = await alice.recall({ query: "how should reports look" });
  assert.deepEqual(recalled.items.map((i) => i.id), [made.id]);
  assert.equal(recalled.items[0].evidence[0].quote, "I prefer weekly reports as short bullet points");

  assert.equal((await alice.memory(made.id)).text, made.text);
  const corrected = await alice.correct(made.id, { text: "I prefer monthly reports as short bullet points" });
  assert.equal(corrected.revision, 2);
  const events = (await alice.history(made.id)).events.map((e) => e.type);
  assert.deepEqual(events.slice(0, 2), ["Remembered", "Corrected"]);
  assert.deepEqual((await alice.links(made.id)).items, []);

  for (const n of [2, 3, 4]) await alice.remember({ text: `I like trains number ${n}`, source: source(`m-${n}`) });
  const first = await alice.memories({ limit: 2 });
  assert.equal(first.items.length, 2);
  const seen = [];
  for await (const page of alice.memories({ limit: 2 })) seen.push(...page.items.map((m) => m.id));
  assert.equal(seen.length, 4);
  assert.equal(new Set(seen).size, 4);

  const forgotten = await alice.forget(made.id);
  const status = await alice.forgetStatus(forgotten.forget_id);
  assert.equal(status.forget_id, forgotten.forget_id);
  assert.ok(["stopped_using", "purge_complete"].includes(status.status));
  assert.equal((await alice.recall({ query: "reports" })).items.length, 0);

  const exported = await alice.export();
  assert.equal(exported.memories.length, 3);
  const markdown = await alice.export({ format: "markdown" });
  assert.equal(typeof markdown, "string");
  assert.match(markdown, /trains number 2/);

  assert.equal((await alice.settings()).learning_paused, false);
  assert.equal((await alice.settings({ learning_paused: true, use_paused: false })).learning_paused, true);
  assert.equal((await alice.settings({ learning_paused: false, use_paused: false })).learning_paused, false);
});

test("receipts one at a time and as a conversation, and their state", async () => {
  const bob = new EngramClient({ baseUrl: server.url, token: token({ user: "ts-bob" }) });
  const one = await bob.receive({ receipt_id: "r-1", author: "user", text: "I prefer aisle seats.", source: source("r-1") });
  assert.equal(one.receipt_id, "r-1");
  const batch = await bob.receive({ messages: [
    { receipt_id: "r-2", author: "user", text: "I cycle to work.", source: source("r-2") },
    { receipt_id: "r-3", author: "assistant", text: "Noted.", source: source("r-3") },
  ] });
  assert.deepEqual(batch.items.map((r) => r.receipt_id), ["r-2", "r-3"]);
  assert.equal((await bob.receipt("r-2")).receipt_id, "r-2");
});

test("review: a sensitive text waits as a candidate, confirmed or rejected", async () => {
  const carol = new EngramClient({ baseUrl: server.url, token: token({ user: "ts-carol" }) });
  const candidate = await carol.remember({ text: "My blood pressure medication is lisinopril", source: source("c-1") });
  assert.equal(candidate.status, "pending_review");
  const other = await carol.remember({ text: "My salary is paid into the credit union", source: source("c-2") });
  assert.deepEqual((await carol.candidates()).items.map((c) => c.id).sort(), [candidate.id, other.id].sort());
  const confirmed = await carol.confirm(candidate.id, { acknowledge_sensitive: true });
  assert.equal(confirmed.status, "confirmed");
  assert.equal((await carol.reject(other.id)).id, other.id);
  assert.deepEqual((await carol.candidates()).items, []);
  assert.deepEqual((await carol.insights()).items, []);
  await assert.rejects(carol.confirmInsight("00000000-0000-4000-8000-000000000000"),
    (e) => e instanceof EngramError && e.status === 404 && e.code === "not_found");
  await assert.rejects(carol.rejectInsight("00000000-0000-4000-8000-000000000000"), { status: 404 });
});

test("a problem rejects with EngramError: status, code, detail and the request id", async () => {
  const dave = new EngramClient({ baseUrl: server.url, token: token({ user: "ts-dave" }) });
  const missing = await dave.memory("00000000-0000-4000-8000-000000000000").catch((e) => e);
  assert.ok(missing instanceof EngramError);
  assert.equal(missing.status, 404);
  assert.equal(missing.code, "not_found");
  assert.equal(typeof missing.detail, "string");
  assert.match(missing.requestId, /^[0-9a-f]{32}$/);
  assert.equal(missing.message, `not_found: ${missing.detail}`);

  const invalid = await dave.recall({ query: "tea", limit: 0 }).catch((e) => e);
  assert.equal(invalid.code, "validation_error");
  assert.match(invalid.detail, /^limit: .*\(for example 5\)$/); // names the field and shows a valid one

  const expired = new EngramClient({ baseUrl: server.url, token: token({ ttl: -60 }) });
  const refused = await expired.recall({ query: "tea" }).catch((e) => e);
  assert.equal(refused.status, 401);
  assert.equal(refused.problem.reason, "expired");
});

test("arguments are checked before anything is sent", async () => {
  let sent = 0;
  const counting = (...args) => { sent += 1; return fetch(...args); };
  const erin = new EngramClient({ baseUrl: server.url, token: token({ user: "ts-erin" }), fetch: counting });
  assert.throws(() => erin.remember({ text: "I like tea", source: "chat" }),
    { name: "TypeError", message: /remember: source must be an object, for example \{ kind: "chat"/ });
  assert.throws(() => erin.recall({}), { name: "TypeError", message: /recall: query must be a string/ });
  assert.throws(() => erin.memory(""), { name: "TypeError", message: /memoryId must be a non-empty string/ });
  assert.throws(() => erin.correct("id", "new text"), { name: "TypeError" });
  assert.throws(() => new EngramClient({ baseUrl: server.url }), { message: /give either token, or apiKey with person/ });
  assert.throws(() => new EngramClient({ baseUrl: server.url, apiKey: "ek_x" }), { message: /person/ });
  assert.equal(sent, 0);
});

test("idempotent calls are retried after a 503 or a lost connection; others are sent once", async () => {
  const tries = [];
  let failures = 0;
  const flaky = (url, init) => {
    tries.push(new URL(url).pathname);
    if (failures-- > 0) {
      return Promise.resolve(new Response(JSON.stringify({ code: "unavailable", detail: "database away", status: 503 }),
        { status: 503, headers: { "Retry-After": "0", "Content-Type": "application/problem+json" } }));
    }
    return fetch(url, init);
  };
  const frank = new EngramClient({ baseUrl: server.url, token: token({ user: "ts-frank" }), fetch: flaky, backoffMs: 1 });
  const made = await frank.remember({ text: "I prefer green tea", source: source("f-1") });
  failures = 2;
  tries.length = 0;
  assert.equal((await frank.recall({ query: "green tea" })).items[0].id, made.id);
  assert.deepEqual(tries, ["/v1/recall", "/v1/recall", "/v1/recall"]);
  failures = 1;
  tries.length = 0;
  const once = await frank.correct(made.id, { text: "I prefer white tea" }).catch((e) => e);
  assert.equal(once.status, 503); // a correction's lost answer may hide a stored change: never sent twice
  assert.deepEqual(tries, [`/v1/memories/${made.id}/correct`]);
  failures = 9;
  tries.length = 0;
  const spent = await frank.recall({ query: "tea" }).catch((e) => e);
  assert.equal(spent.code, "unavailable");
  assert.equal(tries.length, 4); // the first try and 3 more

  let dropped = 1;
  const cut = (url, init) => (dropped-- > 0 ? Promise.reject(new TypeError("fetch failed")) : fetch(url, init));
  const grace = new EngramClient({ baseUrl: server.url, token: token({ user: "ts-frank" }), fetch: cut, backoffMs: 1 });
  assert.equal((await grace.memory(made.id)).id, made.id);
});

test("a bot acts with its key for the person it names", async () => {
  const admin = { Authorization: `Bearer ${token({ user: "root", role: "admin" })}`, "Content-Type": "application/json" };
  const directory = await fetch(server.url + "/v1/admin/directory", { method: "PUT", headers: admin,
    body: JSON.stringify({ teams: {}, sources: {}, bots: { "b-ts": { teams: [], sources: [] } } }) });
  assert.equal(directory.status, 200);
  const issued = await (await fetch(server.url + "/v1/admin/bots/b-ts/keys", { method: "POST", headers: admin })).json();
  const bot = new EngramClient({ baseUrl: server.url, apiKey: issued.key, person: "ts-gina" });
  const made = await bot.remember({ text: "I prefer the window desk", source: source("g-1") });
  assert.equal((await bot.recall({ query: "window desk" })).items[0].id, made.id);
  const gina = new EngramClient({ baseUrl: server.url, token: token({ user: "ts-gina" }) });
  assert.equal((await gina.memory(made.id)).id, made.id); // hers
  const forSomeoneElse = new EngramClient({ baseUrl: server.url, apiKey: issued.key, person: "ts-hank" });
  assert.deepEqual((await forSomeoneElse.recall({ query: "window desk" })).items, []);
});

test("every JavaScript snippet of the README and docs/integrations runs as written", async () => {
  const { execFile } = await import("node:child_process");
  const { mkdtemp, writeFile } = await import("node:fs/promises");
  const { tmpdir } = await import("node:os");
  const { join } = await import("node:path");
  const root = new URL("../../../", import.meta.url);
  const dist = new URL("../dist/", import.meta.url).href;
  const dir = await mkdtemp(join(tmpdir(), "engram-snippets-"));
  const expected = { "README.md": /Risks come first in every report/, "docs/integrations/typescript.md": /aisle seats[\s\S]*404 not_found/,
    "docs/integrations/ai-sdk.md": /confirmed \[ 'I take the 8:15 train' \]\nnot_found: / };
  for (const [page, shows] of Object.entries(expected)) {
    const markdown = await readFile(new URL(page, root), "utf8");
    const blocks = [...markdown.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]);
    assert.ok(blocks.length > 0, `${page} has a js snippet`);
    let output = "";
    for (const [n, block] of blocks.entries()) {
      const file = join(dir, `${page.replaceAll("/", "-")}-${n}.mjs`);
      await writeFile(file, block.replaceAll("./clients/typescript/dist/", dist)
        .replaceAll("http://127.0.0.1:8080", server.url));
      output += await new Promise((resolve, reject) => {
        execFile(process.execPath, [file], { env: { ...process.env, T: token({ user: `ts-${n}-${page.length}` }) } },
          (error, stdout, stderr) => (error ? reject(new Error(`${page} snippet ${n}: ${stderr}`)) : resolve(stdout)));
      });
    }
    assert.match(output, shows, `${page}: ${output}`);
  }
});
