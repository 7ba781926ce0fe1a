// Service properties (XML) through getServiceProperties / setServiceProperties.
import assert from "node:assert/strict";
import { test } from "node:test";
import { call, service } from "./common.mjs";

test("getServiceProperties / setServiceProperties round-trip CORS rules", async () => {
  const svc = service();
  const { result: original } = await call(svc, "getServiceProperties");
  assert.ok(original.Logging && original.HourMetrics && original.MinuteMetrics, JSON.stringify(original));
  const rule = {
    AllowedOrigins: ["https://example.test"],
    AllowedMethods: ["GET", "PUT"],
    AllowedHeaders: ["x-ms-meta-a"],
    ExposedHeaders: ["x-ms-request-id"],
    MaxAgeInSeconds: 60,
  };
  try {
    await call(svc, "setServiceProperties", { ...original, Cors: { CorsRule: [rule] } });
    const { result: changed } = await call(svc, "getServiceProperties");
    assert.deepEqual(changed.Cors, { CorsRule: [rule] });
    assert.deepEqual(changed.Logging, original.Logging);
    assert.deepEqual(changed.HourMetrics, original.HourMetrics);
  } finally {
    await call(svc, "setServiceProperties", original);
  }
  assert.deepEqual((await call(svc, "getServiceProperties")).result, original);
});
