"""A scripted model server on 127.0.0.1 for the real-harness tests: it speaks the
Anthropic Messages API (Claude Code, through ANTHROPIC_BASE_URL) and the OpenAI Responses
API (Codex, through a model provider's base_url), both streamed as server-sent events, and
answers each turn of the agent from a script of tool calls, recording every request body
in the order it came.

A turn is a request that offers the model tools (the agent's main loop or a subagent's);
other requests (a title, a quota probe, a token count) get a short answer and no step of
the script.  When the script runs out every turn is answered "done." with no tool call, so
the agent stops.  What the recorder proves rests on the order: the request in which a text
first appears came before the model's answer to it, and so before any tool that answer
called.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

DONE = "done."
# A step that makes the previous step's calls again when a hook held them (the call's
# result is the hook's error), as a model does; otherwise it is passed over.
AGAIN = ("again",)


class Recorded:
    """One request the harness sent: its path, its body (parsed JSON, or {}), whether it
    was a turn, and the step of the script it was answered with (None: no step)."""

    def __init__(self, path: str, body: dict[str, Any], turn: bool, step: int | None) -> None:
        self.path, self.body, self.turn, self.step = path, body, turn, step
        self.at = time.time()  # wall clock: a counter script's runs are compared with it
        self.text = json.dumps(body, ensure_ascii=False)

    def __repr__(self) -> str:
        return f"<{self.path} turn={self.turn} step={self.step} {self.text[:120]}>"


class ModelServer:
    """`with ModelServer(steps) as server:` serves on `server.url` until the block ends.
    Each step is a list of blocks: ("text", str), ("tool", name, input dict[, more of the
    call's fields]) or ("custom", name, input text); or AGAIN.  `answer`, where given,
    answers a turn before the script does (a subagent's, whose turns interleave)."""

    def __init__(self, steps: list[list[tuple]], answer: Callable[[dict[str, Any]], list | None] | None = None) -> None:
        self.steps = list(steps)
        self.answer = answer  # asked first at every turn: its blocks, or None for the script's next step
        self.requests: list[Recorded] = []
        self._next = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._http.server_port}"

    def __enter__(self) -> "ModelServer":
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()

    @property
    def turns(self) -> list[Recorded]:
        return [r for r in self.requests if r.turn]

    def take(self, path: str, body: dict[str, Any]) -> tuple[list[tuple], Recorded]:
        """Record a request; a turn takes the script's next step."""
        turn = bool(body.get("tools"))
        answered = self.answer(body) if turn and self.answer else None
        with self._lock:
            if answered is not None:
                recorded = Recorded(path, body, turn, None)
                self.requests.append(recorded)
                return answered, recorded
            step = None
            while turn and step is None and self._next < len(self.steps):
                step, self._next = self._next, self._next + 1
                if self.steps[step] is AGAIN:
                    step = self._held(body, step)
            recorded = Recorded(path, body, turn, step)
            self.requests.append(recorded)
            blocks = self.steps[step] if step is not None else [("text", DONE)]
            return blocks, recorded

    def _held(self, body: dict[str, Any], step: int) -> int | None:
        """The step to make again when the last call's result was a hook's hold."""
        text, error = last_result(body)
        if error and "hook" in text.lower():
            back = step - 1
            while back > 0 and self.steps[back] is AGAIN:
                back -= 1
            return back
        return None

    def call_id(self) -> str:
        return f"call_{next(self._ids):04d}"


def last_result(body: dict[str, Any]) -> tuple[str, bool]:
    """The text of the last tool result in a turn's request, and whether it is an error
    (Claude Code: `is_error`; Codex: its words for a hook's block)."""
    for message in reversed(body.get("messages") or []):
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            if results:
                return _words(results[-1].get("content")), bool(results[-1].get("is_error"))
    for item in reversed(body.get("input") or []):
        if isinstance(item, dict) and item.get("type", "").endswith("call_output"):
            text = _words(item.get("output"))
            return text, "blocked by" in text.lower()
    return "", False


def _words(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_words(part) for part in content)
    if isinstance(content, dict):
        return _words(content.get("text") or content.get("content") or content.get("output") or "")
    return ""


def _handler(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # the test's output stays quiet
            pass

        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            server.requests.append(Recorded(self.path, {}, False, None))
            if self.path.rstrip("/").split("?")[0].endswith("/models"):
                self._json({"object": "list", "data": [], "models": []})
            else:
                self._json({})

        def do_HEAD(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {}
            body = body if isinstance(body, dict) else {"_": body}
            path = self.path.split("?")[0]
            if path.endswith("/messages/count_tokens"):
                server.requests.append(Recorded(path, body, False, None))
                return self._json({"input_tokens": max(1, len(raw) // 4)})
            if path.endswith("/messages"):
                blocks, _ = server.take(path, body)
                return self._sse(_anthropic_events(server, body, blocks))
            if path.endswith("/responses"):
                blocks, _ = server.take(path, body)
                return self._sse(_responses_events(server, body, blocks))
            server.requests.append(Recorded(path, body, False, None))
            self._json({})

        def _json(self, value: object) -> None:
            data = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
            data = b"".join(f"event: {name}\ndata: {json.dumps(value)}\n\n".encode() for name, value in events)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _anthropic_events(server: ModelServer, body: dict[str, Any], blocks: list[tuple]) -> list:
    """A streamed Messages API reply holding `blocks` (text, tool_use)."""
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    message = {"id": f"msg_{server.call_id()}", "type": "message", "role": "assistant",
               "model": body.get("model", "claude-sonnet-4-5"), "content": [], "stop_reason": None,
               "stop_sequence": None, "usage": usage}
    events: list = [("message_start", {"type": "message_start", "message": message})]
    tool_used = False
    for index, block in enumerate(blocks):
        if block[0] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block[1]}
        else:
            tool_used = True
            start = {"type": "tool_use", "id": f"toolu_{server.call_id()}", "name": block[1], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block[2])}
        events += [("content_block_start", {"type": "content_block_start", "index": index, "content_block": start}),
                   ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
                   ("content_block_stop", {"type": "content_block_stop", "index": index})]
    stop = "tool_use" if tool_used else "end_turn"
    events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": 5}}),
               ("message_stop", {"type": "message_stop"})]
    return events


def _responses_events(server: ModelServer, body: dict[str, Any], blocks: list[tuple]) -> list:
    """A streamed Responses API reply holding `blocks`: text (a message), a function call
    ("tool", name, arguments dict) or a custom tool call ("custom", name, input text)."""
    rid = f"resp_{server.call_id()}"
    response = {"id": rid, "object": "response", "status": "in_progress", "model": body.get("model", "m"),
                "output": []}
    events: list = [("response.created", {"type": "response.created", "response": response})]
    items = []
    for index, block in enumerate(blocks):
        if block[0] == "text":
            item = {"type": "message", "id": f"msg_{server.call_id()}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": block[1], "annotations": []}]}
        elif block[0] == "custom":
            item = {"type": "custom_tool_call", "id": f"ctc_{server.call_id()}", "status": "completed",
                    "call_id": server.call_id(), "name": block[1], "input": block[2]}
        else:
            item = {"type": "function_call", "id": f"fc_{server.call_id()}", "status": "completed",
                    "call_id": server.call_id(), "name": block[1], "arguments": json.dumps(block[2]),
                    **(block[3] if len(block) > 3 else {})}  # e.g. a tool's namespace
        items.append(item)
        events += [("response.output_item.added", {"type": "response.output_item.added", "output_index": index,
                                                   "item": item}),
                   ("response.output_item.done", {"type": "response.output_item.done", "output_index": index,
                                                  "item": item})]
    done = dict(response, status="completed", output=items,
                usage={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                       "input_tokens_details": {"cached_tokens": 0},
                       "output_tokens_details": {"reasoning_tokens": 0}})
    events.append(("response.completed", {"type": "response.completed", "response": done}))
    return events
