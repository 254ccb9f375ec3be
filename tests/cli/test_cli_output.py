"""What the CLI writes where: no library debug lines, progress bars only on a terminal, a quiet
exit when stdout's reader goes away, and JSON that survives bytes that are not UTF-8."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios

from .conftest import DEMO_SPECS, clean_env, run_cli

OFFLINE_LINE = "offline mode: no OPENAI_API_KEY / SPECRAG_LLM_BASE_URL; stages 1-2 use keyword methods"


def test_first_query_on_a_fresh_corpus_writes_only_the_offline_line(tmp_path):
    proc = run_cli("query", "How do I create a user?", "--corpus", str(DEMO_SPECS), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [OFFLINE_LINE]  # no DEBUG bm25s lines, no \r progress frames
    assert "users_api:paths/~1users/post" in proc.stdout


def test_verbose_shows_specrag_info_but_no_library_debug(demo_data):
    cwd, env = demo_data
    proc = run_cli("query", "How do I create a user?", "-v", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "DEBUG" not in proc.stderr and "Traceback" not in proc.stderr
    assert any(line.startswith("INFO specrag.") for line in proc.stderr.splitlines()), proc.stderr


def _run_with_tty_stderr(args: list[str], cwd, env) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal (as in an interactive shell); return (exit, stderr)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100-column terminal
    proc = subprocess.Popen([sys.executable, "-m", "specrag.cli", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def test_progress_bars_only_when_stderr_is_a_terminal(tmp_path):
    env = clean_env(tmp_path)
    code, tty_err = _run_with_tty_stderr(["ingest", str(DEMO_SPECS), "--no-catalogs"], tmp_path, env)
    assert code == 0 and "\r" in tty_err and "ingest" in tty_err  # tqdm frames for a person watching
    proc = run_cli("ingest", str(DEMO_SPECS), "--no-catalogs", cwd=tmp_path, env=env)
    assert proc.returncode == 0 and proc.stderr == ""  # into a file or a pipe: nothing


def test_reader_closing_stdout_is_a_quiet_exit(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "specrag.cli", "ingest", str(DEMO_SPECS), "--json",
                             "--no-catalogs"], cwd=tmp_path, env=clean_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # like `| head -1` exiting before specrag writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == "", err


def test_pipe_into_head_in_a_shell(demo_data):
    cwd, env = demo_data
    cmd = f"{sys.executable} -m specrag.cli query 'How do I create a user?' --json | head -1"
    proc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.stdout == "{\n" and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_non_utf8_query_byte_keeps_json_valid(demo_data):
    cwd, env = demo_data
    proc = subprocess.run([sys.executable, "-m", "specrag.cli", "query", b"create a user\xff", "--json"],
                          cwd=cwd, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    ctx = json.loads(proc.stdout.decode("utf-8"))  # strict UTF-8
    assert ctx["query"] == "create a user\ufffd"
    assert ctx["primary_chunks"], "the readable words still retrieve"


def test_non_utf8_file_name_keeps_ingest_json_valid(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "users.yaml").write_bytes((DEMO_SPECS / "users_api.yaml").read_bytes())
    odd = os.path.join(os.fsencode(specs), b"odd\xff.yaml")
    with open(odd, "wb") as handle:
        handle.write((DEMO_SPECS / "users_api.yaml").read_bytes())
    proc = subprocess.run([sys.executable, "-m", "specrag.cli", "ingest", os.fsencode(specs), "--json",
                           "--no-catalogs"], cwd=tmp_path, env=clean_env(tmp_path), capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    report = json.loads(proc.stdout.decode("utf-8"))
    assert report["specs_read"] == 1
    assert [s["reason"] for s in report["specs_skipped"]] == [
        "file name is not valid UTF-8 (chunk ids must be text); rename the file"]

