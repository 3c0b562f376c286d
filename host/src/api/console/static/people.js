// Users, keys (create, restrict, limits, revoke) and groups with their members.
import { del, get, post, put } from "./api.js";
import { field, h, input, list, say, select, table, when } from "./ui.js";

const lines = (s) => s.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);
const orNull = (s) => (s.trim() ? lines(s) : null);

function busy(form, f) {
  return async (ev) => {
    ev.preventDefault();
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    try {
      await f();
    } catch (e) {
      say(e.message, true);
    } finally {
      if (button) button.disabled = false;
    }
  };
}

export async function users(root) {
  const all = await get("/api/admin/users");
  const name = input({ id: "user-name", required: true, autocomplete: "off" });
  const email = input({ id: "user-email", type: "email", autocomplete: "off" });
  const form = h("form", { id: "create-user", "aria-label": "Create a user" },
    field("Name", name), field("Email", email), h("button", { type: "submit" }, "Create user"));
  form.addEventListener("submit", busy(form, async () => {
    const u = await post("/api/admin/users", { name: name.value, email: email.value || undefined });
    say(`Created user ${u.name} (${u.id}).`);
    await refresh(root, users);
  }));
  const act = (u) => h("span", {},
    h("button", { type: "button", class: "secondary", onclick: async () => {
      try {
        await put(`/api/admin/users/${encodeURIComponent(u.id)}`, { status: u.status === "active" ? "deactivated" : "active" });
        await refresh(root, users);
      } catch (e) { say(e.message, true); }
    } }, u.status === "active" ? `Deactivate ${u.name}` : `Reactivate ${u.name}`));
  root.append(h("h1", {}, "Users"), form,
    table("Users", [
      { title: "Name", value: (u) => u.name },
      { title: "Email", value: (u) => u.email },
      { title: "Id", value: (u) => h("code", {}, u.id) },
      { title: "Status", value: (u) => u.status },
      { title: "Created", value: (u) => when(u.createdAt) },
      { title: "Actions", value: act },
    ], all, { id: "users-table" }));
}

async function refresh(root, page) {
  root.replaceChildren();
  await page(root);
}

function limitsFields(prefix, current = {}) {
  const names = [["perMinute", "Per minute"], ["perHour", "Per hour"], ["perDay", "Per day"], ["perMonth", "Per month"]];
  const inputs = names.map(([k, label]) => [k, field(label, input({ id: `${prefix}-${k}`, type: "number", min: 1, value: current[k] ?? "", inputmode: "numeric" }))]);
  return {
    nodes: inputs.map(([, f]) => f),
    // Merge patch: an empty field clears the override.
    value: () => Object.fromEntries(inputs.map(([k, f]) => {
      const v = f.querySelector("input").value.trim();
      return [k, v ? Number(v) : null];
    })),
  };
}

export async function keys(root) {
  const [all, people, grps] = await Promise.all([get("/api/admin/keys"), get("/api/admin/users"), get("/api/admin/groups")]);
  const owner = select({ id: "key-user" }, people.map((u) => [u.id, `${u.name} (${u.email || u.id})`]));
  const group = select({ id: "key-group" }, [["", "none"], ...grps.map((g) => [g.id, g.name])]);
  const name = input({ id: "key-name", required: true, autocomplete: "off" });
  const admin = h("input", { id: "key-admin", type: "checkbox" });
  const models = input({ id: "key-models", placeholder: "any (e.g. echo/*)" });
  const secretBox = h("div", { id: "key-secret", "aria-live": "polite" });
  const form = h("form", { id: "create-key", "aria-label": "Create a key" },
    field("Owner", owner), field("Name", name), field("Group", group), field("Allowed models", models),
    h("div", { class: "field" }, h("label", { for: "key-admin" }, "Admin key"), admin),
    h("button", { type: "submit" }, "Create key"));
  form.addEventListener("submit", busy(form, async () => {
    const created = await post("/api/admin/keys", {
      userId: owner.value, name: name.value, admin: admin.checked,
      groupId: group.value || undefined, allowedModels: models.value.trim() ? lines(models.value) : undefined,
    });
    await refresh(root, keys);
    root.querySelector("#key-secret").replaceChildren(
      h("p", {}, `Key ${created.apiKey.name} (${created.apiKey.id}) created. Copy the secret now: it is not shown again.`),
      h("p", { class: "secret", id: "new-key-secret" }, created.key));
  }));

  const editor = h("section", { id: "key-editor", "aria-label": "Edit a key" });
  const edit = (k) => {
    const models = input({ id: "edit-models", value: k.allowedModels ? k.allowedModels.join(", ") : "" });
    const indexes = input({ id: "edit-indexes", value: k.allowedIndexes ? k.allowedIndexes.join(", ") : "" });
    const lim = limitsFields("edit", k.limits || {});
    const f = h("form", { id: "edit-key", "aria-label": `Restrict key ${k.name}` },
      field("Allowed models (empty: any)", models), field("Allowed knowledge bases (empty: any)", indexes), ...lim.nodes,
      h("button", { type: "submit" }, "Save restrictions"));
    f.addEventListener("submit", busy(f, async () => {
      await put(`/api/admin/keys/${encodeURIComponent(k.id)}`, { allowedModels: orNull(models.value), allowedIndexes: orNull(indexes.value), limits: lim.value() });
      say(`Saved key ${k.name}.`);
      await refresh(root, keys);
    }));
    editor.replaceChildren(h("h2", {}, `Restrict key ${k.name}`), f);
    models.focus();
  };
  const actions = (k) => h("span", {},
    h("button", { type: "button", class: "secondary", onclick: () => edit(k) }, `Edit ${k.name}`), " ",
    k.status === "revoked" ? null : h("button", { type: "button", class: "danger", onclick: async () => {
      if (!confirm(`Revoke key ${k.name}? It stops working at once.`)) return;
      try {
        await post(`/api/admin/keys/${encodeURIComponent(k.id)}/revoke`);
        say(`Revoked key ${k.name}.`);
        await refresh(root, keys);
      } catch (e) { say(e.message, true); }
    } }, `Revoke ${k.name}`));
  const userName = Object.fromEntries(people.map((u) => [u.id, u.name]));
  root.append(h("h1", {}, "Keys"), form, secretBox, editor,
    table("API keys", [
      { title: "Name", value: (k) => k.name },
      { title: "Prefix", value: (k) => h("code", {}, k.prefix) },
      { title: "Owner", value: (k) => userName[k.userId] || k.userId },
      { title: "Admin", value: (k) => (k.admin ? "yes" : "no") },
      { title: "Models", value: (k) => list(k.allowedModels) },
      { title: "Limits", value: (k) => Object.entries(k.limits || {}).filter(([, v]) => v).map(([a, v]) => `${a} ${v}`).join(", ") || "defaults" },
      { title: "Status", value: (k) => k.status },
      { title: "Actions", value: actions },
    ], all, { id: "keys-table" }));
}

export async function groups(root) {
  const [all, people] = await Promise.all([get("/api/admin/groups"), get("/api/admin/users")]);
  const name = input({ id: "group-name", required: true });
  const form = h("form", { id: "create-group", "aria-label": "Create a group" }, field("Name", name), h("button", { type: "submit" }, "Create group"));
  form.addEventListener("submit", busy(form, async () => {
    await post("/api/admin/groups", { name: name.value });
    await refresh(root, groups);
  }));
  const userName = Object.fromEntries(people.map((u) => [u.id, u.name]));
  const member = (g) => {
    const who = select({ "aria-label": `User to add to ${g.name}` }, people.filter((u) => !g.members.includes(u.id)).map((u) => [u.id, u.name]));
    return h("span", {},
      g.members.map((m) => h("span", {}, userName[m] || m, " ",
        h("button", { type: "button", class: "secondary", "aria-label": `Remove ${userName[m] || m} from ${g.name}`, onclick: async () => {
          try { await del(`/api/admin/groups/${encodeURIComponent(g.id)}/members/${encodeURIComponent(m)}`); await refresh(root, groups); } catch (e) { say(e.message, true); }
        } }, "×"), " ")),
      who, " ",
      h("button", { type: "button", class: "secondary", onclick: async () => {
        try { await post(`/api/admin/groups/${encodeURIComponent(g.id)}/members`, { userId: who.value }); await refresh(root, groups); } catch (e) { say(e.message, true); }
      } }, `Add to ${g.name}`));
  };
  root.append(h("h1", {}, "Groups"), form,
    table("Groups and their members", [
      { title: "Name", value: (g) => g.name },
      { title: "Id", value: (g) => h("code", {}, g.id) },
      { title: "Default policy", value: (g) => g.defaultPolicy || "none" },
      { title: "Members", value: member },
      { title: "Delete", value: (g) => h("button", { type: "button", class: "danger", onclick: async () => {
        if (!confirm(`Delete group ${g.name}?`)) return;
        try { await del(`/api/admin/groups/${encodeURIComponent(g.id)}`); await refresh(root, groups); } catch (e) { say(e.message, true); }
      } }, `Delete ${g.name}`) },
    ], all, { id: "groups-table" }));
}
