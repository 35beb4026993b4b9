/**
 * A typed client of mneme's HTTP API (Node 18+, Deno, Bun, browsers: it uses `fetch`).
 *
 *     const mneme = new MnemeClient({ url: "http://127.0.0.1:18791" });
 *     await mneme.remember("I moved to Lisbon last week", { sender: "dana", scope: "user:dana" });
 *     const hits = await mneme.recall("where does dana live", { user: "dana" });
 */

export type MemoryType = "episodic" | "semantic" | "competence" | "working" | "plan_graph";
export type Sensitivity = "public" | "low" | "medium" | "high" | "critical";
export type HookName =
  | "session_start"
  | "message_received"
  | "before_tool_call"
  | "after_tool_call"
  | "agent_end"
  | "before_compaction"
  | "session_end";

/** One memory as the daemon returns it (only the fields most callers read are typed). */
export interface MemoryRecord {
  id: string;
  memory_type: MemoryType;
  status: "active" | "superseded" | "retracted" | "pruned" | string;
  scope: string;
  sensitivity: Sensitivity;
  summary: string;
  payload: Record<string, unknown> | null;
  tags: string[];
  created_at: string;
  event_time: string | null;
  lineage: { actor: string; operation: string; rationale: string; parent_ids: string[] };
  [more: string]: unknown;
}

/** A recalled memory. `score.relevant` is the calibrated chance it answers the query
 *  (about 0.5 at best); `outdated` is set when a fact it rests on has changed since. */
export interface Hit {
  record: MemoryRecord;
  current_salience: number;
  score: { score: number; relevant?: number | null; [part: string]: number | null | undefined };
  outdated?: { slot: string; new: string; since: string; [more: string]: unknown } | null;
}

export interface ForgetReport {
  dry_run: boolean;
  records: { id: string; memory_type: string; summary: string; because: string }[];
  [more: string]: unknown;
}

export interface HookOutcome {
  context?: string | null;
  record_ids: string[];
  error?: string | null;
  [more: string]: unknown;
}

export interface WriteOptions {
  scope?: string;
  sensitivity?: Sensitivity;
  tags?: string[];
  actor?: string;
}

export interface RecallOptions {
  limit?: number;
  types?: MemoryType[];
  scopes?: string[];
  /** An end user: their scope (`user:<id>`) is searched besides global memories. */
  user?: string;
  tags?: string[];
  since?: string;
  until?: string;
  includeTombstones?: boolean;
}

export interface ForgetSelection {
  ids?: string[];
  query?: string;
  subject?: string;
  user?: string;
  reason: string;
  dryRun?: boolean;
}

export interface ClientOptions {
  /** The daemon's HTTP address; default `http://127.0.0.1:18791`. */
  url?: string;
  /** Sent as `Authorization: Bearer KEY` (a loopback daemon without principals needs none). */
  apiKey?: string;
  /** Per request, in milliseconds; default 10 000. */
  timeoutMs?: number;
  /** Another `fetch` (a proxy's, a test's). */
  fetch?: typeof fetch;
}

/** An error answer: the HTTP status, mneme's error code and its message. */
export class MnemeError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`${message} (${code}, HTTP ${status})`);
    this.name = "MnemeError";
  }
}

const HOOKS: readonly HookName[] = [
  "session_start",
  "message_received",
  "before_tool_call",
  "after_tool_call",
  "agent_end",
  "before_compaction",
  "session_end",
];

function defined(values: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined && v !== null));
}

function options(o: WriteOptions = {}): Record<string, unknown> {
  return defined({ scope: o.scope, sensitivity: o.sensitivity, tags: o.tags?.length ? o.tags : undefined, actor: o.actor });
}

export class MnemeClient {
  private readonly url: string;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;

  constructor(opts: ClientOptions = {}) {
    this.url = (opts.url ?? "http://127.0.0.1:18791").replace(/\/+$/, "");
    this.headers = opts.apiKey ? { authorization: `Bearer ${opts.apiKey}` } : {};
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.fetch = opts.fetch ?? globalThis.fetch;
  }

  private async call<T>(method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
    const response = await this.fetch(`${this.url}${path}`, {
      method,
      headers: body === undefined ? this.headers : { ...this.headers, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await response.text();
    let json: unknown = undefined;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (!response.ok) {
      const error = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
      throw new MnemeError(response.status, error?.code ?? "unknown", error?.message ?? text.slice(0, 200));
    }
    return json as T;
  }

  /** `/healthz`: version, pid and store (no key needed). */
  health(): Promise<{ service: string; version: string; pid: number; [more: string]: unknown }> {
    return this.call("GET", "/healthz");
  }

  /** Stores an event (a message, by default); `<private>…</private>` spans are never stored. */
  async remember(text: string, o: WriteOptions & { sender?: string; kind?: string; eventTime?: string } = {}): Promise<MemoryRecord> {
    const event = defined({ event_kind: o.kind ?? "message", text, sender: o.sender, event_time: o.eventTime });
    return (await this.call<{ record: MemoryRecord }>("POST", "/v1/ingest/event", { event, options: options(o) })).record;
  }

  /** Stores a fact. */
  async rememberFact(subject: string, predicate: string, object: string, o: WriteOptions = {}): Promise<MemoryRecord> {
    const fact = { subject, predicate, object, evidence: [] };
    return (await this.call<{ record: MemoryRecord }>("POST", "/v1/ingest/observation", { fact, options: options(o) })).record;
  }

  /** Searches memory by meaning and words. */
  async recall(query = "", o: RecallOptions = {}): Promise<Hit[]> {
    const scopes = [...(o.scopes ?? []), ...(o.user ? [`user:${o.user}`] : [])];
    const body = defined({
      query,
      limit: o.limit ?? 10,
      types: o.types,
      scopes: scopes.length ? scopes : undefined,
      tags: o.tags,
      since: o.since,
      until: o.until,
      include_tombstones: o.includeTombstones || undefined,
    });
    return (await this.call<{ hits: Hit[] }>("POST", "/v1/retrieve", body)).hits;
  }

  /** One record by id (superseded and retracted ones included). */
  async get(id: string): Promise<MemoryRecord> {
    return (await this.call<{ record: MemoryRecord }>("GET", `/v1/records/${encodeURIComponent(id)}`)).record;
  }

  /** A record's lineage, links and audit log. */
  history(id: string): Promise<Record<string, unknown>> {
    return this.call("GET", `/v1/records/${encodeURIComponent(id)}/history`);
  }

  private async revise(id: string, action: string, body: Record<string, unknown>): Promise<MemoryRecord> {
    return (await this.call<{ record: MemoryRecord }>("POST", `/v1/records/${encodeURIComponent(id)}/${action}`, body)).record;
  }

  /** Replaces a record's payload; the old one stays in history with the rationale. */
  supersede(id: string, payload: Record<string, unknown>, rationale: string, actor = "client"): Promise<MemoryRecord> {
    return this.revise(id, "supersede", { change: { payload }, actor, rationale });
  }

  /** Withdraws a record (kept, marked retracted). */
  retract(id: string, rationale: string, actor = "client"): Promise<MemoryRecord> {
    return this.revise(id, "retract", { actor, rationale });
  }

  /** Flags a record as disputed. */
  contest(id: string, rationale: string, claim?: string, actor = "client"): Promise<MemoryRecord> {
    return this.revise(id, "contest", defined({ claim, actor, rationale }));
  }

  /** Marks a record as useful (its salience rises). */
  reinforce(id: string, rationale = "", actor = "client"): Promise<MemoryRecord> {
    return this.revise(id, "reinforce", { actor, rationale });
  }

  /** Erases for good what the selection chooses; `dryRun` lists what would go. */
  forget(s: ForgetSelection): Promise<ForgetReport> {
    if (!s.ids?.length && !s.query && !s.subject && !s.user) {
      return Promise.reject(new TypeError("forget needs ids, query, subject or user: what to erase"));
    }
    const body = defined({ ids: s.ids, query: s.query, subject: s.subject, user: s.user });
    return this.call("POST", "/v1/forget", { ...body, reason: s.reason, dry_run: s.dryRun ?? false });
  }

  /** A memory hook with its event as the agent sends it. */
  hook(name: HookName, event: Record<string, unknown>): Promise<HookOutcome> {
    if (!HOOKS.includes(name)) {
      return Promise.reject(new TypeError(`unknown hook ${JSON.stringify(name)}; hooks: ${HOOKS.join(", ")}`));
    }
    return this.call("POST", `/v1/hooks/${name}`, event);
  }
}
