"""The console and the admin API against hostile pages, in the real chromium.

`band-trio platform --console --seed` runs as a process; the hostile pages are
served by a second server on another port of 127.0.0.1 (another origin, as a
page on the web is), and chromium maps `attacker.test` to 127.0.0.1
(`--host-resolver-rules`), which is what DNS rebinding gives an attacker. Each
attack is what the issue found working: a cross-origin form and `fetch` that
create rooms, post and press stop (CSRF); a page under the attacker's name
that reads the seeded agent's key (rebinding); the console in an invisible
frame (clickjacking). Each test then reads the platform's own state to show
that nothing happened.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
from browser_support import CHROMIUM_FLAGS, WAIT_MS, Processes, chromium
from playwright.sync_api import Browser, expect, sync_playwright

from ports import free_port


@dataclass
class Console:
    url: str
    """`http://127.0.0.1:PORT` of the platform."""
    port: int
    info: dict[str, Any]

    def state(self) -> dict[str, Any]:
        """The console's state as a page would get it (the stream's first event)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(
                f"GET /_console/api/stream?room={self.info['room_id']} HTTP/1.1\r\n"
                f"host: 127.0.0.1:{self.port}\r\n\r\n".encode()
            )
            data = b""
            while b"\ndata: " not in data or not data.split(b"\ndata: ", 1)[1].count(b"\n"):
                chunk = sock.recv(65536)
                assert chunk, data
                data += chunk
        line = data.split(b"\ndata: ", 1)[1].split(b"\n", 1)[0]
        state: dict[str, Any] = json.loads(line)
        return state


class _Pages(BaseHTTPRequestHandler):
    pages: dict[str, str] = {}

    def do_GET(self) -> None:
        body = self.pages.get(self.path, "").encode()
        self.send_response(200 if body else 404)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def evil() -> Iterator[tuple[str, dict[str, str]]]:
    """A web server on another port (another origin): its pages are the attacks."""
    pages: dict[str, str] = {}
    handler = type("Pages", (_Pages,), {"pages": pages})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def console(processes: Processes, tmp_path: Path) -> Console:
    port = free_port()
    args = ("platform", "--console", "--seed", "--port", str(port), "--ready-file", "ready.json")
    processes.start("platform", *args, until=b"console http://")
    info = json.loads((tmp_path / "ready.json").read_text())
    return Console(f"http://127.0.0.1:{port}", port, info)


@pytest.fixture(scope="module")
def chromium_browser() -> Iterator[Browser]:
    """One chromium for the module's tests (its start is ~2 s of CPU); each test's pages
    are in contexts of their own, closed after it (`browser`)."""
    expect.set_options(timeout=WAIT_MS)
    rules = "--host-resolver-rules=MAP attacker.test 127.0.0.1"
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=chromium(), args=[*CHROMIUM_FLAGS, rules])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def browser(chromium_browser: Browser) -> Iterator[Browser]:
    assert chromium_browser.contexts == [], "an earlier test left pages open"
    try:
        yield chromium_browser
    finally:
        for context in chromium_browser.contexts:
            context.close()


def test_a_page_of_another_origin_cannot_create_post_or_press(
    console: Console, evil: tuple[str, dict[str, str]], browser: Browser
) -> None:
    origin, pages = evil
    agent, room = console.info["agent_id"], console.info["room_id"]
    target = console.url
    # the agent asks the room a question, which a stranger's page then tries to answer
    asked = "Question q-0000aaaa (anyone may answer) — reply with one of: approve, deny\n\nGo?"
    said = {"sender_id": agent, "content": asked, "mentions": [console.info["user_id"]]}
    posted = httpx2.post(f"{target}/_admin/rooms/{room}/messages", json=said)
    assert posted.is_success, posted.text
    # The form: `enctype="text/plain"` turns `name=value` into a JSON body.
    pages["/csrf.html"] = f"""<!doctype html>
<iframe name="sink" onload="document.body.dataset.loads = (+document.body.dataset.loads || 0) + 1">
</iframe>
<form id="f" method="post" enctype="text/plain" target="sink"
      action="{target}/_console/api/rooms">
  <input name='{{"title": "pwned", "x": "' value='"}}'>
</form>
<script>
const simple = (path, body) => fetch("{target}" + path, {{
  method: "POST", mode: "no-cors", headers: {{"content-type": "text/plain"}},
  body: JSON.stringify(body)}}).then(() => "answered", () => "cut off");
document.getElementById("f").submit();
Promise.all([
  simple("/_console/api/messages", {{room_id: "{room}", content: "posted by a stranger"}}),
  simple("/_console/api/control", {{mode: "stop", agent_id: "{agent}"}}),
  simple("/_console/api/answers", {{room_id: "{room}", question: "q-0000aaaa", choice: "approve"}}),
  simple("/_admin/control", {{mode: "stop", agent_id: "{agent}"}}),
  simple("/_admin/rooms", {{title: "pwned too"}}),
]).then((r) => {{ document.body.dataset.done = r.join(","); }});
</script>"""
    page = browser.new_page()
    page.goto(f"{origin}/csrf.html")
    # every request went out and came back: answered (403) or cut off (refused before
    # its body was read); the form's answer loaded in its frame
    expect(page.locator("body")).to_have_attribute("data-done", re.compile(r"^[a-z ,]+$"))
    expect(page.locator("body")).to_have_attribute("data-loads", "2")
    state = console.state()
    assert [r["title"] for r in state["rooms"]] == ["demo"]
    assert state["presses"] == []
    assert [m["content"] for m in state["room"]["messages"]] == [asked]
    assert state["room"]["messages"][0]["question"]["state"] == "open"
    agent_view = next(p for p in state["room"]["participants"] if p["id"] == agent)
    assert agent_view["stopped"] is False


def test_a_rebound_name_cannot_read_the_key_or_press(console: Console, browser: Browser) -> None:
    """DNS rebinding: a page at `attacker.test:PORT`, a name now pointing at 127.0.0.1.
    Its requests are same-origin to the browser, so only the Host check refuses them."""
    page = browser.new_page()
    answer = page.goto(f"http://attacker.test:{console.port}/_console/")
    assert answer is not None and answer.status == 421
    read = page.evaluate(
        """async (agent) => {
            const info = await fetch("/_admin/info");
            const press = await fetch("/_console/api/control", {
                method: "POST", headers: {"content-type": "application/json"},
                body: JSON.stringify({mode: "stop", agent_id: agent})});
            const stream = await fetch("/_console/api/stream");
            return {info: info.status, body: await info.text(), press: press.status,
                    stream: stream.status};
        }""",
        console.info["agent_id"],
    )
    assert (read["info"], read["press"], read["stream"]) == (421, 421, 421)
    assert console.info["api_key"] not in read["body"]
    assert console.info["api_key"] not in page.content()
    assert console.state()["presses"] == []


def test_the_console_cannot_be_framed(
    console: Console, evil: tuple[str, dict[str, str]], browser: Browser
) -> None:
    origin, pages = evil
    pages["/frame.html"] = f"""<!doctype html>
<p>Win a prize: click the button!</p>
<iframe id="f" src="{console.url}/_console/" style="opacity: 0.01" width="1400" height="800">
</iframe>"""
    page = browser.new_page(viewport={"width": 1400, "height": 820})
    page.goto(f"{origin}/frame.html", wait_until="load")
    (framed,) = [frame for frame in page.frames if frame is not page.main_frame]
    expect(framed.locator("body")).to_be_attached()
    assert framed.locator("[data-testid=stop]").count() == 0  # never rendered
    assert framed.locator("[data-testid=connection]").count() == 0
    # ...while the page itself, opened as a page, works
    own = browser.new_page()
    own.goto(f"{console.url}/_console/")
    expect(own.get_by_test_id("connection")).to_have_text("live")
    assert console.state()["presses"] == []


def test_a_page_over_the_stream_limit_says_so(
    console: Console, browser: Browser, tmp_path: Path
) -> None:
    limit = 32  # PlatformPolicy.console_streams, the default the process runs with
    held = []
    request = f"GET /_console/api/stream HTTP/1.1\r\nhost: 127.0.0.1:{console.port}\r\n\r\n"
    try:
        for _ in range(limit):
            sock = socket.create_connection(("127.0.0.1", console.port), timeout=10)
            sock.sendall(request.encode())
            assert sock.recv(12).startswith(b"HTTP/1.1 200")
            held.append(sock)
        page = browser.new_page()
        page.goto(f"{console.url}/_console/")
        badge = page.get_by_test_id("connection")
        expect(badge).to_have_attribute("data-state", "refused")
        expect(badge).to_contain_text(f"{limit} pages open")
        page.screenshot(path=tmp_path / "too-many-pages.png")
        held.pop().close()  # one page closed: this one gets in by itself
        expect(badge).to_have_text("live")
    finally:
        for sock in held:
            sock.close()
