// Service properties (XML) through TableServiceClient: read, change, read back, restore.
import assert from "node:assert/strict";
import { test } from "node:test";
import { serviceFromConn } from "./common.mjs";

test("getProperties / setProperties round-trip CORS rules and logging", async () => {
  const svc = serviceFromConn();
  const original = await svc.getProperties();
  assert.ok(original.logging && original.hourMetrics && original.minuteMetrics, JSON.stringify(original));
  const rule = {
    allowedOrigins: "https://example.test",
    allowedMethods: "GET,PUT",
    allowedHeaders: "x-ms-meta-a",
    exposedHeaders: "x-ms-request-id",
    maxAgeInSeconds: 60,
  };
  try {
    await svc.setProperties({ cors: [rule] });
    const changed = await svc.getProperties();
    assert.deepEqual(changed.cors, [rule]);
    assert.deepEqual(changed.logging, original.logging);
  } finally {
    await svc.setProperties({ cors: original.cors ?? [] });
  }
  assert.deepEqual((await svc.getProperties()).cors ?? [], original.cors ?? []);
});
