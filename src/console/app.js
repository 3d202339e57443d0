// toolgate console: recent exchanges (live over server-sent events), one exchange with its
// violations, captured bodies and a replay, the route table, health and a few counters drawn
// here. Talks only to the admin listener that served it; every text is set as text, never HTML.
"use strict";

const state = { rows: [], selected: null, filters: {}, series: {} };

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}

async function api(path, options) {
  const response = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
  if (response.status === 401) {
    showLogin();
    throw new Error("sign in first");
  }
  return response;
}

function showLogin() {
  document.getElementById("login").hidden = false;
  document.getElementById("exchanges").hidden = true;
  document.getElementById("gateway").hidden = true;
}

function checksOf(record) {
  return (record.violations || []).map((v) => v.check).join(", ");
}

function matches(record) {
  const f = state.filters;
  if (f.verdict && record.verdict !== f.verdict) return false;
  if (f.route && !String(record.route).includes(f.route)) return false;
  if (f.tenant && record.tenant !== f.tenant) return false;
  if (f.check && !(record.violations || []).some((v) => v.check === f.check)) return false;
  if (f.tool && !(record.calls || []).some((c) => c.name === f.tool)) return false;
  return true;
}

function row(record) {
  const tr = el("tr", undefined, record.verdict);
  tr.dataset.requestId = record.request_id;
  const calls = (record.calls || []).map((c) => c.name).join(", ");
  const cells = [record.timestamp, record.verdict, String(record.status), record.route,
    record.tenant || "", calls, checksOf(record), String((record.timings_ms || {}).total || "")];
  for (const text of cells) tr.appendChild(el("td", text));
  tr.addEventListener("click", () => openExchange(record.request_id));
  return tr;
}

function render() {
  const body = document.getElementById("rows");
  body.replaceChildren(...state.rows.filter(matches).map(row));
}

async function loadExchanges() {
  const response = await api("/console/api/exchanges");
  const data = await response.json();
  state.rows = data.exchanges || [];
  render();
}

function listen() {
  const badge = document.getElementById("live");
  const events = new EventSource("/console/api/events");
  events.onopen = () => { badge.textContent = "live"; badge.className = "badge on"; };
  events.onerror = () => { badge.textContent = "reconnecting…"; badge.className = "badge"; };
  events.onmessage = (message) => {
    const record = JSON.parse(message.data);
    state.rows.unshift(record);
    state.rows = state.rows.slice(0, 500);
    render();
  };
}

async function openExchange(id) {
  state.selected = id;
  const response = await api("/console/api/exchanges/" + encodeURIComponent(id));
  const data = await response.json();
  const audit = data.audit || {};
  document.getElementById("detail").hidden = false;
  document.getElementById("detail-id").textContent = id;
  document.getElementById("detail-summary").textContent =
    `${audit.verdict} · ${audit.status} · ${audit.method} ${audit.path} · route ${audit.route}`;
  const list = document.getElementById("detail-violations");
  list.replaceChildren(...(audit.violations || []).map((v) =>
    el("li", `${v.check} · ${v.tool || ""} · ${v.message}`)));
  if (!(audit.violations || []).length) list.replaceChildren(el("li", "none"));
  document.getElementById("detail-timings").textContent =
    JSON.stringify({ plugins: audit.plugins, timings_ms: audit.timings_ms, calls: audit.calls }, null, 2);
  const capture = data.capture;
  document.getElementById("detail-request").textContent =
    capture ? capture.request : "(not captured: set [audit] capture)";
  document.getElementById("detail-response").textContent = capture ? capture.response : "";
  document.getElementById("replay").disabled = !capture;
  document.getElementById("replay-result").textContent = "";
}

async function replay() {
  const id = state.selected;
  if (!id) return;
  const response = await api("/console/api/exchanges/" + encodeURIComponent(id) + "/replay", { method: "POST" });
  const data = await response.json();
  document.getElementById("replay-result").textContent = data.text || data.status || "";
}

async function loadGateway() {
  const overview = await (await api("/console/api/overview")).json();
  document.getElementById("routes").textContent = (overview.routes || []).join("\n");
  document.getElementById("health").textContent = JSON.stringify(overview.health, null, 2);
}

// Counters: sampled from /metrics every few seconds, each drawn as a small line of its rate:
// requests, blocks per check, on_block retries, and the average time toolgate added.
function totals(text) {
  const sums = { "requests/s": 0, "retries/s": 0, "added ms (avg)": null };
  let addedSum = 0;
  let addedCount = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const value = Number(line.split(" ").pop()) || 0;
    if (line.startsWith("toolgate_requests_total{")) sums["requests/s"] += value;
    else if (line.startsWith("toolgate_block_retries_total{")) sums["retries/s"] += value;
    else if (line.startsWith("toolgate_tool_calls_blocked_total{") && line.includes('mode="enforce"')) {
      const check = (line.match(/check="([^"]*)"/) || [])[1] || "?";
      sums[`blocks/s: ${check}`] = (sums[`blocks/s: ${check}`] || 0) + value;
    } else if (line.startsWith("toolgate_added_seconds_sum{")) addedSum += value;
    else if (line.startsWith("toolgate_added_seconds_count{")) addedCount += value;
  }
  sums["added ms (avg)"] = [addedSum, addedCount];
  return sums;
}

async function sample() {
  const text = await (await api("/metrics")).text();
  const now = Date.now() / 1000;
  for (const [name, total] of Object.entries(totals(text))) {
    const points = (state.series[name] = state.series[name] || []);
    points.push([now, total]);
    if (points.length > 60) points.shift();
  }
  draw();
}

// One value per interval: a counter's rate, or the added time's average over the interval.
function steps(name, points) {
  const values = [];
  for (let i = 1; i < points.length; i++) {
    const [t0, a] = points[i - 1];
    const [t1, b] = points[i];
    if (name.startsWith("added")) {
      const count = b[1] - a[1];
      values.push(count > 0 ? ((b[0] - a[0]) / count) * 1000 : 0);
    } else {
      values.push(t1 > t0 ? Math.max(0, (b - a) / (t1 - t0)) : 0);
    }
  }
  return values;
}

function draw() {
  const holder = document.getElementById("charts");
  holder.replaceChildren();
  for (const [name, points] of Object.entries(state.series)) {
    const box = el("div", undefined, "chart");
    box.appendChild(el("div", name));
    const canvas = el("canvas");
    canvas.width = 240; canvas.height = 60;
    const rates = steps(name, points);
    const context = canvas.getContext("2d");
    const top = Math.max(1e-9, ...rates);
    context.strokeStyle = "#1565c0";
    context.beginPath();
    rates.forEach((rate, i) => {
      const x = (i / Math.max(1, rates.length - 1)) * (canvas.width - 4) + 2;
      const y = canvas.height - 4 - (rate / top) * (canvas.height - 8);
      if (i === 0) context.moveTo(x, y); else context.lineTo(x, y);
    });
    context.stroke();
    box.appendChild(canvas);
    box.appendChild(el("div", rates.length ? `${rates[rates.length - 1].toFixed(2)} now, ${top.toFixed(2)} max` : "…"));
    holder.appendChild(box);
  }
}

function showTab(tab) {
  document.getElementById("exchanges").hidden = tab !== "exchanges";
  document.getElementById("gateway").hidden = tab !== "gateway";
  if (tab === "gateway") loadGateway().catch(() => {});
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("filters").addEventListener("input", (event) => {
    const form = new FormData(event.currentTarget);
    state.filters = Object.fromEntries(form.entries());
    render();
  });
  document.getElementById("replay").addEventListener("click", () => replay().catch(() => {}));
  for (const link of document.querySelectorAll(".tab")) {
    link.addEventListener("click", () => showTab(link.dataset.tab));
  }
  showTab(location.hash === "#gateway" ? "gateway" : "exchanges");
  loadExchanges().then(listen).catch(() => {});
  sample().catch(() => {});
  setInterval(() => sample().catch(() => {}), 3000);
});
