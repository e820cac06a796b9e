"""The console in a real headless browser, against real processes.

`band-trio platform --console --db F` and `band-trio agent` each run as a
process of their own, and Debian's chromium (Playwright drives it) opens the
page: a person's path through it — talk, stop a long answer, play it, interrupt
one, answer the agent's questions (approve, deny, one withdrawn by an interrupt,
one that is someone else's), make a room, add an agent, hit bad input — then the
platform is restarted
under the page, which must reconnect and show the same state. Every wait is
Playwright's `expect` (it waits for the page to show a thing, with a deadline).

The screenshots go to `BAND_TRIO_CONSOLE_SHOTS` when set (docs/how-to/console.md
shows those of a real run), else to the test's temporary folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx2
import pytest
from browser_support import CHROMIUM_FLAGS, WAIT_MS, Processes, chromium
from playwright.sync_api import Page, expect, sync_playwright

from ports import free_port


def _shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("BAND_TRIO_CONSOLE_SHOTS") or tmp_path / "shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _message(page: Page, text: str) -> object:
    return (
        page.locator("#messages li")
        .filter(has=page.locator(".text", has_text=text))
        .filter(has_not_text=f"echo: {text}")
    )


def _reply(page: Page, text: str) -> object:
    return page.locator("#messages li .text", has_text=f"echo: {text}")


@pytest.mark.long(23)
def test_a_person_talks_stops_plays_and_survives_a_restart(
    processes: Processes, tmp_path: Path
) -> None:
    executable = chromium()
    shots = _shots(tmp_path)
    port = str(free_port())
    platform_args = (
        "platform", "--console", "--seed", "--db", "console.db", "--port", port,
        "--ready-file", "ready.json",
    )  # fmt: skip
    platform = processes.start("platform", *platform_args, until=b"console http://")
    agent = processes.start("agent", "agent", "--ready-file", "ready.json")
    url = f"http://127.0.0.1:{port}/_console/"
    errors: list[str] = []
    expect.set_options(timeout=WAIT_MS)

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 820})
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(url)
            expect(page.get_by_test_id("connection")).to_have_text("live")
            agent_state = page.get_by_test_id("agent-state")
            expect(agent_state).to_contain_text("connected")

            # Talk: the reply and the delivery status arrive without a reload.
            page.get_by_test_id("text").fill("hello @demo-agent <b>not bold</b>")
            page.get_by_test_id("send").click()
            expect(_reply(page, "hello @demo-agent")).to_have_count(1)
            expect(page.locator("#messages b")).to_have_count(0)  # text, never markup
            hello = _message(page, "hello @demo-agent").locator("[data-status]")
            expect(hello).to_have_attribute("data-status", "processed")
            page.screenshot(path=shots / "1-conversation.png")

            # A room event (a failed turn's error, a bridge's "Not forwarded") is shown
            # where it was posted, among the messages.
            ready = json.loads((processes.folder / "ready.json").read_text())
            said = {"content": "Not forwarded: the target said 500", "message_type": "error"}
            posted = httpx2.post(
                f"{ready['rest_url']}/api/v1/agent/chats/{ready['room_id']}/events",
                json={"event": said},
                headers={"X-API-Key": ready["api_key"]},
            )
            assert posted.status_code == 201, posted.text
            event = page.locator("#messages li[data-event-type=error]")
            expect(event).to_contain_text("Not forwarded: the target said 500")
            expect(event).to_contain_text("error event")

            # Bad input is said in the page, and nothing is posted; the banner does not
            # push the composer out of the window (1400x820 here, 1400x900 too).
            page.get_by_test_id("send").click()
            expect(page.get_by_test_id("error")).to_contain_text("the message is empty")
            for height in (820, 900):
                page.set_viewport_size({"width": 1400, "height": height})
                box = page.get_by_test_id("composer").bounding_box()
                assert box is not None and box["y"] + box["height"] <= height, (height, box)
            page.set_viewport_size({"width": 1400, "height": 820})
            page.screenshot(path=shots / "2-empty-message.png")
            page.locator("#error-close").click()

            # Stop a long answer: the message stays `processing`; play answers it.
            long = "a long answer sleep=4"
            page.get_by_test_id("text").fill(long)
            page.get_by_test_id("send").click()
            expect(agent_state).to_contain_text("working")
            page.get_by_test_id("stop").click()
            expect(agent_state).to_contain_text("stopped here")
            # the room list marks the room too: a stop outlives the panel it was pressed in
            room_stopped = page.locator("#rooms [data-testid=room-stopped]")
            expect(room_stopped).to_have_count(1)
            held = _message(page, long).locator("[data-status]")
            expect(held).to_have_attribute("data-status", "processing")
            stop = page.locator("#presses li[data-mode=stop]")
            expect(stop).to_have_attribute("data-state", "done")
            expect(stop).to_contain_text("working:false")
            expect(stop.locator(".figure")).to_contain_text(" ms")
            page.screenshot(path=shots / "3-stopped.png")
            page.get_by_test_id("play").click()
            play = page.locator("#presses li[data-mode=play]")
            expect(play).to_have_attribute("data-state", "done")
            expect(_reply(page, long)).to_have_count(1)
            expect(held).to_have_attribute("data-status", "processed")
            expect(room_stopped).to_have_count(0)
            page.screenshot(path=shots / "4-played.png")

            # Interrupt: the answer is dropped, the message consumed.
            dropped = "never mind sleep=30"
            page.get_by_test_id("text").fill(dropped)
            page.get_by_test_id("send").click()
            expect(agent_state).to_contain_text("working")
            page.get_by_test_id("interrupt").click()
            interrupt = page.locator("#presses li[data-mode=interrupt]")
            expect(interrupt).to_have_attribute("data-state", "done")
            expect(interrupt).to_contain_text("processed")
            expect(_message(page, dropped).locator("[data-status]")).to_have_attribute(
                "data-status", "processed"
            )
            expect(_reply(page, dropped)).to_have_count(0)
            page.screenshot(path=shots / "5-interrupted.png")

            # Questions: the demo asks before it answers (`ask ...`). The card says who may
            # answer and has a button per choice; a press posts `@demo-agent <choice>`.
            cards = page.get_by_test_id("question")
            hint = page.get_by_test_id("guidance-hint")
            for number, choice in enumerate(("approve", "deny")):
                page.get_by_test_id("text").fill("ask deploy?")
                page.get_by_test_id("send").click()
                asked = cards.nth(number)
                expect(asked).to_have_attribute("data-question-state", "open")
                expect(asked.get_by_test_id("question-text")).to_have_text("deploy?")
                expect(asked.get_by_test_id("question-answerers")).to_have_text(
                    "who may answer: Alice"
                )
                expect(hint).to_contain_text("offered to the running turn as guidance")
                if number == 0:
                    page.screenshot(path=shots / "9-question.png")
                asked.locator(f"[data-choice={choice}]").click()
                expect(asked).to_have_attribute("data-question-state", "answered")
                expect(asked.get_by_test_id("question-state")).to_have_text(
                    f"answered: {choice}, by Alice"
                )
                reply = page.locator("#messages li .text", has_text=f"{choice}: ask deploy?")
                expect(reply).to_have_count(1)
                expect(asked.locator("button:disabled")).to_have_count(2)
                expect(hint).to_be_hidden()  # the turn is over

            # An interrupt during a question withdraws it.
            page.get_by_test_id("text").fill("ask deploy?")
            page.get_by_test_id("send").click()
            asked = cards.nth(2)
            expect(asked.locator("button:enabled")).to_have_count(2)
            page.get_by_test_id("interrupt").click()
            expect(asked).to_have_attribute("data-question-state", "withdrawn")
            expect(asked.get_by_test_id("question-state")).to_have_text(
                "withdrawn: the work was interrupted"
            )
            expect(asked.locator("button:disabled")).to_have_count(2)
            expect(hint).to_be_hidden()

            # Someone else's question (its text is markup, shown as text): the page may
            # not answer it; its asker does, on the wire as a person on Band would.
            admin = f"http://127.0.0.1:{port}/_admin"
            bob = httpx2.post(f"{admin}/users", json={"name": "Bob", "handle": "bob"}).json()
            room = f"{admin}/rooms/{ready['room_id']}"
            assert httpx2.post(f"{room}/participants", json={"id": bob["id"]}).is_success
            markup = "ask <img src=x onerror=alert(1)> now?"
            said = {"sender_id": bob["id"], "content": markup}
            assert httpx2.post(f"{room}/messages", json=said).is_success
            asked = cards.nth(3)
            expect(asked.get_by_test_id("question-answerers")).to_have_text("who may answer: Bob")
            expect(asked.get_by_test_id("question-text")).to_have_text(markup[4:])
            expect(asked.locator("button:disabled")).to_have_count(2)
            expect(asked.get_by_test_id("question-state")).to_have_text("open: only Bob may answer")
            asked.scroll_into_view_if_needed()
            page.screenshot(path=shots / "10-not-yours.png")
            said = {
                "sender_id": bob["id"],
                "content": "@demo-agent Deny.",
                "mentions": [ready["agent_id"]],
            }
            assert httpx2.post(f"{room}/messages", json=said).is_success
            expect(asked.get_by_test_id("question-state")).to_have_text("answered: deny, by Bob")
            expect(page.locator("#messages img")).to_have_count(0)

            # A new room without the agent, then the agent added to it.
            page.get_by_test_id("new-room-title").fill("planning")
            page.get_by_test_id("create-room").click()
            expect(page.get_by_test_id("room-title")).to_have_text("planning")
            page.get_by_test_id("add-agent").click()
            expect(agent_state).to_contain_text("connected")
            page.get_by_test_id("text").fill("hello planning")
            page.get_by_test_id("send").click()
            expect(_reply(page, "hello planning")).to_have_count(1)

            # A room that does not exist is said so.
            page.goto(f"{url}#room=no-such-room")
            expect(page.get_by_test_id("room-missing")).to_contain_text(
                "There is no room no-such-room"
            )
            page.screenshot(path=shots / "6-unknown-room.png")
            page.get_by_test_id("rooms").get_by_text("planning").click()
            expect(_reply(page, "hello planning")).to_have_count(1)

            # The platform restarts under the page (same port, same --db).
            assert processes.stop(platform) == 0
            expect(page.get_by_test_id("connection")).to_have_attribute(
                "data-state", "reconnecting"
            )
            page.screenshot(path=shots / "7-reconnecting.png")
            platform = processes.start("platform-2", *platform_args, until=b"console http://")
            expect(page.get_by_test_id("connection")).to_have_text("live")
            expect(_reply(page, "hello planning")).to_have_count(1)  # the state came back
            expect(agent_state).to_contain_text("connected")  # the agent reconnected too
            expect(page.locator("#agents")).to_contain_text("last disconnect")
            page.get_by_test_id("text").fill("still there?")
            page.get_by_test_id("send").click()
            expect(_reply(page, "still there?")).to_have_count(1)
            page.screenshot(path=shots / "8-after-restart.png")
        finally:
            browser.close()

    assert errors == [], errors
    assert processes.stop(agent) == 0
    assert processes.stop(platform) == 0


HOLD_STATES = """
(() => {
  // The page's "state" listeners are held back until releaseStates(): the stream is
  // open and its first state has arrived, but the page has not been given it yet.
  const held = [];
  window.heldStates = 0;
  window.releaseStates = () => {
    window.statesReleased = true;
    for (const deliver of held.splice(0)) deliver();
  };
  const add = EventSource.prototype.addEventListener;
  EventSource.prototype.addEventListener = function (type, listener, options) {
    if (type !== "state") return add.call(this, type, listener, options);
    const holding = (event) => {
      if (window.statesReleased) return listener.call(this, event);
      window.heldStates += 1;
      held.push(() => listener.call(this, event));
    };
    return add.call(this, type, holding, options);
  };
})();
"""


def test_the_page_says_it_is_loading_until_its_first_state(processes: Processes) -> None:
    """The stream is open but no state has been rendered: the page says "loading", not
    "live" over an empty room list."""
    executable = chromium()
    port = str(free_port())
    args = ("platform", "--console", "--seed", "--port", port)
    platform = processes.start("platform", *args, until=b"console http://")
    errors: list[str] = []
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.add_init_script(HOLD_STATES)
            page.goto(f"http://127.0.0.1:{port}/_console/")
            page.wait_for_function("window.heldStates > 0", timeout=WAIT_MS)
            connection = page.get_by_test_id("connection")
            expect(connection).to_have_attribute("data-state", "loading")
            expect(connection).to_have_text("loading…")
            expect(page.locator("#rooms li")).to_have_count(0)  # nothing shown yet
            page.evaluate("window.releaseStates()")
            expect(connection).to_have_text("live")
            expect(page.locator("#rooms li")).to_have_count(1)  # the seeded room
        finally:
            browser.close()
    assert errors == [], errors
    assert processes.stop(platform) == 0
