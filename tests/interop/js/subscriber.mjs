// A subscriber that parses every delivery with the CloudEvents SDK for JavaScript (HTTP.toEvent)
// and prints one JSON line per event: id, type, source and data as the SDK read them.
// Usage: node subscriber.mjs   (prints "listening PORT" first)
import http from "node:http";
import { HTTP } from "cloudevents";

const server = http.createServer((req, res) => {
  const parts = [];
  req.on("data", (part) => parts.push(part));
  req.on("end", () => {
    try {
      const got = HTTP.toEvent({ headers: req.headers, body: Buffer.concat(parts).toString("utf-8") });
      for (const e of Array.isArray(got) ? got : [got]) {
        process.stdout.write(JSON.stringify({ id: e.id, type: e.type, source: e.source, data: e.data }) + "\n");
      }
      res.statusCode = 202;
    } catch (err) {
      process.stdout.write(JSON.stringify({ error: String(err) }) + "\n");
      res.statusCode = 400;
    }
    res.end();
  });
});
server.listen(0, "127.0.0.1", () => process.stdout.write(`listening ${server.address().port}\n`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
