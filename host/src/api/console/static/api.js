// Calls to the Gatehouse API with the admin key from session storage, sent as
// a bearer header (no cookies, so nothing for a cross-site request to ride on).

const KEY = "gatehouse.adminKey";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const session = {
  key: () => sessionStorage.getItem(KEY),
  set: (k) => sessionStorage.setItem(KEY, k),
  clear: () => sessionStorage.removeItem(KEY),
};

// Called when the key stops being accepted (401, or 403 on an admin route).
let onRefused = () => {};
export function whenRefused(f) {
  onRefused = f;
}

export async function api(method, path, body, key = session.key()) {
  if (!key) throw new ApiError(401, "UNAUTHORIZED", "not signed in");
  const headers = { Authorization: `Bearer ${key}` };
  const init = { method, headers, credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  const text = await r.text();
  let v = null;
  try {
    v = text ? JSON.parse(text) : null;
  } catch {
    v = { raw: text };
  }
  if (!r.ok) {
    const e = (v && v.error) || {};
    const code = typeof e === "object" ? e.code : v && v.code;
    const message = (typeof e === "object" ? e.message : v && v.message) || `${r.status} ${r.statusText}`;
    const err = new ApiError(r.status, code, message);
    if (r.status === 401 || (r.status === 403 && path.startsWith("/api/admin/"))) onRefused(err);
    throw err;
  }
  return v && Object.prototype.hasOwnProperty.call(v, "data") ? v.data : v;
}

export const get = (p, key) => api("GET", p, undefined, key);
export const post = (p, b = {}) => api("POST", p, b);
export const put = (p, b) => api("PUT", p, b);
export const del = (p) => api("DELETE", p);

// A query string from the non-empty fields of an object.
export function qs(o) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null && v !== "") p.set(k, v);
  const s = p.toString();
  return s ? `?${s}` : "";
}
