// Sends CloudEvents to a broker's ingress with the CloudEvents SDK for JavaScript's own HTTP
// transport (httpTransport: Node's http, which streams the body chunked): binary and structured
// through emitterFor, batches as a Message of the SDK's batch content type through the same
// transport. Prints one JSON line: requests sent per mode, the refusals' bodies, and how a probe
// saw the SDK frame its bodies.
// Usage: node send.mjs INGRESS_URL COUNT
import http from "node:http";
import { CloudEvent, CONSTANTS, emitterFor, httpTransport, Mode } from "cloudevents";

const [url, countText] = process.argv.slice(2);
const count = Number(countText);
const BATCH = 4;

function expectedData(id) {
  return { id, text: "h\u00e9llo \u2601\ufe0f", n: id.length };
}

function event(id) {
  return new CloudEvent({
    id, source: "/interop/js", type: "interop.js", datacontenttype: "application/json",
    data: expectedData(id),
  });
}

// What the SDK's transport puts on the wire: a local server records the framing headers.
async function probe() {
  const seen = [];
  const server = http.createServer((req, res) => {
    seen.push({ te: req.headers["transfer-encoding"] || null, cl: req.headers["content-length"] || null });
    req.resume();
    req.on("end", () => { res.statusCode = 202; res.end(); });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const sink = `http://127.0.0.1:${server.address().port}/`;
  await emitterFor(httpTransport(sink), { mode: Mode.BINARY })(event("probe-b"));
  await emitterFor(httpTransport(sink), { mode: Mode.STRUCTURED })(event("probe-s"));
  server.close();
  return seen;
}

async function main() {
  const framing = await probe();
  // The SDK's transport resolves with the answer's headers and body only (no status): the
  // broker's refusals are problem+json bodies, its acceptance has none.
  const refused = [];
  const sent = { binary: 0, structured: 0, batch: 0 };
  const note = (mode, r) => {
    sent[mode] += 1;
    if (String(r.headers["content-type"] || "").includes("problem+json")) refused.push(r.body);
  };
  const transport = httpTransport(url);
  for (const mode of [Mode.BINARY, Mode.STRUCTURED]) {
    const emit = emitterFor(transport, { mode });
    for (let i = 0; i < count; i++) note(mode, await emit(event(`${mode}-${i}`)));
  }
  for (let b = 0; b * BATCH < count; b++) {
    const events = [];
    for (let i = b * BATCH; i < Math.min(count, (b + 1) * BATCH); i++) events.push(event(`batch-${i}`));
    const message = {
      headers: { "content-type": CONSTANTS.MIME_CE_BATCH },
      body: JSON.stringify(events.map((e) => e.toJSON())),
    };
    note(Mode.BATCH, await transport(message));
  }
  process.stdout.write(JSON.stringify({ framing, sent, refused }) + "\n");
}

main().catch((err) => { console.error(err); process.exit(1); });
