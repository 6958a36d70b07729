// Engram's HTTP API for TypeScript and JavaScript: one method a call, each taking the request body as
// one object and resolving to the service's own document, typed from its /openapi.json (src/openapi.ts).
// No runtime dependencies: the platform's fetch (Node 18+, browsers, Deno, Bun).

import type { components } from "./openapi.js";

type Schemas = components["schemas"];

export type RememberIn = Schemas["RememberIn"];
export type SourceIn = Schemas["SourceIn"];
export type RecallIn = Schemas["RecallIn"];
export type ReceiptIn = Schemas["ReceiptIn"];
export type ReceiptBatchIn = Schemas["ReceiptBatchIn"];
export type CorrectIn = Schemas["CorrectIn"];
export type ConfirmIn = Schemas["ConfirmIn"];
export type PersonSettingsIn = Schemas["PersonSettingsIn"];
export type MemoryOut = Schemas["MemoryOut"];
export type CandidateOut = Schemas["CandidateOut"];
export type RecallOut = Schemas["RecallOut"];
export type RecallItem = Schemas["RecallItem"];
export type ReceiptState = Schemas["ReceiptState"];
export type ReceiptBatch = Schemas["ReceiptBatch"];
export type MemoryList = Schemas["MemoryList"];
export type History = Schemas["History"];
export type LinkList = Schemas["LinkList"];
export type ForgetAccepted = Schemas["ForgetAccepted"];
export type ForgetStatus = Schemas["ForgetStatus"];
export type CandidateList = Schemas["CandidateList"];
export type Rejected = Schemas["Rejected"];
export type InsightList = Schemas["InsightList"];
export type InsightOut = Schemas["InsightOut"];
export type PersonSettingsOut = Schemas["PersonSettingsOut"];
export type ExportOut = Schemas["ExportOut"];
export type Problem = Schemas["Problem"];
export type { components };

export interface MemoriesQuery {
  q?: string;
  limit?: number;
  cursor?: string;
  status?: "confirmed" | "forgotten" | "all";
  tags?: string[];
}

export interface EngramClientOptions {
  /** Where the service answers, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** A person's (or a bot's) bearer token. */
  token?: string;
  /** A bot key (`ek_...`, issued by an admin), with `person`: whom the bot acts for. */
  apiKey?: string;
  person?: string;
  /** More tries of an idempotent call after a 503, a 429 or a lost connection (default 3). */
  maxRetries?: number;
  /** The first wait before a retry, doubled each time, with jitter (default 500 ms). */
  backoffMs?: number;
  /** The longest wait, also the cap on a `Retry-After` (default 10 s). */
  maxBackoffMs?: number;
  /** Each try's time limit (default 30 s). */
  timeoutMs?: number;
  /** The fetch to use (default: the platform's). */
  fetch?: typeof fetch;
}

/** A problem response: `status`, its `code` (what a program acts on), `detail` (what a person reads). */
export class EngramError extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly requestId: string | undefined;
  readonly retryAfter: number | undefined;
  readonly problem: Record<string, unknown>;

  constructor(status: number, problem: Record<string, unknown>, requestId?: string, retryAfter?: number) {
    const code = typeof problem.code === "string" ? problem.code : `http_${status}`;
    const detail = typeof problem.detail === "string" ? problem.detail : `the service answered ${status}`;
    super(`${code}: ${detail}`);
    this.name = "EngramError";
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.requestId = requestId;
    this.retryAfter = retryAfter;
    this.problem = problem;
  }
}

interface Call {
  method: "GET" | "POST" | "PUT";
  path: string;
  idempotent: boolean;
  body?: unknown;
  query?: Record<string, string | number | boolean | string[] | undefined>;
  text?: boolean;
}

const RETRIED = new Set([429, 503]);
const REQUEST_ID = "X-Request-Id";
const SOURCE_EXAMPLE = '{ kind: "chat", id: "chat-42", message_id: "m-8" }';

function segment(id: unknown, name: string): string {
  if (typeof id !== "string" || id === "") throw new TypeError(`${name} must be a non-empty string`);
  return encodeURIComponent(id);
}

function object(value: unknown, name: string, example: string): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new TypeError(`${name} must be an object, for example ${example} (got ${value === null ? "null" : typeof value})`);
  }
  return value as Record<string, unknown>;
}

function text(value: unknown, name: string): void {
  if (typeof value !== "string") throw new TypeError(`${name} must be a string (got ${typeof value})`);
}

function retryAfterSeconds(headers: Headers): number | undefined {
  const value = headers.get("retry-after")?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value);
  const when = Date.parse(value);
  return Number.isNaN(when) ? undefined : Math.max(0, (when - Date.now()) / 1000);
}

function newRequestId(): string {
  const bytes = new Uint8Array(16);
  const random = globalThis.crypto?.getRandomValues; // Node 18 may lack the global Web Crypto
  if (random) random.call(globalThis.crypto, bytes);
  else for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(Math.random() * 256);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class EngramClient {
  readonly baseUrl: string;
  private readonly headers: Record<string, string>;
  private readonly maxRetries: number;
  private readonly backoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly timeoutMs: number;
  private readonly fetcher: typeof fetch;

  constructor(options: EngramClientOptions) {
    object(options, "options", '{ baseUrl: "http://127.0.0.1:8080", token }');
    text(options.baseUrl, "baseUrl");
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    if ((options.token === undefined) === (options.apiKey === undefined)) {
      throw new TypeError("give either token, or apiKey with person");
    }
    if (options.token !== undefined) {
      text(options.token, "token");
      this.headers = { Authorization: `Bearer ${options.token}` };
    } else {
      text(options.apiKey, "apiKey");
      text(options.person, "person (whom the bot acts for, with apiKey)");
      this.headers = { Authorization: `Bearer ${options.apiKey}`, "X-Engram-Person": options.person as string };
    }
    for (const [name, value] of [["maxRetries", options.maxRetries], ["backoffMs", options.backoffMs],
      ["maxBackoffMs", options.maxBackoffMs], ["timeoutMs", options.timeoutMs]] as const) {
      if (value !== undefined && (typeof value !== "number" || !(value >= 0))) {
        throw new TypeError(`${name} must be a number of at least 0`);
      }
    }
    this.maxRetries = options.maxRetries ?? 3;
    this.backoffMs = options.backoffMs ?? 500;
    this.maxBackoffMs = options.maxBackoffMs ?? 10_000;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    const fetcher = options.fetch ?? globalThis.fetch;
    if (typeof fetcher !== "function") throw new TypeError("no fetch: give options.fetch (Node 18+ has one)");
    this.fetcher = fetcher;
  }

  // -- capture and remember ----------------------------------------------------------------------

  /** Remember exactly this text, from the person's own message. A sensitive text answers a candidate
   * awaiting review. Retried only when `source.message_id` is given (the service then stores it once). */
  remember(body: RememberIn): Promise<MemoryOut | CandidateOut> {
    object(body, "remember(body)", `{ text: "I prefer tea", source: ${SOURCE_EXAMPLE} }`);
    text(body.text, "remember: text");
    const source = object(body.source, "remember: source", SOURCE_EXAMPLE);
    return this.send({ method: "POST", path: "/v1/memories", body, idempotent: typeof source.message_id === "string" });
  }

  /** One message (`ReceiptIn`) or a conversation (`{ messages: [...] }`) for background learning.
   * Idempotent by `receipt_id`. */
  receive(body: ReceiptIn): Promise<ReceiptState>;
  receive(body: ReceiptBatchIn): Promise<ReceiptBatch>;
  receive(body: ReceiptIn | ReceiptBatchIn): Promise<ReceiptState | ReceiptBatch> {
    object(body, "receive(body)", `{ receipt_id: "r-1", author: "user", text: "...", source: ${SOURCE_EXAMPLE} }`);
    if ("messages" in body && !Array.isArray(body.messages)) throw new TypeError("receive: messages must be an array");
    return this.send({ method: "POST", path: "/v1/receipts", body, idempotent: true });
  }

  /** Where a receipt stands: its state, attempts and candidates. */
  receipt(receiptId: string): Promise<ReceiptState> {
    return this.send({ method: "GET", path: `/v1/receipts/${segment(receiptId, "receiptId")}`, idempotent: true });
  }

  // -- recall and inspection ---------------------------------------------------------------------

  /** Confirmed memories and insights the caller may use now, with their evidence and valid time. */
  recall(body: RecallIn): Promise<RecallOut> {
    object(body, "recall(body)", '{ query: "how should reports look" }');
    text(body.query, "recall: query");
    return this.send({ method: "POST", path: "/v1/recall", body, idempotent: true });
  }

  /** One page of the person's memories; `for await (const page of client.memories())` walks every page. */
  memories(query: MemoriesQuery = {}): Promise<MemoryList> & AsyncIterable<MemoryList> {
    object(query, "memories(query)", "{ q: \"reports\", limit: 50 }");
    const first = this.send<MemoryList>({ method: "GET", path: "/v1/memories", query: { ...query }, idempotent: true });
    const client = this;
    async function* pages(): AsyncGenerator<MemoryList> {
      let page = await first;
      yield page;
      while (page.next_cursor) {
        page = await client.send<MemoryList>({ method: "GET", path: "/v1/memories",
          query: { ...query, cursor: page.next_cursor }, idempotent: true });
        yield page;
      }
    }
    return Object.assign(first, { [Symbol.asyncIterator]: pages });
  }

  memory(memoryId: string): Promise<MemoryOut> {
    return this.send({ method: "GET", path: `/v1/memories/${segment(memoryId, "memoryId")}`, idempotent: true });
  }

  history(memoryId: string): Promise<History> {
    return this.send({ method: "GET", path: `/v1/memories/${segment(memoryId, "memoryId")}/history`, idempotent: true });
  }

  links(memoryId: string): Promise<LinkList> {
    return this.send({ method: "GET", path: `/v1/memories/${segment(memoryId, "memoryId")}/links`, idempotent: true });
  }

  // -- change and forget -------------------------------------------------------------------------

  /** A new revision with this text (history kept). Sent once: a lost answer may hide a stored change. */
  correct(memoryId: string, body: CorrectIn): Promise<MemoryOut> {
    object(body, "correct(memoryId, body)", '{ text: "I prefer monthly reports" }');
    text(body.text, "correct: text");
    return this.send({ method: "POST", path: `/v1/memories/${segment(memoryId, "memoryId")}/correct`, body,
      idempotent: false });
  }

  /** Stop using the memory at once and purge every copy; `forgetStatus` follows the purge. */
  forget(memoryId: string): Promise<ForgetAccepted> {
    return this.send({ method: "POST", path: `/v1/memories/${segment(memoryId, "memoryId")}/forget`, idempotent: true });
  }

  forgetStatus(forgetId: string): Promise<ForgetStatus> {
    return this.send({ method: "GET", path: `/v1/forgets/${segment(forgetId, "forgetId")}`, idempotent: true });
  }

  // -- review ------------------------------------------------------------------------------------

  candidates(): Promise<CandidateList> {
    return this.send({ method: "GET", path: "/v1/candidates", idempotent: true });
  }

  confirm(candidateId: string, body?: ConfirmIn): Promise<MemoryOut> {
    if (body !== undefined) object(body, "confirm(candidateId, body)", '{ text: "edited text" }');
    return this.send({ method: "POST", path: `/v1/candidates/${segment(candidateId, "candidateId")}/confirm`,
      body, idempotent: false });
  }

  reject(candidateId: string): Promise<Rejected> {
    return this.send({ method: "POST", path: `/v1/candidates/${segment(candidateId, "candidateId")}/reject`,
      idempotent: false });
  }

  insights(query: { status?: "proposed" | "confirmed" | "invalidated" } = {}): Promise<InsightList> {
    object(query, "insights(query)", '{ status: "proposed" }');
    return this.send({ method: "GET", path: "/v1/insights", query: { ...query }, idempotent: true });
  }

  confirmInsight(insightId: string): Promise<InsightOut> {
    return this.send({ method: "POST", path: `/v1/insights/${segment(insightId, "insightId")}/confirm`, idempotent: false });
  }

  rejectInsight(insightId: string): Promise<InsightOut> {
    return this.send({ method: "POST", path: `/v1/insights/${segment(insightId, "insightId")}/reject`, idempotent: false });
  }

  // -- the person's settings and data ------------------------------------------------------------

  /** The person's settings; with a body (`learning_paused` and `use_paused`), stores them. */
  settings(body?: PersonSettingsIn): Promise<PersonSettingsOut> {
    if (body === undefined) return this.send({ method: "GET", path: "/v1/settings", idempotent: true });
    object(body, "settings(body)", "{ learning_paused: true, use_paused: false }");
    return this.send({ method: "PUT", path: "/v1/settings", body, idempotent: true });
  }

  /** Everything the person holds here: the document, or its Markdown with `{ format: "markdown" }`. */
  export(query?: { format?: "json" }): Promise<ExportOut>;
  export(query: { format: "markdown" }): Promise<string>;
  export(query: { format?: "json" | "markdown" } = {}): Promise<ExportOut | string> {
    object(query, "export(query)", '{ format: "markdown" }');
    return this.send({ method: "GET", path: "/v1/export", query: { format: query.format ?? "json" }, idempotent: true,
      text: query.format === "markdown" });
  }

  // -- sending -----------------------------------------------------------------------------------

  private url(call: Call): string {
    const url = new URL(this.baseUrl + call.path);
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(one));
    }
    return url.toString();
  }

  private wait(attempt: number, retryAfter: number | undefined): number {
    if (retryAfter !== undefined) return Math.min(retryAfter * 1000, this.maxBackoffMs);
    const ceiling = Math.min(this.backoffMs * 2 ** attempt, this.maxBackoffMs);
    return ceiling / 2 + Math.random() * (ceiling / 2);
  }

  private async send<T>(call: Call): Promise<T> {
    const requestId = newRequestId(); // one id for every try: the service's log ties them together
    const headers: Record<string, string> = { ...this.headers, Accept: "application/json", [REQUEST_ID]: requestId };
    if (call.body !== undefined) headers["Content-Type"] = "application/json";
    const init = { method: call.method, headers, body: call.body === undefined ? undefined : JSON.stringify(call.body) };
    for (let attempt = 0; ; attempt++) {
      const retries = call.idempotent && attempt < this.maxRetries;
      let answer: Response;
      try {
        answer = await this.fetcher(this.url(call), { ...init, signal: AbortSignal.timeout(this.timeoutMs) });
      } catch (error) {
        if (retries) {
          await sleep(this.wait(attempt, undefined));
          continue;
        }
        throw error;
      }
      if (answer.ok) return (call.text ? await answer.text() : await answer.json()) as T;
      const retryAfter = retryAfterSeconds(answer.headers);
      if (retries && RETRIED.has(answer.status)) {
        await answer.body?.cancel();
        await sleep(this.wait(attempt, retryAfter));
        continue;
      }
      let problem: Record<string, unknown> = {};
      try {
        problem = (await answer.json()) as Record<string, unknown>;
      } catch {
        // not a problem document (a proxy's page): the status alone says it
      }
      throw new EngramError(answer.status, problem, answer.headers.get(REQUEST_ID) ?? requestId, retryAfter);
    }
  }
}
