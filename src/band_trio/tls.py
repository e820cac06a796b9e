"""One TLS context for every HTTP client band-trio builds.

An `httpx2.AsyncClient()` built without `verify=` creates an `ssl.SSLContext`
of its own and loads the system's CA bundle into it: tens of milliseconds of
CPU and most of a megabyte of OpenSSL memory per client, whether or not it ever
speaks TLS. A bridge builds a REST client and a target client per identity, so
at a thousand identities that was most of a minute of start-up and most of
2 GB (docs/benchmarks.md, "One bridge, many identities").

So every client band-trio builds — the platform's REST client (`link`), the
bridge's HTTP targets, the reference adapters' upstream clients, the benchmark
tools — passes `verify=shared_ssl_context()`: one context, built the first time
a client asks (a process that never builds a client never loads the bundle),
with httpx2's own defaults (`httpx2.create_ssl_context()`: the system's CA
bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR` from the environment as it is at
that first call). A context is made to be shared by many connections and
threads — each connection's handshake state lives in its own `SSLObject` — so
sharing changes nothing a peer can see. Nothing may change the context once
built (no `load_cert_chain`, no option flipped): a client that needs other
settings builds its own.

In the lowest layer with `policy` and `errors`: it imports no band-trio module,
so `link`, `contract`, the adapters and the bridge all reach it.
"""

from __future__ import annotations

import ssl
import threading

import httpx2

__all__ = ["shared_ssl_context"]

_lock = threading.Lock()
_context: ssl.SSLContext | None = None


def shared_ssl_context() -> ssl.SSLContext:
    """The process's one client TLS context, built on the first call (thread-safe:
    an adapter's worker thread may be the first to ask)."""
    global _context
    context = _context
    if context is None:
        with _lock:
            if _context is None:
                _context = httpx2.create_ssl_context()
            context = _context
    return context
