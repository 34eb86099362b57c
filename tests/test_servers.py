"""The test-server harness: a taken port on first start is survived; a restart keeps the port."""

from __future__ import annotations

import shutil
import socket

from tests.servers import RedisServer, make_workdir


def test_first_start_moves_off_a_taken_port_and_restart_keeps_it() -> None:
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        server = RedisServer(make_workdir("harness"))
        server.port = taken
        try:
            server.start()
            assert server.running and server.port != taken
            port = server.port
            server.stop()
            server.start()
            assert server.port == port and server.ready()
        finally:
            server.stop()
            shutil.rmtree(server.workdir, ignore_errors=True)
