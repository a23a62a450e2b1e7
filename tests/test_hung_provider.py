"""A hung language model cannot hold the mind (issue 11, Deliver 6): the real process
against a local endpoint that accepts connections and never answers."""

from __future__ import annotations

import socket
import threading

from tests.proc import agent_env, run_agent


class Silent:
    """A TCP server on 127.0.0.1 that accepts and reads, and never writes a byte."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self._stop = True
        self.thread.join(timeout=2)
        for conn in self.accepted:
            conn.close()
        self.sock.close()


def test_a_hung_model_is_ended_by_the_cycle_deadline(db_dsn, tmp_path):
    server = Silent()
    try:
        config = tmp_path / "runtime.yaml"
        config.write_text(
            "providers:\n"
            f"  llm: {{provider: openai_compat, base_url: 'http://127.0.0.1:{server.port}/v1', "
            "openai_model: fake-1}\n"
            "  resilience: {timeout_s: 30, max_attempts: 3}\n"
            "loop: {cycle_deadline_s: 2}\n"
            "agent: {shutdown_timeout_s: 5}\n"
            f"layers: {{values_path: {tmp_path / 'v.json'}, goals_path: {tmp_path / 'g.json'}, "
            f"cache_dir: {tmp_path / 'cache'}}}\n")
        # without the deadline one cycle waits 3 × 30 s for the answer alone: past this timeout
        result = run_agent(b"what is the tide like at Matosinhos today?\n", agent_env(DATABASE_URL=db_dsn),
                           ("--config", str(config)), timeout=60)
    finally:
        server.close()
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == 0, err
    assert "(I cannot answer in words right now: the language model did not answer within 2 s.)" in out
    assert "model work exceeded the cycle deadline of 2 s" in err
    assert server.accepted, "the model endpoint was never called"
    assert "Traceback" not in err
