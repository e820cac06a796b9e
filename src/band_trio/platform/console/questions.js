// The band-trio console's question cards and its guidance hint (loaded before
// console.js, whose helpers — el, call, ago, renderRoom, state, roomId — these
// call once the page runs).
//
// A question is an agent's `Turn.ask`, which the platform reads back from the
// room's posts (its text, choices, who may answer, and what became of it). Its
// text and choices are the agent's words, so they are only ever text here.
"use strict";

function answerers(q) {
  return q.anyone ? "anyone" : q.answerers.map((a) => a.name).join(", ") || "nobody";
}

function questionState(q) {
  if (q.state === "answered") return `answered: ${q.choice}, by ${q.answered_by.name}`;
  if (q.state === "withdrawn") return `withdrawn: ${q.reason || "no reason given"}`;
  if (q.state === "superseded") return `withdrawn: the agent asked again (${q.superseded_by})`;
  return q.may_answer ? "open: press a choice to answer" : `open: only ${answerers(q)} may answer`;
}

function renderQuestion(m, q, badges) {
  const active = q.state === "open" && q.may_answer;
  const choices = el("div", { class: "choices" });
  choices.append(...q.choices.map((choice) => el("button", {
    type: "button",
    class: `choice${choice === q.choice ? " chosen" : ""}`,
    "data-testid": "choice",
    "data-choice": choice,
    disabled: !active,
    onclick: () => answer(q, choice, choices),
  }, choice)));
  return el("li", { class: `question question-${q.state}`, "data-message": m.id,
    "data-sender-type": m.sender_type, "data-question": q.id, "data-question-state": q.state,
    "data-testid": "question" },
    el("span", { class: "who" }, m.sender_name || m.sender_id),
    el("span", { class: "small" }, `asks (${q.id}) · ${ago(m.inserted_at)}`),
    el("div", { class: "text", "data-testid": "question-text" }, q.text),
    el("div", { class: "small", "data-testid": "question-answerers" }, `who may answer: ${answerers(q)}`),
    choices,
    el("div", { class: "question-state", "data-testid": "question-state" }, questionState(q)),
    el("div", { class: "delivery", "data-testid": "delivery" }, badges));
}

async function answer(q, choice, choices) {
  // Posted as `@agent choice` by the platform, once it has checked the question is
  // still open: pressed twice, or from an old state, nothing is sent twice.
  for (const button of choices.querySelectorAll("button")) button.disabled = true;
  const sent = await call("answers", { room_id: roomId, question: q.id, choice });
  if (!sent && state) renderRoom(state);
}

// While an agent works here, say what a message sent now becomes. The page cannot
// see the agent's while-busy setting (it lives in the agent's process), so it says so.
function renderGuidance(room) {
  const working = room.participants.filter((p) => p.type === "Agent" && p.working);
  const hint = $("guidance");
  hint.hidden = working.length === 0;
  if (!working.length) {
    hint.textContent = "";
    return;
  }
  const names = working.map((p) => p.name).join(", ");
  const asking = room.messages.some((m) => m.question && m.question.state === "open");
  hint.textContent = `${names} ${working.length > 1 ? "are" : "is"} working here: a message sent ` +
    "now is offered to the running turn as guidance if the agent steers (--while-busy steer), " +
    "else the agent's while-busy setting applies (by default it waits its turn); the console " +
    "cannot see that setting." +
    (asking ? " A reply from someone who may answer whose first word is a choice answers the open question instead." : "");
}
