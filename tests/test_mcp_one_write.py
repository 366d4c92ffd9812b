"""The HTTP server sends each response in one write (memkeeper.mcp.one_write): uvicorn's
head and body writes of one event-loop step go out joined, in order, and nothing is lost
when the connection closes right after them."""

from __future__ import annotations

import asyncio

import httpx

from memkeeper.mcp.one_write import OneWriteProtocol, _JoinedWrites


class Recording(asyncio.Transport):
    """A transport at the socket's place: it records each write it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:  # type: ignore[override]
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0


def test_the_writes_of_one_step_go_out_as_one_in_order() -> None:
    async def main() -> tuple[list[bytes], list[bytes], list[bytes]]:
        inner = Recording()
        joined = _JoinedWrites(inner, asyncio.get_running_loop())
        joined.write(b"HTTP/1.1 200 OK\r\n\r\n")
        joined.write(b"body")
        during = list(inner.writes)
        await asyncio.sleep(0)  # the step ends
        after_step = list(inner.writes)
        joined.write(b"next")
        joined.close()  # before the loop flushes: close sends it first
        return during, after_step, inner.writes

    during, after_step, final = asyncio.run(main())
    assert during == []
    assert after_step == [b"HTTP/1.1 200 OK\r\n\r\nbody"]
    assert final == [b"HTTP/1.1 200 OK\r\n\r\nbody", b"next"]


def test_uvicorn_serves_through_it() -> None:
    """A real uvicorn server with the protocol answers plain and keep-alive requests."""
    import threading

    import uvicorn

    async def app(scope, receive, send):  # a minimal ASGI app
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"x" * 70_000})

    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, http=OneWriteProtocol, log_config=None, lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(1000):  # up to 10 s to listen
        if server.started:
            break
        threading.Event().wait(0.01)
    assert server.started
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        with httpx.Client() as client:
            for _ in range(3):  # one kept-alive connection
                answer = client.get(f"http://127.0.0.1:{port}/")
                assert answer.status_code == 200 and answer.content == b"x" * 70_000
        closing = httpx.get(f"http://127.0.0.1:{port}/", headers={"Connection": "close"})
        assert closing.content == b"x" * 70_000
    finally:
        server.should_exit = True
        thread.join(timeout=10)
