// Engram's MCP tools for the AI SDK: `engramTools(client)` returns `{ recall, remember, ... }` for
// `generateText({ tools })` / `streamText({ tools })`. Names, descriptions and input schemas are the
// MCP tools' own (src/tools.ts, from src/contract/tools.json); each `execute` calls the client.
// A problem rejects with `EngramError`, whose message is `code: detail`: the AI SDK hands it to the
// model as the tool's error, as MCP reports one.

import { jsonSchema, tool, type JSONSchema7, type Tool } from "ai";

import type { EngramClient } from "./index.js";
import { TOOLS, type ToolName } from "./tools.js";

export { TOOLS, type ToolDefinition, type ToolName } from "./tools.js";

type Input = Record<string, unknown>;

const str = (value: unknown): string | undefined => (typeof value === "string" ? value : undefined);

function calls(client: EngramClient, sourceKind: string): Record<ToolName, (input: Input) => Promise<unknown>> {
  return {
    recall: (i) => client.recall({ query: str(i.query) ?? "", limit: typeof i.limit === "number" ? i.limit : 20,
      ...(str(i.as_of) ? { as_of: str(i.as_of) } : {}) }),
    remember: (i) => client.remember({ text: i.text as string, explicit: true,
      source: { kind: sourceKind, id: str(i.source_id) ?? sourceKind, message_id: str(i.message_id) ?? null },
      ...(Array.isArray(i.tags) ? { tags: i.tags as string[] } : {}) }),
    list_memories: (i) => client.memories(str(i.q) ? { q: str(i.q) } : {}),
    get_memory: (i) => client.memory(i.id as string),
    memory_history: (i) => client.history(i.id as string),
    correct_memory: (i) => client.correct(i.id as string, { text: i.text as string,
      ...(str(i.valid_from) ? { valid_from: str(i.valid_from) } : {}) }),
    forget_memory: (i) => client.forget(i.id as string),
    forget_status: (i) => client.forgetStatus(i.forget_id as string),
  };
}

/** The eight tools, calling `client`. `sourceKind`: the `source.kind` of what `remember` stores. */
export function engramTools(client: EngramClient, options: { sourceKind?: string } = {}): Record<ToolName, Tool> {
  const run = calls(client, options.sourceKind ?? "ai-sdk");
  const tools = {} as Record<ToolName, Tool>;
  for (const definition of TOOLS) {
    tools[definition.name] = tool({
      description: definition.description,
      inputSchema: jsonSchema<Input>(definition.input_schema as JSONSchema7),
      execute: (input: Input) => run[definition.name](input),
    });
  }
  return tools;
}
