// Small DOM helpers. Text always goes in as text nodes (never as HTML), so
// nothing an API returns can run as script.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

let statusTimer;
export function say(message, error = false) {
  const s = document.getElementById("status");
  s.className = error ? "status error" : "status";
  s.textContent = message;
  clearTimeout(statusTimer);
  statusTimer = setTimeout(() => (s.textContent = ""), error ? 8000 : 4000);
}

let uid = 0;
// A labelled input, select or textarea; `attrs.id` may name it.
export function field(label, control) {
  const id = control.id || `f${++uid}`;
  control.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, label), control);
}

export function input(attrs = {}) {
  return h("input", { type: "text", ...attrs });
}

export function select(attrs, options) {
  return h("select", attrs, options.map(([value, text]) => h("option", { value }, text)));
}

// A table of `rows` with `columns` [{title, value: row => text|Node, num}],
// `size` rows a page, and Previous/Next buttons.
export function table(caption, columns, rows, { size = 20, id, empty = "Nothing yet." } = {}) {
  const wrap = h("div", { class: "table", id });
  let page = 0;
  const pages = Math.max(1, Math.ceil(rows.length / size));
  const draw = () => {
    const slice = rows.slice(page * size, page * size + size);
    const t = h(
      "table",
      {},
      h("caption", { class: "muted" }, caption),
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : null }, c.title)))),
      h(
        "tbody",
        {},
        slice.length
          ? slice.map((r) => h("tr", {}, columns.map((c) => h("td", { class: c.num ? "num" : null }, c.value(r)))))
          : h("tr", {}, h("td", { colspan: columns.length }, empty)),
      ),
    );
    const nav = rows.length > size
      ? h(
          "div",
          { class: "pager", role: "navigation", "aria-label": `${caption}: pages` },
          h("button", { type: "button", class: "secondary", disabled: page === 0, onclick: () => { page--; draw(); } }, "Previous"),
          h("span", {}, `Page ${page + 1} of ${pages}`),
          h("button", { type: "button", class: "secondary", disabled: page >= pages - 1, onclick: () => { page++; draw(); } }, "Next"),
        )
      : null;
    wrap.replaceChildren(t, nav || "");
  };
  draw();
  return wrap;
}

export const when = (iso) => (iso ? new Date(iso).toLocaleString() : "");
export const list = (v) => (Array.isArray(v) ? v.join(", ") : v === null || v === undefined ? "any" : String(v));

// Lines of CSV from objects (RFC 4180 quoting).
export function csv(columns, rows) {
  const q = (v) => {
    const s = v === null || v === undefined ? "" : String(v);
    return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [columns.map(q).join(","), ...rows.map((r) => columns.map((c) => q(r[c])).join(","))].join("\r\n") + "\r\n";
}

export function download(name, text, type = "text/csv") {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
