// The clawgate console: pages routed on the client, each with its own
// address under /ui/. Everything a delivery brings (keys, ids, reasons,
// errors, route names) is shown as text: the DOM is built with
// createElement and text nodes only.
import { api, enc } from "./api.js";

const main = document.getElementById("main");
const crumbs = document.getElementById("crumbs");
const flash = document.getElementById("flash");
let timers = []; // the current page's refresh timers, stopped on navigation
let gen = 0; // the current page; a stale page's late answers are dropped

// el builds an element: attrs are set as attributes (on* never used),
// children are nodes or strings (made text nodes).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    e.setAttribute(k, v === true ? "" : String(v));
  }
  e.append(...children.flat().filter((c) => c !== null && c !== undefined).map((c) => (c instanceof Node ? c : String(c))));
  return e;
}

function link(href, ...children) {
  return el("a", { href, "data-nav": true }, ...children);
}

function button(label, action, onclick, cls) {
  const b = el("button", { type: "button", "data-action": action, class: cls }, label);
  b.addEventListener("click", onclick);
  return b;
}

function time(t) {
  return !t || t.startsWith("0001-") ? "—" : t.replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function say(text, error) {
  flash.textContent = text;
  flash.className = error ? "error" : "";
}

function render(...nodes) {
  main.replaceChildren(...nodes);
}

function every(ms, f) {
  timers.push(setInterval(f, ms));
}

// confirmIn replaces a button by "question [yes] [cancel]" in place: no
// dialog, so nothing from a delivery is ever shown by the browser's UI.
function confirmIn(btn, question, yesLabel, onyes) {
  const box = el("span", { class: "confirm" }, question + " ");
  const yes = button(yesLabel, "confirm", async () => { box.replaceWith(btn); await onyes(); }, "danger");
  const no = button("Cancel", "cancel", () => box.replaceWith(btn));
  box.append(yes, " ", no);
  btn.replaceWith(box);
}

// guard runs an action, showing its error.
async function guard(f) {
  try {
    await f();
  } catch (e) {
    say(e.message, true);
  }
}

// ---- routes overview (/ui/) and one route (/ui/routes/{route})

function pauseButton(r, reload) {
  if (r.delivery !== "queue") return "";
  const verb = r.paused ? "resume" : "pause";
  return button(r.paused ? "Resume" : "Pause", verb, () => guard(async () => {
    await api("POST", `/admin/routes/${enc(r.name)}/${verb}`);
    say(`Route ${r.name} ${verb}d.`);
    await reload();
  }));
}

function breaker(r) {
  if (!r.breaker) return "—";
  const open = r.breaker !== "closed";
  return el("span", { class: "badge " + (open ? "bad" : "ok") }, r.breaker + (r.failures ? ` (${r.failures} failures)` : ""));
}

function num(v) {
  return v === undefined || v === null ? "—" : String(v);
}

// lag is a queue route's oldest waiting event's age, "—" for a sync
// route or when the queue did not answer.
function lag(r) {
  const s = r.lag_seconds;
  if (s === undefined || s === null) return "—";
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return (s / 60).toFixed(1) + " min";
  return (s / 3600).toFixed(1) + " h";
}

// countCells are a route's counts of this instance, one cell each.
const countNames = ["deliveries", "forwarded", "queued", "replayed", "refused"];
function countCells(r) {
  return countNames.map((c) => el("td", { class: "count " + c }, num(r[c])));
}

function lookupForm(routes, route) {
  const input = el("input", { name: "key", placeholder: "idempotency key", required: true, size: 40 });
  const sel = el("select", { name: "route" }, routes.map((r) => el("option", { value: r.name, selected: r.name === route }, r.name)));
  const f = el("form", { class: "lookup" }, "Look up a key: ", sel, input, el("button", { type: "submit" }, "Look up"));
  f.addEventListener("submit", (ev) => {
    ev.preventDefault();
    go(`/ui/keys/${enc(sel.value)}/${enc(input.value)}`);
  });
  return f;
}

async function overview(my) {
  crumbs.replaceChildren();
  const tbody = el("tbody");
  const updated = el("p", { class: "muted" });
  let form = null; // built once: a refresh must not clear what the operator types
  const load = async () => {
    const page = await api("GET", "/admin/routes");
    if (my !== gen) return;
    tbody.replaceChildren(...page.routes.map((r) =>
      el("tr", { "data-route": r.name },
        el("td", {}, link(`/ui/routes/${enc(r.name)}`, r.name)),
        el("td", {}, r.delivery),
        countCells(r),
        el("td", { class: "depth" }, num(r.depth)),
        el("td", { class: "lag" }, lag(r)),
        el("td", { class: "dlq" }, r.delivery === "queue" ? link(`/ui/routes/${enc(r.name)}/dlq`, num(r.dlq)) : "—"),
        el("td", {}, breaker(r)),
        el("td", { class: "paused" }, r.delivery === "queue" ? (r.paused ? el("span", { class: "badge bad" }, "paused since " + time(r.paused_since)) : "no") : "—"),
        el("td", {}, pauseButton(r, load), r.error ? el("span", { class: "error" }, " " + r.error) : ""))));
    updated.textContent = "Counts are this instance's since it started. Refreshed every 5 s. Updated " + new Date().toISOString().replace("T", " ").slice(0, 19) + "Z.";
    if (!form) {
      form = lookupForm(page.routes);
      render(
        el("h1", {}, "Routes"),
        el("table", { id: "routes" },
          el("thead", {}, el("tr", {}, ["Route", "Delivery", "Deliveries", "Forwarded", "Queued", "Replayed", "Refused", "Queue depth", "Lag", "DLQ", "Breaker", "Paused", ""].map((h) => el("th", {}, h)))),
          tbody),
        updated, form);
    }
  };
  await load();
  every(5000, () => guard(load));
}

async function routePage(my, name) {
  crumbs.replaceChildren(link("/ui/", "Routes"), " / ", name);
  let form = null; // kept over refreshes, with what the operator typed
  const load = async () => {
    const page = await api("GET", "/admin/routes");
    if (my !== gen) return;
    const r = page.routes.find((x) => x.name === name);
    if (!r) {
      render(el("h1", {}, "Route ", name), el("p", { class: "error" }, "This gateway has no such route."));
      return;
    }
    const dl = el("dl", { id: "route" });
    const row = (k, v) => dl.append(el("dt", {}, k), el("dd", {}, v));
    row("Delivery", r.delivery);
    row("Deliveries", el("span", { class: "count deliveries" }, num(r.deliveries)));
    row("Forwarded", el("span", { class: "count forwarded" }, num(r.forwarded)));
    if (r.delivery === "queue") row("Queued", el("span", { class: "count queued" }, num(r.queued)));
    row("Replayed", el("span", { class: "count replayed" }, num(r.replayed)));
    row("Refused", el("span", { class: "count refused" }, num(r.refused)));
    if (r.delivery === "queue") {
      row("Queue depth", num(r.depth));
      row("Lag", lag(r));
      row("Dead-lettered", link(`/ui/routes/${enc(name)}/dlq`, num(r.dlq) + " (open the DLQ)"));
      row("Paused", r.paused ? "since " + time(r.paused_since) : "no");
    }
    row("Breaker", breaker(r));
    if (r.breaker_open_until) row("Breaker open until", time(r.breaker_open_until));
    if (r.error) row("Error", el("span", { class: "error" }, r.error));
    if (!form) form = lookupForm(page.routes, name);
    render(el("h1", {}, "Route ", name), dl, el("p", { class: "muted" }, "Counts are this instance's since it started. Refreshed every 5 s."),
      el("div", { class: "actions" }, pauseButton(r, load)), form);
  };
  await load();
  every(5000, () => guard(load));
}

// ---- a route's DLQ (/ui/routes/{route}/dlq)

// bodyButton shows (and hides again) a dead-lettered event's body preview
// in a row under the event's: the body is the sender's, so it goes into
// a <pre> as text (textContent), never as markup.
function bodyButton(my, base, d) {
  const b = button("Show body", "show-body", () => guard(async () => {
    const tr = b.closest("tr");
    const next = tr.nextElementSibling;
    if (next && next.classList.contains("preview")) {
      next.remove();
      b.textContent = "Show body";
      return;
    }
    const ev = await api("GET", `${base}/${enc(d.id)}`);
    if (my !== gen || !tr.isConnected) return;
    const pre = el("pre", { class: "body" });
    pre.textContent = ev.body_preview;
    const about = [ev.content_type ? "Content-Type: " + ev.content_type : "no Content-Type", `${ev.body_bytes} bytes`];
    if (ev.body_truncated) about.push("the first 4 KiB shown");
    if (ev.body_bytes === 0) about.push("empty body");
    const box = el("td", { colspan: 8 }, el("div", { class: "muted" }, about.join(" · ")), pre);
    const row = el("tr", { class: "preview" }, box);
    row.dataset.previewFor = d.id;
    tr.after(row);
    b.textContent = "Hide body";
  }));
  return b;
}

async function dlqPage(my, route) {
  crumbs.replaceChildren(link("/ui/", "Routes"), " / ", link(`/ui/routes/${enc(route)}`, route), " / DLQ");
  const base = `/admin/dlq/${enc(route)}`;
  const progress = el("span", { id: "replay-progress", class: "muted" });
  const limit = new URLSearchParams(location.search).get("limit") || "50"; // ?limit=N: page size
  let cursor = "";
  const load = async () => {
    const page = await api("GET", `${base}?limit=${enc(limit)}` + (cursor ? "&cursor=" + enc(cursor) : ""));
    if (my !== gen) return;
    const rows = page.entries.map((d) =>
      el("tr", { "data-id": d.id },
        el("td", { class: "mono" }, d.id),
        el("td", { class: "key" }, link(`/ui/keys/${enc(route)}/${enc(d.key)}`, d.key)),
        el("td", {}, d.reason, d.error ? el("div", { class: "muted" }, d.error) : ""),
        el("td", {}, d.status ? String(d.status) : "—"),
        el("td", {}, String(d.attempts)),
        el("td", {}, time(d.first_seen)),
        el("td", {}, time(d.died_at)),
        el("td", {},
          bodyButton(my, base, d), " ",
          button("Replay", "replay", () => guard(async () => {
            await api("POST", `${base}/${enc(d.id)}/replay`);
            say(`Event ${d.id} replayed.`);
            await load();
          })), " ",
          button("Purge", "purge", (ev) => confirmIn(ev.currentTarget, "Drop this event?", "Purge", () => guard(async () => {
            await api("DELETE", `${base}/${enc(d.id)}`);
            say(`Event ${d.id} purged.`);
            await load();
          })), "danger"))));
    const body = rows.length ? rows : [el("tr", {}, el("td", { colspan: 8, class: "muted" }, "The DLQ is empty" + (cursor ? " past this point." : "."))) ];
    const paging = el("div", { class: "actions" });
    if (cursor) paging.append(button("First page", "first", () => { cursor = ""; guard(load); }));
    if (page.next) paging.append(button("Next page", "next", () => { cursor = page.next; guard(load); }));
    render(
      el("h1", {}, "Dead-letter queue of ", route),
      el("div", { class: "actions" },
        button("Replay all", "replay-all", (ev) => confirmIn(ev.currentTarget, "Replay every dead-lettered event?", "Replay all", () => guard(async () => {
          showReplay(await api("POST", `${base}/replay`));
          watch();
        }))), progress),
      el("table", { id: "dlq" },
        el("thead", {}, el("tr", {}, ["ID", "Key", "Reason", "Status", "Attempts", "First seen", "Died at", ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, body)),
      paging);
  };
  const showReplay = (st) => {
    progress.textContent = `Replay all: ${st.state}, ${st.replayed} of ${st.total} replayed` + (st.error ? ` (${st.error})` : "");
  };
  let watching = false;
  const watch = () => {
    if (watching) return;
    watching = true;
    const t = setInterval(() => guard(async () => {
      const st = await api("GET", `${base}/replay`);
      if (my !== gen) return clearInterval(t);
      showReplay(st);
      if (st.state !== "running") { clearInterval(t); watching = false; await load(); }
    }), 1000);
    timers.push(t);
  };
  await load();
  try {
    const st = await api("GET", `${base}/replay`);
    showReplay(st);
    if (st.state === "running") watch();
  } catch (e) {
    if (e.status !== 404) throw e; // 404: no replay-all was started here
  }
}

// ---- a key (/ui/keys/{route}/{key})

async function keyPage(my, route, key) {
  crumbs.replaceChildren(link("/ui/", "Routes"), " / ", link(`/ui/routes/${enc(route)}`, route), " / key");
  const path = `/admin/keys/${enc(route)}/${enc(key)}`;
  const ks = await api("GET", path);
  if (my !== gen) return;
  const dl = el("dl", { id: "key" });
  const row = (k, v) => dl.append(el("dt", {}, k), el("dd", { class: "mono" }, v));
  row("Key", key);
  row("State", el("span", { class: "badge", id: "key-state" }, ks.state));
  if (ks.id) row("Event", ks.id);
  row("Attempts", String(ks.attempts));
  row("First seen", time(ks.first_seen));
  row("Last seen", time(ks.last_seen));
  row("Status", ks.status ? String(ks.status) : "—");
  if (ks.fingerprint) row("Fingerprint", ks.fingerprint);
  const reset = button("Reset key", "reset", (ev) => confirmIn(ev.currentTarget, "Forget this key, so its next delivery is forwarded again?", "Reset", () => guard(async () => {
    const res = await api("DELETE", path);
    say(`Key reset (it was ${res.forgot.state}).`);
    await keyPage(my, route, key);
  })), "danger");
  const history = el("section", { id: "history" }, el("h2", {}, "History"), el("p", { class: "muted" }, "Loading…"));
  render(el("h1", {}, "Key on route ", route), dl, el("div", { class: "actions" }, reset), history);
  try {
    const h = await api("GET", path + "/history");
    if (!h || !Array.isArray(h.events)) throw { status: 404 };
    // The timeline, oldest first; every field is text (a request id, a
    // detail may carry what a caller sent).
    const rows = h.events.map((ev) => el("tr", { "data-kind": ev.kind },
      el("td", { class: "mono" }, (ev.at || "").replace("T", " ")), el("td", { class: "kind" }, ev.kind), el("td", {}, ev.instance || ""), el("td", { class: "mono" }, ev.request_id || ""),
      el("td", {}, ev.attempt ? String(ev.attempt) : ""), el("td", {}, ev.status ? String(ev.status) : ""),
      el("td", {}, ev.ms ? String(ev.ms) : ""), el("td", { class: "mono detail" }, ev.detail || "")));
    history.replaceChildren(el("h2", {}, "History"), el("table", {},
      el("thead", {}, el("tr", {}, ["At", "Kind", "Instance", "Request", "Attempt", "Status", "ms", "Detail"].map((x) => el("th", {}, x)))),
      el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: 8, class: "muted" }, "No entries.")))));
  } catch (e) {
    if (e.status !== 404) throw e;
    // 404: the key has neither a record nor a history (never seen, its
    // retention over, or dedupe.history is 0).
    history.replaceChildren(el("h2", {}, "History"), el("p", { class: "muted" }, "No history for this key (never seen, expired, or dedupe.history is 0)."));
  }
}

// ---- routing

// page reads the address: its segments after /ui/, decoded; a key may
// hold a slash (encoded), so it is everything after the route.
function route() {
  const raw = location.pathname.replace(/^\/ui\/?/, "").replace(/\/$/, "");
  const segs = raw === "" ? [] : raw.split("/");
  const d = decodeURIComponent;
  const my = ++gen;
  if (segs.length === 0) return overview(my);
  if (segs[0] === "routes" && segs.length === 2) return routePage(my, d(segs[1]));
  if (segs[0] === "routes" && segs.length === 3 && segs[2] === "dlq") return dlqPage(my, d(segs[1]));
  if (segs[0] === "keys" && segs.length >= 3) return keyPage(my, d(segs[1]), d(segs.slice(2).join("/")));
  crumbs.replaceChildren(link("/ui/", "Routes"));
  render(el("h1", {}, "Not found"), el("p", {}, "The console has no such page."));
}

async function show() {
  timers.forEach(clearInterval);
  timers = [];
  render(el("p", { class: "muted" }, "Loading…"));
  try {
    await route();
  } catch (e) {
    render(el("h1", {}, "Error"), el("p", { class: "error", id: "error" }, e.message || String(e)));
  }
}

function go(href) {
  say("");
  history.pushState(null, "", href);
  show();
}

document.addEventListener("click", (ev) => {
  const a = ev.target.closest && ev.target.closest("a[data-nav]");
  if (!a || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
  ev.preventDefault();
  go(a.getAttribute("href"));
});
window.addEventListener("popstate", show);
show();
