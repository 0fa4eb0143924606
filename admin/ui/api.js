// The admin API as the console calls it: the token from this tab's
// sessionStorage as a Bearer header, asked for on a 401; every state
// change with X-Clawgate-Admin and a JSON Content-Type, which a page of
// another site cannot send without a preflight.

const TOKEN = "clawgate-admin-token";
let asking = null; // the token prompt on screen, shared by every waiting call

export class APIError extends Error {
  constructor(status, body) {
    super((body && body.error) || "HTTP " + status);
    this.status = status;
    this.body = body;
  }
}

// api calls the admin API and answers its JSON body (null when it has
// none); it throws an APIError for any answer that is not 2xx but a 401,
// on which it asks for the token and tries again.
export async function api(method, path) {
  for (;;) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN);
    if (token) headers.Authorization = "Bearer " + token;
    if (method !== "GET") {
      headers["X-Clawgate-Admin"] = "1";
      headers["Content-Type"] = "application/json";
    }
    const resp = await fetch(path, { method, headers, credentials: "omit", cache: "no-store" });
    let body = null;
    try { body = await resp.json(); } catch { body = null; }
    if (resp.status === 401) {
      await askToken(token !== null);
      continue;
    }
    if (!resp.ok) throw new APIError(resp.status, body);
    return body;
  }
}

// askToken shows the token form once (whatever number of calls wait on
// it) and resolves when a token was entered. refused: the stored token
// was answered 401.
function askToken(refused) {
  if (asking) return asking;
  if (refused) sessionStorage.removeItem(TOKEN);
  const box = document.getElementById("auth");
  const form = document.getElementById("token-form");
  const input = document.getElementById("token-input");
  const msg = document.getElementById("token-msg");
  msg.textContent = refused
    ? "The admin token was refused (401 Unauthorized). Enter the right token."
    : "This admin listener needs its admin token.";
  msg.className = refused ? "error" : "";
  box.hidden = false;
  input.value = "";
  input.focus();
  asking = new Promise((resolve) => {
    form.onsubmit = (ev) => {
      ev.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      sessionStorage.setItem(TOKEN, t);
      input.value = "";
      box.hidden = true;
      form.onsubmit = null;
      asking = null;
      resolve();
    };
  });
  return asking;
}

export const enc = encodeURIComponent;
