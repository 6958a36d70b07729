// A real `engram serve` for the tests (the repository's .venv/bin/engram, or ENGRAM_BIN), on its own
// embedded PostgreSQL in a temporary directory, and HS256 tokens signed with its secret.
import { spawn } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
export const SECRET = "typescript-client-tests-" + "s".repeat(32);

function freePort() {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

export async function startServer(env = {}) {
  const dir = mkdtempSync(join(tmpdir(), "engram-ts-"));
  const port = await freePort();
  const log = join(dir, "serve.log");
  const bin = process.env.ENGRAM_BIN ?? join(ROOT, ".venv", "bin", "engram");
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("ENGRAM_")));
  const proc = spawn(bin, ["serve", "--port", String(port)], {
    env: { ...clean, ENGRAM_DATA_DIR: join(dir, "data"), ENGRAM_TOKEN_SECRET: SECRET, ENGRAM_EMBEDDINGS: "off",
      ENGRAM_POLL_INTERVAL: "0.2", ...env },
    stdio: ["ignore", openSync(log, "a"), openSync(log, "a")],
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`engram serve exited:\n${readFileSync(log, "utf8")}`);
    try {
      if ((await fetch(url + "/readyz")).ok) break;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    url,
    async stop() {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const b64 = (value) => Buffer.from(typeof value === "string" ? value : JSON.stringify(value)).toString("base64url");

/** A token as `engram token` signs one. */
export function token({ company = "acme", user = "alice", role = "user", bot, entry = "api", ttl = 3600, secret = SECRET } = {}) {
  const now = Math.floor(Date.now() / 1000);
  const claims = { sub: user, company, role, entry, iat: now, exp: now + ttl, jti: randomBytes(8).toString("hex"),
    ...(bot ? { bot } : {}) };
  const signed = `${b64({ alg: "HS256", typ: "JWT" })}.${b64(claims)}`;
  return `${signed}.${createHmac("sha256", secret).update(signed).digest("base64url")}`;
}
