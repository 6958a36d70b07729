// The AI SDK tools against a real `engram serve`: the MCP tools' names, descriptions and schemas, each
// `execute` called as the AI SDK calls it, and a whole generateText turn driving them with a mock model.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { after, before, test } from "node:test";

import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";

import { SHARED, toolsModule, TOOLS_TARGET } from "../scripts/tools.mjs";
import { engramTools, TOOLS } from "../dist/ai.js";
import { EngramClient, EngramError } from "../dist/index.js";
import { startServer, token } from "./server.mjs";

let server;
before(async () => { server = await startServer(); });
after(async () => { await server?.stop(); });

const call = { toolCallId: "call-1", messages: [] }; // what the AI SDK passes as execute's second argument

test("the tools are the MCP tools, from the one shared definition", async () => {
  assert.equal(await toolsModule(), await readFile(TOOLS_TARGET, "utf8"),
    "src/tools.ts differs from src/contract/tools.json: run `node scripts/tools.mjs` and commit it");
  const shared = JSON.parse(await readFile(SHARED, "utf8"));
  const tools = engramTools(new EngramClient({ baseUrl: server.url, token: token() }));
  assert.deepEqual(Object.keys(tools), shared.map((t) => t.name));
  for (const definition of shared) {
    assert.equal(tools[definition.name].description, definition.description);
    assert.deepEqual(tools[definition.name].inputSchema.jsonSchema, definition.input_schema);
  }
  assert.deepEqual(TOOLS.map((t) => t.name), shared.map((t) => t.name));
});

test("each execute acts through the API for the client's person", async () => {
  const tools = engramTools(new EngramClient({ baseUrl: server.url, token: token({ user: "ai-alice" }) }));
  const stored = await tools.remember.execute({ text: "I take the 8:15 train", message_id: "m-1" }, call);
  assert.equal(stored.status, "confirmed");
  assert.deepEqual(stored.source, { kind: "ai-sdk", id: "ai-sdk", message_id: "m-1" });
  const recalled = await tools.recall.execute({ query: "which train do I take" }, call);
  assert.deepEqual(recalled.items.map((i) => i.id), [stored.id]);
  assert.equal((await tools.get_memory.execute({ id: stored.id }, call)).text, "I take the 8:15 train");
  assert.equal((await tools.correct_memory.execute({ id: stored.id, text: "I take the 8:45 train" }, call)).revision, 2);
  assert.equal((await tools.memory_history.execute({ id: stored.id }, call)).events.length, 2);
  assert.equal((await tools.list_memories.execute({ q: "train" }, call)).items[0].id, stored.id);
  const forgot = await tools.forget_memory.execute({ id: stored.id }, call);
  assert.equal((await tools.forget_status.execute({ forget_id: forgot.forget_id }, call)).forget_id, forgot.forget_id);
  await assert.rejects(tools.get_memory.execute({ id: "00000000-0000-4000-8000-000000000000" }, call),
    (e) => e instanceof EngramError && e.message.startsWith("not_found: "));
});

test("in a generateText turn the model's tool calls reach Engram and the errors reach the model", async () => {
  const tools = engramTools(new EngramClient({ baseUrl: server.url, token: token({ user: "ai-bob" }) }));
  const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
    outputTokens: { total: 1, text: 1, reasoning: 0 } };
  const turns = [
    [{ type: "tool-call", toolCallId: "c1", toolName: "remember", input: JSON.stringify({ text: "I prefer aisle seats" }) }],
    [{ type: "tool-call", toolCallId: "c2", toolName: "recall", input: JSON.stringify({ query: "aisle seats" }) },
      { type: "tool-call", toolCallId: "c3", toolName: "get_memory",
        input: JSON.stringify({ id: "00000000-0000-4000-8000-000000000000" }) }],
    [{ type: "text", text: "You prefer aisle seats." }],
  ];
  const seen = [];
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      seen.push(options.prompt);
      const content = turns[seen.length - 1];
      const calls = content.some((c) => c.type === "tool-call");
      return { content, finishReason: { unified: calls ? "tool-calls" : "stop", raw: undefined }, usage, warnings: [] };
    },
  });
  const result = await generateText({ model, tools, prompt: "Where do I like to sit?", stopWhen: stepCountIs(5) });
  assert.equal(result.text, "You prefer aisle seats.");
  const outputs = result.steps.flatMap((s) => s.content).filter((c) => c.type === "tool-result" || c.type === "tool-error");
  const byCall = Object.fromEntries(outputs.map((c) => [c.toolCallId, c]));
  assert.equal(byCall.c1.type, "tool-result");
  assert.equal(byCall.c1.output.status, "confirmed");
  assert.equal(byCall.c2.output.items[0].text, "I prefer aisle seats");
  assert.equal(byCall.c3.type, "tool-error");
  assert.match(String(byCall.c3.error.message ?? byCall.c3.error), /^not_found: /);
  const fed = JSON.stringify(seen[2]); // what the model was told: the results, and the error as text
  assert.match(fed, /I prefer aisle seats/);
  assert.match(fed, /not_found: /);
});
