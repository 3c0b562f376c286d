// Overview (this host, per minute), usage over time with CSV export, and the audit log.
import { get, qs } from "./api.js";
import { lineChart } from "./chart.js";
import { csv, download, field, h, input, say, select, table, when } from "./ui.js";

const hhmm = (iso) => new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
const day = (iso) => new Date(iso).toLocaleDateString([], { month: "short", day: "numeric" });

function kpi(label, value, id) {
  return h("div", { class: "kpi", id }, h("span", { class: "v" }, value), h("span", { class: "muted" }, label));
}

export async function overview(root) {
  const minutes = select({ id: "overview-minutes" }, [["60", "Last hour"], ["360", "Last 6 hours"], ["1440", "Last 24 hours"]]);
  const body = h("div", { id: "overview-body" });
  const draw = async () => {
    const [o, chain] = await Promise.all([get(`/api/admin/overview${qs({ minutes: minutes.value })}`), get("/api/admin/audit/verify")]);
    const t = o.totals;
    const labels = o.points.map((p) => hhmm(p.end));
    const ms = (v) => (v === null || v === undefined ? "–" : `${v < 10 ? v.toFixed(1) : Math.round(v)} ms`);
    body.replaceChildren(
      h("div", { class: "kpis" },
        kpi("chat requests", t.requests, "kpi-requests"), kpi("errors (5xx)", t.errors, "kpi-errors"), kpi("refused (4xx)", t.refused, "kpi-refused"),
        kpi("p50 latency", ms(t.p50Ms), "kpi-p50"), kpi("p99 latency", ms(t.p99Ms), "kpi-p99"), kpi("failovers", t.failovers, "kpi-failovers"),
        kpi("Prompt Shield blocks", t.shieldBlocks, "kpi-shield"), kpi("DLP hits", t.dlpHits, "kpi-dlp"),
        kpi("audit chain", chain.ok ? "verified" : "BROKEN", "kpi-chain")),
      h("p", { class: "muted" }, `This host since ${when(o.since)}, one point per minute (the last one runs to now).`),
      h("div", { class: "cards" },
        h("div", { class: "card" }, lineChart("Requests, errors and refusals", labels, [
          { name: "requests", values: o.points.map((p) => p.requests) },
          { name: "errors", values: o.points.map((p) => p.errors) },
          { name: "refused", values: o.points.map((p) => p.refused) }])),
        h("div", { class: "card" }, lineChart("Latency p50 and p99 (ms)", labels, [
          { name: "p50", values: o.points.map((p) => p.p50Ms) },
          { name: "p99", values: o.points.map((p) => p.p99Ms) }])),
        h("div", { class: "card" }, lineChart("Failovers, Prompt Shield blocks and DLP hits", labels, [
          { name: "failovers", values: o.points.map((p) => p.failovers) },
          { name: "shield blocks", values: o.points.map((p) => p.shieldBlocks) },
          { name: "DLP hits", values: o.points.map((p) => p.dlpHits) }]))));
  };
  minutes.addEventListener("change", () => draw().catch((e) => say(e.message, true)));
  root.append(h("h1", {}, "Overview"), h("form", { "aria-label": "Time range", onsubmit: (e) => e.preventDefault() }, field("Range", minutes)), body);
  await draw();
}

const USAGE_COLUMNS = ["at", "userId", "keyId", "groupId", "model", "requestId", "promptTokens", "completionTokens", "totalTokens"];

export async function usage(root) {
  const [people, allKeys] = await Promise.all([get("/api/admin/users"), get("/api/admin/keys")]);
  const user = select({ id: "usage-user" }, [["", "all users"], ...people.map((u) => [u.id, u.name])]);
  const key = select({ id: "usage-key" }, [["", "all keys"], ...allKeys.map((k) => [k.id, `${k.name} (${k.prefix})`])]);
  const model = input({ id: "usage-model", placeholder: "e.g. echo/default" });
  const bucket = select({ id: "usage-bucket" }, [["hour", "per hour (last 24 h)"], ["day", "per day (last 14 days)"]]);
  const out = h("div", { id: "usage-body" });
  let rows = [];
  const filters = () => ({ userId: user.value, keyId: key.value, model: model.value.trim() });
  const draw = async () => {
    const now = new Date();
    const from = new Date(now - (bucket.value === "hour" ? 24 * 3600e3 : 14 * 86400e3)).toISOString();
    const f = filters();
    const [series, page] = await Promise.all([
      get(`/api/admin/usage/series${qs({ ...f, bucket: bucket.value, from })}`),
      get(`/api/admin/usage${qs({ ...f, from, limit: 1000 })}`),
    ]);
    rows = page.records;
    const labels = series.points.map((p) => (bucket.value === "hour" ? hhmm(p.start) : day(p.start)));
    const names = Object.fromEntries([...people.map((u) => [u.id, u.name]), ...allKeys.map((k) => [k.id, `${k.name} (${k.prefix})`])]);
    const totals = (caption, id, data) => table(caption, [
      { title: "Name", value: (r) => names[r.id] || r.id || "(none)" },
      { title: "Requests", value: (r) => r.requests, num: true },
      { title: "Tokens", value: (r) => r.totalTokens, num: true }], data, { id, size: 10 });
    out.replaceChildren(
      h("div", { class: "kpis" }, kpi("requests", page.total.requests, "usage-requests"), kpi("tokens", page.total.totalTokens, "usage-tokens")),
      h("div", { class: "cards" },
        h("div", { class: "card" }, lineChart("Requests over time", labels, [{ name: "requests", values: series.points.map((p) => p.requests) }])),
        h("div", { class: "card" }, lineChart("Tokens over time", labels, [
          { name: "prompt tokens", values: series.points.map((p) => p.promptTokens) },
          { name: "completion tokens", values: series.points.map((p) => p.completionTokens) }]))),
      h("div", { class: "cards" }, totals("By user", "usage-by-user", page.users), totals("By key", "usage-by-key", page.keys), totals("By model", "usage-by-model", page.models)),
      h("h2", {}, "Requests"),
      page.nextCursor ? h("p", { class: "muted" }, "Showing the newest 1000 requests; narrow the filters for older ones.") : null,
      table("Billed requests, newest first", [
        { title: "Time", value: (r) => when(r.at) },
        { title: "User", value: (r) => names[r.userId] || r.userId },
        { title: "Key", value: (r) => names[r.keyId] || r.keyId },
        { title: "Model", value: (r) => r.model },
        { title: "Request", value: (r) => h("code", {}, r.requestId) },
        { title: "Tokens", value: (r) => r.totalTokens, num: true }], rows, { id: "usage-rows" }));
  };
  const form = h("form", { id: "usage-filters", "aria-label": "Usage filters" },
    field("User", user), field("Key", key), field("Model", model), field("Buckets", bucket),
    h("button", { type: "submit" }, "Show"),
    h("button", { type: "button", class: "secondary", id: "usage-csv", onclick: () => download("gatehouse-usage.csv", csv(USAGE_COLUMNS, rows)) }, "Export CSV"));
  form.addEventListener("submit", (e) => { e.preventDefault(); draw().catch((x) => say(x.message, true)); });
  root.append(h("h1", {}, "Usage"), form, out);
  await draw();
}

export async function audit(root) {
  const type = input({ id: "audit-type", placeholder: "e.g. api_key_management" });
  const severity = select({ id: "audit-severity" }, [["", "any"], ["info", "info"], ["warning", "warning"], ["error", "error"], ["critical", "critical"]]);
  const userId = input({ id: "audit-user", placeholder: "user id (by them)" });
  const about = input({ id: "audit-about", placeholder: "user id (about them)" });
  const search = input({ id: "audit-search", type: "search" });
  const start = input({ id: "audit-start", type: "date" });
  const chain = h("p", { id: "audit-chain", "aria-live": "polite" }, "Verifying the chain…");
  const detail = h("section", { id: "audit-detail", "aria-label": "Record detail" });
  const out = h("div", { id: "audit-body" });
  let page = 1;
  const draw = async () => {
    const v = await get(`/audit-logs${qs({ type: type.value.trim(), severity: severity.value, userId: userId.value.trim(), aboutUserId: about.value.trim(), search: search.value.trim(), startDate: start.value, page, limit: 50 })}`);
    const p = v.pagination;
    out.replaceChildren(
      table(`Audit records ${p.total ? `(${p.total}, page ${p.page} of ${p.pages})` : ""}`, [
        { title: "Time", value: (r) => when(r.timestamp) },
        { title: "Type", value: (r) => r.type },
        { title: "Severity", value: (r) => r.severity },
        { title: "Description", value: (r) => r.description },
        { title: "By", value: (r) => (r.user ? r.user.name || r.user.id : "") },
        { title: "Detail", value: (r) => h("button", { type: "button", class: "secondary", onclick: () => {
          detail.replaceChildren(h("h2", {}, `Record ${r.id}`), h("pre", { tabindex: "0", "aria-label": "Record as JSON" }, JSON.stringify(r, null, 2)));
          detail.querySelector("pre").focus();
        } }, "Show") },
      ], v.logs, { id: "audit-table", size: 50 }),
      h("div", { class: "pager", role: "navigation", "aria-label": "Audit pages" },
        h("button", { type: "button", class: "secondary", disabled: p.page <= 1, onclick: () => { page--; draw(); } }, "Newer"),
        h("button", { type: "button", class: "secondary", disabled: p.page >= p.pages, onclick: () => { page++; draw(); } }, "Older")));
  };
  const form = h("form", { id: "audit-filters", "aria-label": "Audit filters" },
    field("Type", type), field("Severity", severity), field("By user", userId), field("About user", about), field("Search", search), field("From", start),
    h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (e) => { e.preventDefault(); page = 1; draw().catch((x) => say(x.message, true)); });
  root.append(h("h1", {}, "Audit log"), chain, form, out, detail);
  await draw();
  const report = await get("/api/admin/audit/verify");
  chain.className = report.ok ? "ok" : "bad";
  chain.textContent = report.ok
    ? `Chain verified: ${report.records} records, no break.`
    : `Chain BROKEN: ${report.breaks} break(s); first at ${report.first_break}: ${report.detail || ""}`;
}
