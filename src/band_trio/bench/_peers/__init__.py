"""The real remote peers the benchmark and the test suite stop: run as scripts, never imported.

`stubllm_server.py` (stubllm 0.1.5, an OpenAI-style SSE server) and
`a2a_server.py` (an a2a-sdk 1.3.0 agent) each serve on 127.0.0.1 under
uvicorn and record what they saw, stamped with their own `perf_counter`.
They need the `bench` extra; `band_trio.bench._peer` and the tests'
`peers` fixtures start them with `sys.executable`.
"""
