// The console's shell: sign-in, the page router (`#/<page>`), sign-out.
import { ApiError, get, session, whenRefused } from "./api.js";
import { say } from "./ui.js";
import { pages } from "./pages.js";

const $ = (id) => document.getElementById(id);

function signedOut(message) {
  session.clear();
  $("nav").hidden = true;
  $("sign-out").hidden = true;
  $("who").textContent = "";
  $("page").replaceChildren();
  $("sign-in").hidden = false;
  if (message) say(message, true);
}

async function signIn(key) {
  let me;
  try {
    me = await get("/api/admin/me", key);
  } catch (e) {
    signedOut(e instanceof ApiError && (e.status === 401 || e.status === 403)
      ? "This key is not an admin key: the console is for admin keys only."
      : `Sign-in failed: ${e.message}`);
    return false;
  }
  $("who").textContent = `Signed in: ${me.key.name || me.key.prefix} (${me.user ? me.user.name : me.key.userId})`;
  $("sign-in").hidden = true;
  $("nav").hidden = false;
  $("sign-out").hidden = false;
  return true;
}

let shown = 0;

async function show() {
  if (!session.key()) return signedOut();
  const name = (location.hash.replace(/^#\//, "") || "overview").split("?")[0];
  const page = pages[name] || pages.overview;
  for (const a of document.querySelectorAll("nav a")) {
    if (a.getAttribute("href") === `#/${name}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  // Each page is drawn into a box of its own and shown only if no later
  // navigation started meanwhile, so two quick clicks never mix two pages.
  const token = ++shown;
  const box = document.createElement("div");
  try {
    await page(box);
  } catch (e) {
    if (!(e instanceof ApiError && (e.status === 401 || e.status === 403))) say(`Could not load the page: ${e.message}`, true);
  }
  if (token !== shown || !session.key()) return;
  $("page").replaceChildren(box);
  document.title = `${(box.querySelector("h1") || {}).textContent || "Console"} · Gatehouse`;
}

whenRefused((e) => signedOut(e.status === 401 ? "The key was refused (revoked or unknown); sign in again." : "The console is for admin keys only."));

$("sign-in-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const key = $("api-key").value.trim();
  $("api-key").value = "";
  if (!key) return;
  session.set(key);
  if (await signIn(key)) {
    if (location.hash) await show();
    else location.hash = "#/overview"; // the hashchange shows it
    $("main").focus();
  }
});
$("sign-out").addEventListener("click", () => {
  signedOut();
  say("Signed out.");
});
window.addEventListener("hashchange", show);

(async () => {
  if (session.key() && (await signIn(session.key()))) await show();
  else signedOut();
})();
