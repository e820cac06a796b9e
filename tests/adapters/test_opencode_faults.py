"""The OpenCode adapter against a real `opencode serve` behind the fault-injecting proxy.

Creating the session, the event subscription and the prompt each meet a
transient fault at the HTTP layer (the project's proxy, bench/_peers/fault_proxy.py):
each is asked again, and the room gets its answer once, from one run.
"""

from __future__ import annotations

import pytest
import trio

from band_trio import Policy, UpstreamPolicy
from band_trio.adapters import OpenCodeAdapter
from band_trio.platform import Platform
from peers import fault_proxy, plan, shared_stubllm_peer
from peers.opencode import opencode_peer
from support import replies, running_agent, seeded, status

DEADLINE = 40
FAST = Policy(upstream=UpstreamPolicy(retry_base=0.05, retry_cap=0.2))


@pytest.mark.long(12)
async def test_transient_faults_of_each_call_are_retried_to_one_answer(platform: Platform) -> None:
    _, room, user = seeded(platform)
    with trio.fail_after(DEADLINE):
        async with (
            shared_stubllm_peer() as llm,
            opencode_peer(llm.base_url) as peer,
            fault_proxy(peer.url) as proxy,
        ):
            await plan(proxy, "POST /session HTTP", [{"status": 503, "retry_after_ms": 30}])
            await plan(proxy, "GET /event", [{"status": 502}])
            await plan(proxy, "/prompt_async", [{"reset": True}])
            adapter = OpenCodeAdapter(proxy.base_url, provider_id="stub", model_id="gpt-4o")
            async with running_agent(platform, adapter, policy=FAST):
                message = platform.post_message(room, user, "[quick] through the faults")
                await platform.wait_until(
                    lambda: status(platform, message) in ("processed", "failed")
                )
            steps = {
                match: [e["step"] for e in proxy.events("request") if e["match"] == match]
                for match in ("POST /session HTTP", "GET /event", "/prompt_async")
            }
            runs = [e for e in llm.events("request") if e["path"] == "/v1/chat/completions"]
    assert status(platform, message) == "processed"
    assert replies(platform, room) == ["quick answer"]
    assert steps == {
        "POST /session HTTP": [{"status": 503, "retry_after_ms": 30}, None],
        "GET /event": [{"status": 502}, None],
        "/prompt_async": [{"reset": True}, None],
    }
    assert len(runs) == 1  # one run: the prompt that never reached OpenCode was sent again
