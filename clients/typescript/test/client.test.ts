// The client against a live daemon: MNEME_URL and MNEME_API_KEY name it (mneme's test
// suite starts one; see crates/mneme/tests/it/clients.rs).
import { describe, expect, it } from "vitest";
import { type HookName, MnemeClient, MnemeError } from "../src/index";

const url = process.env.MNEME_URL!;
const mneme = new MnemeClient({ url, apiKey: process.env.MNEME_API_KEY });

describe("MnemeClient", () => {
  it("reads health without a key and refuses a wrong key", async () => {
    expect((await new MnemeClient({ url }).health()).service).toBe("mneme");
    const wrong = new MnemeClient({ url, apiKey: "not-the-key-0123456789" });
    await expect(wrong.recall("x")).rejects.toMatchObject({ status: 401, code: "unauthenticated" });
  });

  it("remembers and recalls", async () => {
    const record = await mneme.remember("The TypeScript build moved to esbuild", { sender: "ci", scope: "user:web-team" });
    expect(record.memory_type).toBe("episodic");
    const hits = await mneme.recall("which bundler does the build use", { user: "web-team" });
    expect(hits[0]?.record.id).toBe(record.id);
    expect(typeof hits[0]?.score.score).toBe("number");
  });

  it("supersedes a fact, keeping its history, and retracts", async () => {
    const fact = await mneme.rememberFact("kim", "works at", "Acme", { scope: "user:kim" });
    const newer = await mneme.supersede(fact.id, { ...fact.payload, object: "Globex" }, "kim changed jobs");
    expect(newer.payload?.object).toBe("Globex");
    expect((await mneme.get(fact.id)).status).toBe("superseded");
    expect(JSON.stringify(await mneme.history(fact.id))).toContain("kim changed jobs");
    expect((await mneme.retract(newer.id, "a test")).status).toBe("retracted");
  });

  it("plans a forget, then erases", async () => {
    await mneme.remember("the wifi password is hunter2", { scope: "user:office" });
    const plan = await mneme.forget({ query: "wifi password", reason: "asked to", dryRun: true });
    expect(plan.dry_run).toBe(true);
    expect(plan.records.length).toBeGreaterThan(0);
    const done = await mneme.forget({ query: "wifi password", reason: "asked to" });
    expect(done.records.map((r) => r.id).sort()).toEqual(plan.records.map((r) => r.id).sort());
    const left = await mneme.recall("wifi password", { user: "office" });
    expect(left.filter((h) => JSON.stringify(h.record.payload).includes("hunter2"))).toEqual([]);
    await expect(mneme.forget({ reason: "nothing chosen" })).rejects.toBeInstanceOf(TypeError);
  });

  it("runs hooks", async () => {
    const out = await mneme.hook("message_received", { event: { content: "I prefer green tea", from: "sam" } });
    expect(out.error ?? null).toBeNull();
    expect(out.record_ids.length).toBeGreaterThan(0);
    await expect(mneme.hook("no_such_hook" as HookName, {})).rejects.toBeInstanceOf(TypeError);
  });

  it("names what was wrong", async () => {
    const missing = await mneme.get("01a00000-0000-7000-8000-000000000000").catch((e) => e);
    expect(missing).toBeInstanceOf(MnemeError);
    expect(missing).toMatchObject({ status: 404, code: "not_found" });
    await expect(mneme.recall("x", { limit: 5000 })).rejects.toMatchObject({ code: "invalid_argument" });
  });
});
