// The local console (docs/console.md): plain DOM over the control-plane API and /ui/events.
const CP = "/apis/eventing.knative.dev/v1/namespaces";
const SB = "/apis/serverless-broker.dev/v1alpha1/namespaces";
const TAIL_ROWS = 500; // rows kept on the page
const $ = (id) => document.getElementById(id);
// This run's token, written into the page by the server: the signing proxy forwards only calls
// that carry it, and the local runtime wants it on a browser's control-plane writes.
const TOKEN = document.querySelector('meta[name="console-token"]').content;
const ns = () => encodeURIComponent($("namespace").value.trim() || "default");
let dlqTrigger = null;
let tail = null;

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text == null ? "" : String(text);
  if (cls) td.className = cls;
  return td;
}

function say(text, isError) {
  const s = $("status");
  s.textContent = text;
  s.className = isError ? "error" : "";
}

async function api(method, path, body) {
  const init = { method, headers: { accept: "application/json", "x-console-token": TOKEN } };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let doc = null;
  try { doc = text ? JSON.parse(text) : null; } catch { doc = { detail: text }; }
  if (!r.ok) {
    const why = doc && (doc.detail || doc.title) ? `${doc.title || ""}: ${doc.detail || ""}` : text;
    throw new Error(`${r.status} ${why}`);
  }
  return doc;
}

function ready(doc) {
  const conds = (doc.status && doc.status.conditions) || [];
  const c = conds.find((x) => x.type === "Ready") || {};
  const others = conds.filter((x) => x.status !== "True" && x.type !== "Ready")
    .map((x) => `${x.type}: ${x.reason || ""} ${x.message || ""}`.trim());
  return [c.status || "Unknown", [c.reason, c.message, ...others].filter(Boolean).join("; ")];
}

function filtersOf(spec) {
  if (spec.filters && spec.filters.length) return JSON.stringify(spec.filters);
  return JSON.stringify((spec.filter && spec.filter.attributes) || {});
}

async function loadResources() {
  try {
    const [brokers, triggers, connections] = await Promise.all([
      api("GET", `${CP}/${ns()}/brokers`), api("GET", `${CP}/${ns()}/triggers`),
      api("GET", `${SB}/${ns()}/connections`)]);
    const bt = $("brokers").tBodies[0];
    bt.replaceChildren();
    for (const b of brokers.items || []) {
      const row = bt.insertRow();
      const [st, reason] = ready(b);
      cell(row, b.metadata.name);
      cell(row, st);
      cell(row, reason, "wrap");
      cell(row, b.status && b.status.address ? b.status.address.url : "", "wrap");
      // The EventPolicies that apply: who may send to it (docs/security.md).
      cell(row, ((b.status && b.status.policies) || []).map((p) => p.name).join(", "), "wrap");
    }
    const tt = $("triggers").tBodies[0];
    tt.replaceChildren();
    for (const t of triggers.items || []) {
      const row = tt.insertRow();
      row.dataset.trigger = t.metadata.name;
      const [st, reason] = ready(t);
      cell(row, t.metadata.name);
      cell(row, t.spec.broker);
      cell(row, filtersOf(t.spec), "wrap");
      const [kind, where] = targetOf(t);
      cell(row, kind);
      cell(row, where, "wrap");
      cell(row, (t.status && t.status.subscriberAudience) || "", "wrap");
      cell(row, (t.metadata.annotations || {})["serverless-broker/connection"] || "");
      cell(row, st);
      cell(row, reason, "wrap");
      const actions = row.insertCell();
      const edit = document.createElement("button");
      edit.type = "button";
      edit.textContent = "Edit";
      edit.addEventListener("click", () => editTrigger(t));
      const dlq = document.createElement("button");
      dlq.type = "button";
      dlq.textContent = "Dead letters";
      dlq.className = "open-dlq";
      dlq.addEventListener("click", () => openDlq(t.metadata.name));
      actions.append(edit, dlq);
    }
    const ct = $("connections").tBodies[0];
    ct.replaceChildren();
    for (const c of connections.items || []) {
      const row = ct.insertRow();
      row.dataset.connection = c.metadata.name;
      const [st, reason] = ready(c);
      const [kind, secret] = authOf(c.spec.auth || {});
      cell(row, c.metadata.name);
      cell(row, kind);
      cell(row, secret, "wrap");
      cell(row, st);
      cell(row, reason, "wrap");
    }
    say(`${(brokers.items || []).length} brokers, ${(triggers.items || []).length} triggers, ` +
      `${(connections.items || []).length} connections`);
  } catch (e) {
    say(String(e.message || e), true);
  }
}

// A trigger's subscriber (docs/targets.md): what kind of target it is, and where events go (a
// ref shows the name and the address the broker resolved it to).
function targetOf(t) {
  const s = t.spec.subscriber || {};
  const resolved = (t.status && t.status.subscriberUri) || "";
  if (s.ref) return [s.ref.kind, resolved ? `${s.ref.name} → ${resolved}` : s.ref.name];
  const uri = s.uri || "";
  if (uri.startsWith("arn:")) return [`ARN (${uri.split(":")[2]})`, uri];
  if (uri.startsWith("kafka:")) return ["Kafka topic", uri];
  return ["HTTP URL", uri];
}

// A Connection's auth (docs/targets.md): its kind and the ARN of its secret, never a value (the
// API holds none: the secrets stay in Secrets Manager).
function authOf(auth) {
  const kind = Object.keys(auth)[0] || "";
  const fields = auth[kind] || {};
  const ref = fields.secretRef || fields.clientSecretRef;
  if (ref) return [kind, ref.arn || ""];
  if (kind === "awsSigV4") return [kind, `${fields.service || ""} in ${fields.region || ""}`];
  return [kind, ""];
}

function editTrigger(t) {
  const f = $("trigger-form").elements;
  f.name.value = t.metadata.name;
  f.broker.value = t.spec.broker;
  f.subscriber.value = (t.spec.subscriber && t.spec.subscriber.uri) || "";
  f.filter.value = JSON.stringify((t.spec.filter && t.spec.filter.attributes) || {});
  f.filters.value = JSON.stringify(t.spec.filters || []);
  const d = t.spec.delivery || {};
  f.retry.value = d.retry == null ? "" : d.retry;
  f.backoffDelay.value = d.backoffDelay || "";
}

function formFilters() {
  const f = $("trigger-form").elements;
  const filters = JSON.parse(f.filters.value || "[]");
  if (Array.isArray(filters) && filters.length) return { filters };
  return { filter: { attributes: JSON.parse(f.filter.value || "{}") } };
}

async function testFilter() {
  const out = $("test-result");
  try {
    const event = JSON.parse($("trigger-form").elements.event.value);
    const r = await api("POST", `${CP}/${ns()}/triggers-test`, { ...formFilters(), event });
    out.textContent = `${r.matched ? "matched" : "not matched"}: ${(r.reasons || []).join("; ")}`;
    out.className = r.matched ? "" : "error";
  } catch (e) {
    out.textContent = String(e.message || e);
    out.className = "error";
  }
}

async function saveTrigger(ev) {
  ev.preventDefault();
  const f = $("trigger-form").elements;
  const out = $("save-result");
  try {
    const spec = { broker: f.broker.value.trim(), subscriber: { uri: f.subscriber.value.trim() },
      ...formFilters() };
    const delivery = {};
    if (f.retry.value !== "") delivery.retry = Number(f.retry.value);
    if (f.backoffDelay.value.trim()) delivery.backoffDelay = f.backoffDelay.value.trim();
    if (Object.keys(delivery).length) spec.delivery = delivery;
    const name = f.name.value.trim();
    await api("PUT", `${CP}/${ns()}/triggers/${encodeURIComponent(name)}`,
      { metadata: { name }, spec });
    out.textContent = `saved ${name}`;
    out.className = "";
    await loadResources();
  } catch (e) {
    out.textContent = String(e.message || e);
    out.className = "error";
  }
}

function dlqPath() {
  return `${CP}/${ns()}/triggers/${encodeURIComponent(dlqTrigger)}/deadletters`;
}

async function openDlq(name) {
  dlqTrigger = name;
  $("dlq-trigger").textContent = `of ${name}`;
  for (const id of ["dlq-refresh", "dlq-redrive", "dlq-purge"]) $(id).disabled = false;
  $("dead-letter").textContent = "";
  await loadDlq();
}

async function loadDlq() {
  const body = $("dead-letters").tBodies[0];
  try {
    const r = await api("GET", `${dlqPath()}?limit=100`);
    body.replaceChildren();
    for (const item of r.items || []) {
      const row = body.insertRow();
      const e = item.event || {};
      cell(row, item.messageId);
      cell(row, e.id || item.unreadable);
      cell(row, e.type);
      cell(row, e.knativeerrorcode);
      cell(row, item.receiveCount);
      row.className = "dead-letter";
      row.addEventListener("click", () => {
        $("dead-letter").textContent = JSON.stringify(decoded(item), null, 2);
      });
    }
    $("dlq-result").textContent = `${r.count} shown, ${r.depth} in the queue`;
  } catch (e) {
    $("dlq-result").textContent = String(e.message || e);
  }
}

function decoded(item) {
  // knativeerrordata is base64: shown decoded beside it.
  const e = item.event || {};
  if (typeof e.knativeerrordata !== "string") return item;
  let text;
  try { text = atob(e.knativeerrordata); } catch { text = "(not base64)"; }
  return { ...item, knativeerrordataDecoded: text };
}

async function dlqAction(method, suffix, what) {
  try {
    const r = await api(method, dlqPath() + suffix);
    $("dead-letter").textContent = "";
    await loadDlq();
    $("dlq-result").textContent = `${what}: ${JSON.stringify(r)}`;
  } catch (e) {
    $("dlq-result").textContent = String(e.message || e);
  }
}

function openTail() {
  // A new stream replays the server's recent entries: start the table afresh.
  if (tail) tail.close();
  $("tail-entries").tBodies[0].replaceChildren();
  const q = new URLSearchParams({ namespace: $("namespace").value.trim() || "default" });
  const b = $("tail-broker").value.trim();
  const t = $("tail-trigger").value.trim();
  if (b) q.set("broker", b);
  if (t) q.set("trigger", t);
  tail = new EventSource(`/ui/events?${q}`);
  tail.addEventListener("open", () => { $("tail-state").textContent = "live"; });
  tail.addEventListener("error", () => {
    $("tail-state").textContent = tail.readyState === EventSource.CLOSED
      ? "live tail unavailable here (deployed: docs/console.md)" : "reconnecting…";
  });
  tail.addEventListener("dropped", () => {
    $("tail-state").textContent = "fell behind: dropped by the server, reconnecting";
  });
  tail.addEventListener("entry", (m) => addTailRow(JSON.parse(m.data)));
}

function addTailRow(e) {
  const body = $("tail-entries").tBodies[0];
  // Newest first, by time: ingress archives an event after queueing it, so its delivery can
  // reach the tail first; a late entry still takes its place (RFC 3339 text sorts as time;
  // in the same millisecond an acceptance goes below what followed it).
  const at = e.at || "";
  let place = 0;
  const below = (r) => r.dataset.at > at || (r.dataset.at === at && e.kind === "accepted");
  while (place < body.rows.length && below(body.rows[place])) place++;
  const row = body.insertRow(place);
  row.dataset.at = at;
  row.className = `kind-${e.kind}`;
  row.dataset.kind = e.kind;
  row.dataset.id = e.id || "";
  cell(row, e.at);
  cell(row, e.kind);
  cell(row, e.broker);
  cell(row, (e.triggers || []).join(", "));
  cell(row, e.id);
  cell(row, e.type);
  cell(row, e.attempt);
  cell(row, e.status == null ? (e.reason || "") : e.status);
  cell(row, e.latencyMs == null ? "" : Number(e.latencyMs).toFixed(1));
  while (body.rows.length > TAIL_ROWS) body.deleteRow(-1);
}

// ---- charts: inline SVG, no library ----------------------------------------------------------

function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    const m = /^broker_(\w+?)(?:_total)?\{(.*)\} ([-+\d.eE]+)$/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const kv of m[2].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[kv[1]] = kv[2];
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

function bars(title, rows, cls) {
  const max = Math.max(1, ...rows.map((r) => r[1]));
  const h = 18;
  const svgNS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(svgNS, "svg");
  svg.setAttribute("width", "360");
  svg.setAttribute("height", String(h * rows.length + 20));
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", title);
  const t = document.createElementNS(svgNS, "text");
  t.setAttribute("x", "0"); t.setAttribute("y", "12");
  t.textContent = title;
  svg.append(t);
  rows.forEach(([label, value], i) => {
    const y = 18 + i * h;
    const r = document.createElementNS(svgNS, "rect");
    r.setAttribute("x", "120"); r.setAttribute("y", String(y));
    r.setAttribute("height", String(h - 4));
    r.setAttribute("width", String(Math.max(1, (200 * value) / max)));
    r.setAttribute("class", cls);
    const l = document.createElementNS(svgNS, "text");
    l.setAttribute("x", "0"); l.setAttribute("y", String(y + 11));
    l.textContent = label.length > 18 ? label.slice(0, 17) + "…" : label;
    const v = document.createElementNS(svgNS, "text");
    v.setAttribute("x", String(124 + (200 * value) / max)); v.setAttribute("y", String(y + 11));
    v.textContent = Number.isInteger(value) ? String(value) : value.toFixed(1);
    svg.append(r, l, v);
  });
  return svg;
}

async function loadCharts() {
  const area = $("chart-area");
  try {
    const [text, stats] = await Promise.all([
      fetch("/metrics", { headers: { "x-console-token": TOKEN } }).then((r) => r.text()),
      fetch("/ui/stats").then((r) => r.json())]);
    const namespace = $("namespace").value.trim() || "default";
    const per = {};
    for (const m of parseMetrics(text)) {
      if (!m.labels.trigger || m.labels.namespace !== namespace) continue;
      const key = `${m.labels.broker}/${m.labels.trigger}`;
      per[key] = per[key] || { delivered: 0, dead: 0 };
      if (m.name === "delivery_count") per[key].delivered += m.value;
      if (m.name === "dead_letter_count") per[key].dead += m.value;
    }
    const latency = [];
    for (const [key, s] of Object.entries(stats.triggers || {})) {
      if (!key.startsWith(`${namespace}/`) || !s.attempts) continue;
      latency.push([key.slice(namespace.length + 1), s.latencyMsSum / s.attempts]);
    }
    const keys = Object.keys(per).sort();
    area.replaceChildren(
      bars("delivery attempts", keys.map((k) => [k, per[k].delivered]), "bar-delivered"),
      bars("dead-lettered", keys.map((k) => [k, per[k].dead]), "bar-dead"),
      bars("mean delivery latency (ms)", latency.sort(), "bar-latency"));
  } catch (e) {
    area.textContent = String(e.message || e);
  }
}

function refreshAll() {
  loadResources();
  loadCharts();
  if (dlqTrigger) loadDlq();
}

$("refresh").addEventListener("click", () => { refreshAll(); openTail(); });
$("trigger-form").addEventListener("submit", saveTrigger);
$("test-filter").addEventListener("click", testFilter);
$("dlq-refresh").addEventListener("click", loadDlq);
$("dlq-redrive").addEventListener("click", () => dlqAction("POST", "/redrive", "redriven"));
$("dlq-purge").addEventListener("click", () => {
  if (confirm(`Purge every dead letter of ${dlqTrigger}?`)) dlqAction("DELETE", "", "purged");
});
$("tail-apply").addEventListener("click", openTail);
$("tail-clear").addEventListener("click", () => $("tail-entries").tBodies[0].replaceChildren());
refreshAll();
openTail();
setInterval(loadCharts, 5000);
