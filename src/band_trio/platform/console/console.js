// The band-trio console: one live state stream, a few actions, no framework.
//
// The platform pushes the whole state of the selected room (server-sent
// events, `state`), so this file only renders what it is given: nothing is
// merged, nothing polled. EventSource reconnects by itself after the platform
// restarts; a stream the browser gave up on is reopened here.
"use strict";

const $ = (id) => document.getElementById(id);
let state = null;
let source = null;
let roomId = null;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function showError(text) {
  $("error-text").textContent = text;
  $("error").hidden = false;
}

function clearError() {
  $("error").hidden = true;
}

function setConnection(kind, text) {
  const badge = $("conn");
  badge.className = `badge conn-${kind}`;
  badge.textContent = text;
  badge.dataset.state = kind;
  // What is shown while the stream is down is the last state seen, not the present.
  document.body.classList.toggle("stale", kind !== "live");
}

// -- talking to the platform ---------------------------------------------------

async function call(path, body) {
  let response;
  try {
    response = await fetch(`/_console/api/${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  } catch (err) {
    showError("The platform cannot be reached (is it running?). Nothing was sent.");
    return null;
  }
  let data = null;
  try {
    data = await response.json();
  } catch (err) {
    data = null;
  }
  if (!response.ok) {
    const message = data && data.error && data.error.message;
    showError(message || `The platform answered ${response.status}.`);
    return null;
  }
  clearError();
  return data;
}

function roomFromHash() {
  const match = /room=([^&]+)/.exec(location.hash);
  return match ? decodeURIComponent(match[1]) : null;
}

function open() {
  if (source) source.close();
  const query = roomId ? `?room=${encodeURIComponent(roomId)}` : "";
  source = new EventSource(`/_console/api/stream${query}`);
  // Open is not live: until this stream's first state is rendered, the page shows
  // nothing current (an empty room list on a first paint), and says so.
  source.addEventListener("open", () => setConnection("loading", "loading…"));
  source.addEventListener("state", (event) => {
    render(JSON.parse(event.data));
    setConnection("live", "live");
  });
  source.addEventListener("error", () => {
    if ($("conn").dataset.state !== "refused") {
      setConnection("reconnecting", "platform unreachable: reconnecting…");
    }
    if (source.readyState === EventSource.CLOSED) {
      // The browser gave up (an error status): say why if the platform said, and
      // try again, as the browser would have.
      explain(query);
      setTimeout(open, 1000);
    }
  });
}

async function explain(query) {
  // EventSource hides an error answer's body; one plain request reads it (a 503
  // when the console has its limit of pages open). An answer that is a stream
  // after all is dropped at once: the EventSource reopens by itself.
  const controller = new AbortController();
  try {
    const response = await fetch(`/_console/api/stream${query}`, { signal: controller.signal });
    if (response.ok) {
      controller.abort();
      return;
    }
    const data = await response.json();
    const message = data && data.error && data.error.message;
    if (message && !(source && source.readyState === EventSource.OPEN)) {
      setConnection("refused", message);
    }
  } catch (err) {
    if (!controller.signal.aborted) {
      setConnection("reconnecting", "platform unreachable: reconnecting…");
    }
  }
}

function select(id) {
  if (id === roomId) return;
  roomId = id;
  if (roomFromHash() !== id) history.replaceState(null, "", id ? `#room=${encodeURIComponent(id)}` : "#");
  open();
}

// -- rendering ------------------------------------------------------------------

function ago(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return isNaN(date) ? iso : date.toLocaleTimeString();
}

function render(next) {
  state = next;
  $("user").textContent = `posting as ${next.user.name} (@${next.user.handle})`;
  if (!roomId && next.rooms.length) {
    select(next.rooms[0].id);
    return;
  }
  renderRooms(next);
  renderAgents(next);
  renderRoom(next);
  renderPresses(next);
}

function renderRooms(s) {
  $("rooms-count").textContent = s.rooms_total > s.rooms.length ? `(${s.rooms.length} of ${s.rooms_total})` : `(${s.rooms_total})`;
  $("rooms").replaceChildren(...s.rooms.map((room) => el("li", {},
    el("a", {
      href: `#room=${encodeURIComponent(room.id)}`,
      class: room.id === roomId ? "selected" : null,
      "data-room": room.id,
      onclick: (event) => { event.preventDefault(); select(room.id); },
    }, room.title || room.id, " ", el("span", { class: "small" }, `${room.participants}`),
    room.stopped ? el("span", { class: "small stopped", "data-testid": "room-stopped",
      title: `${room.stopped} agent(s) stopped here: Play resumes` }, " · stopped") : null))));
  const box = $("new-room-agents");
  const checked = new Set([...box.querySelectorAll("input:checked")].map((i) => i.value));
  box.replaceChildren(...s.agents.map((agent) => el("label", {},
    el("input", { type: "checkbox", value: agent.id, checked: checked.has(agent.id) }),
    ` ${agent.name}`)));
}

function disconnectText(agent) {
  const last = agent.last_disconnect;
  return last ? `last disconnect ${ago(last.at)}: ${last.reason}` : "never disconnected";
}

function renderAgents(s) {
  $("agents-count").textContent = `(${s.agents_total})`;
  $("agents").replaceChildren(...s.agents.map((agent) => el("li", { "data-agent": agent.id },
    el("span", { class: `dot${agent.connected ? " on" : ""}` }),
    el("strong", {}, agent.name), " ", el("span", { class: "small" }, `@${agent.handle}`),
    el("div", { class: "small", "data-testid": "agent-connection" },
      agent.connected ? "connected" : "not connected"),
    el("div", { class: "small" }, disconnectText(agent)))));
}

function lastPress(agentId) {
  return state.presses.find((p) => p.agent_id === agentId && (p.room_id === null || p.room_id === roomId));
}

function pressText(press) {
  const figures = press.watched.map((name) =>
    name in press.effects ? `${name} ${press.effects[name].toFixed(2)} ms` : `${name} …`);
  return `${press.mode}${press.room_id ? "" : " (all rooms)"}: ${figures.join(" · ")}`;
}

function press(mode, agentId) {
  const scope = $("scope").value;
  call("control", { mode, agent_id: agentId, room_id: scope === "room" ? roomId : null });
}

function renderParticipant(p) {
  if (p.type !== "Agent") {
    return el("div", { class: "participant", "data-participant": p.id },
      el("strong", {}, p.name), " ", el("span", { class: "small" }, `@${p.handle} · user`));
  }
  const flags = [p.connected ? "connected" : "not connected", p.working ? "working" : "idle"];
  if (p.stopped) flags.push("stopped here");
  const last = lastPress(p.id);
  return el("div", { class: "participant", "data-participant": p.id },
    el("span", { class: `dot${p.connected ? " on" : ""}` }),
    el("strong", {}, p.name), " ", el("span", { class: "small" }, `@${p.handle}`),
    el("div", { class: "small", "data-testid": "agent-state" }, flags.join(" · ")),
    el("div", { class: "small" }, disconnectText(p)),
    el("div", { class: "buttons" },
      el("button", { type: "button", class: "interrupt", "data-testid": "interrupt", onclick: () => press("interrupt", p.id) }, "Interrupt"),
      el("button", { type: "button", class: "stop", "data-testid": "stop", onclick: () => press("stop", p.id) }, "Stop"),
      el("button", { type: "button", class: "play", "data-testid": "play", onclick: () => press("play", p.id) }, "Play")),
    last ? el("div", { class: "small last", "data-testid": "last-press" }, pressText(last)) : "");
}

function renderMessage(m, names) {
  const badges = Object.entries(m.delivery).map(([agentId, d]) =>
    el("span", { class: `status status-${d.status}`, "data-agent": agentId, "data-status": d.status },
      `${names[agentId] || agentId}: ${d.status}${d.attempts > 1 ? ` ×${d.attempts}` : ""}`));
  if (m.question) return renderQuestion(m, m.question, badges);
  return el("li", { "data-message": m.id, "data-sender-type": m.sender_type },
    el("span", { class: "who" }, m.sender_name || m.sender_id),
    el("span", { class: "small" }, ago(m.inserted_at)),
    el("div", { class: "text" }, m.content),
    el("div", { class: "delivery", "data-testid": "delivery" }, badges));
}

function renderEvent(e) {
  return el("li", { class: `event event-${e.message_type}`, "data-event": e.id, "data-event-type": e.message_type, "data-testid": "event" },
    el("span", { class: "who" }, e.sender_name || e.sender_id),
    el("span", { class: "small" }, `${e.message_type} event · ${ago(e.inserted_at)}`),
    el("div", { class: "text" }, e.content));
}

function renderRoom(s) {
  const room = s.room;
  const missing = $("room-missing");
  const list = $("messages");
  if (!room || room.error) {
    $("room-title").textContent = room ? "room not found" : "no room selected";
    missing.hidden = !room;
    missing.textContent = room ? `${room.error} Pick a room on the left, or create one.` : "";
    $("participants").replaceChildren();
    $("controls").hidden = true;
    $("guidance").hidden = true;
    list.replaceChildren();
    return;
  }
  missing.hidden = true;
  $("room-title").textContent = room.title || room.id;
  $("controls").hidden = false;
  $("participants").replaceChildren(...room.participants.map(renderParticipant));
  const inRoom = new Set(room.participants.map((p) => p.id));
  const select = $("add-agent");
  const keep = select.value;
  const candidates = s.agents.filter((a) => !inRoom.has(a.id));
  select.replaceChildren(...candidates.map((a) => el("option", { value: a.id, selected: a.id === keep }, a.name)));
  $("add-agent-button").disabled = candidates.length === 0;
  const names = Object.fromEntries(s.agents.map((a) => [a.id, a.name]));
  const atBottom = list.scrollHeight - list.scrollTop - list.clientHeight < 40;
  renderGuidance(room);  // before the list is scrolled: the hint takes height from it
  const older = room.messages_total - room.messages.length;
  const olderEvents = room.events_total - room.events.length;
  // Messages and events (an error, a "Not forwarded", a thought) in the order posted.
  const entries = [
    ...room.messages.map((m) => [m.inserted_at, renderMessage(m, names)]),
    ...room.events.map((e) => [e.inserted_at, renderEvent(e)]),
  ].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const items = entries.map(([, item]) => item);
  if (older > 0 || olderEvents > 0) {
    const parts = [older > 0 ? `${older} older messages` : "", olderEvents > 0 ? `${olderEvents} older events` : ""];
    items.unshift(el("li", { class: "small" }, `${parts.filter(Boolean).join(" and ")} not shown`));
  }
  list.replaceChildren(...items);
  if (atBottom) list.scrollTop = list.scrollHeight;
}

function renderPresses(s) {
  const names = Object.fromEntries(s.agents.map((a) => [a.id, a.name]));
  $("presses").replaceChildren(...s.presses.map((p) => el("li", { "data-press": p.id, "data-mode": p.mode, "data-state": p.state },
    el("strong", {}, `${p.mode}`), ` ${names[p.agent_id] || p.agent_id}`,
    el("span", { class: `small state-${p.state.replace(" ", "-")}` }, ` ${p.state}`),
    el("div", { class: "figure" }, pressText(p)),
    p.note ? el("div", { class: "small", "data-testid": "press-note" }, p.note) : "")));
}

// -- actions ----------------------------------------------------------------------

async function send(event) {
  event.preventDefault();
  const text = $("text");
  if (!text.value.trim()) {
    showError("Write something first: the message is empty.");
    return;
  }
  if (!roomId || !state || !state.room || state.room.error) {
    showError("Pick a room first.");
    return;
  }
  const sent = await call("messages", { room_id: roomId, content: text.value });
  if (sent) text.value = "";
}

async function createRoom(event) {
  event.preventDefault();
  const agents = [...$("new-room-agents").querySelectorAll("input:checked")].map((i) => i.value);
  const made = await call("rooms", { title: $("new-room-title").value, agents });
  if (made) {
    $("new-room-title").value = "";
    select(made.id);
  }
}

async function addAgent() {
  const id = $("add-agent").value;
  if (!id) {
    showError("Every agent is already in this room.");
    return;
  }
  await call(`rooms/${encodeURIComponent(roomId)}/participants`, { id });
}

document.addEventListener("DOMContentLoaded", () => {
  $("composer").addEventListener("submit", send);
  $("text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) send(event);
  });
  $("new-room").addEventListener("submit", createRoom);
  $("add-agent-button").addEventListener("click", addAgent);
  $("error-close").addEventListener("click", clearError);
  window.addEventListener("hashchange", () => select(roomFromHash()));
  roomId = roomFromHash();
  open();
});
