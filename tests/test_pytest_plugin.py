"""The pytest plugin as a user meets it: a project of their own, run by a pytest of its own.

Each test writes a small project (``conftest.py``, a test module, ``pytest.ini`` with
``filterwarnings = error``) and runs ``python -m pytest -W error`` on it in a subprocess:
what is checked is pytest's own loading of the plugin, which an in-process test cannot
redo (the plugin is loaded once per process).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SERVER = '''
import attrs
import mcp_trio
from mcp_trio import Context

server = mcp_trio.Server("calc")


@server.tool()
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@attrs.frozen
class Confirm:
    sure: bool
    """Sure?"""


@server.tool()
async def ask(ctx: Context) -> str:
    """Ask the user."""
    answer = await ctx.elicit("Sure?", Confirm)
    return f"{answer.action} {answer.data}"
'''

TESTS = """
async def test_add(mcp_client):
    result = await mcp_client.call_tool("add", {"a": 1, "b": 2})
    assert result.structured_content == {"result": 3}


async def test_era(mcp_client, mcp_era):
    assert mcp_client.era == ("modern" if mcp_era == "auto" else mcp_era)
"""

INI = "[pytest]\ntrio_mode = true\nfilterwarnings = error\n"


def run_pytest(
    tmp_path: Path, files: dict[str, str], *extra_path: Path
) -> subprocess.CompletedProcess[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "pytest.ini").write_text(INI)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(
        [*map(str, extra_path), str(ROOT / "src"), env.get("PYTHONPATH", "")]
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-W", "error", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def passed(result: subprocess.CompletedProcess[str], count: int) -> bool:
    return result.returncode == 0 and f"{count} passed" in result.stdout


def readme_block(first_line: str) -> str:
    """The README's python block that starts with ``first_line``."""
    text = (ROOT / "README.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if b.startswith(first_line)]
    assert len(blocks) == 1, first_line
    return str(blocks[0])


def test_the_readme_recipe_runs_without_a_warning(tmp_path: Path) -> None:
    # The recipe imports ERAS from mcp_trio.testing before pytest loads the plugin:
    # the plugin must be another module, or pytest warns that it cannot rewrite it.
    files = {name: readme_block(f"# {name}") for name in ("conftest.py", "test_calc.py")}
    assert "from mcp_trio.testing import ERAS" in files["conftest.py"]
    result = run_pytest(tmp_path, files)
    assert passed(result, 2), result.stdout + result.stderr
    assert "Warning" not in result.stdout + result.stderr
    result = run_pytest(tmp_path, {"test_era.py": TESTS})  # (beside test_calc.py: 2 + 4)
    assert passed(result, 6), result.stdout + result.stderr


def test_the_older_plugin_name_still_gives_the_fixtures(tmp_path: Path) -> None:
    conftest = (
        SERVER
        + """
import pytest

pytest_plugins = ["mcp_trio.testing"]


@pytest.fixture
def mcp_server():
    return server
"""
    )
    result = run_pytest(tmp_path, {"conftest.py": conftest, "test_calc.py": TESTS})
    assert passed(result, 2), result.stdout + result.stderr


def installed_entry_points(tmp_path: Path) -> Path:
    """A directory that makes pytest see this project's ``pytest11`` entry points as if
    mcp-trio were installed: a distribution's metadata, written from pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    points = project["entry-points"]["pytest11"]
    site = tmp_path / "site"
    info = site / "mcp_trio_entry_points-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: mcp-trio-entry-points\nVersion: 0\n"
    )
    lines = "".join(f"{name} = {value}\n" for name, value in points.items())
    (info / "entry_points.txt").write_text(f"[pytest11]\n{lines}")
    return site


def test_installed_the_plugin_needs_no_pytest_plugins_line(tmp_path: Path) -> None:
    conftest = (
        SERVER
        + """
import pytest


@pytest.fixture
def mcp_server():
    return server
"""
    )
    project = tmp_path / "project"
    project.mkdir()
    site = installed_entry_points(tmp_path)
    result = run_pytest(project, {"conftest.py": conftest, "test_calc.py": TESTS}, site)
    assert passed(result, 2), result.stdout + result.stderr


def test_installed_a_pytest_plugins_line_is_harmless(tmp_path: Path) -> None:
    # Loaded by its entry point and named again in pytest_plugins: registered once.
    conftest = (
        SERVER
        + """
import pytest
from mcp_trio.testing import client_for

pytest_plugins = ["mcp_trio.pytest_plugin"]


@pytest.fixture
def mcp_server():
    return server
"""
    )
    project = tmp_path / "project"
    project.mkdir()
    site = installed_entry_points(tmp_path)
    result = run_pytest(project, {"conftest.py": conftest, "test_calc.py": TESTS}, site)
    assert passed(result, 2), result.stdout + result.stderr


def test_mcp_client_options_reach_open_client(tmp_path: Path) -> None:
    # A tool that asks the user: the client needs an on_elicitation to answer it.
    conftest = (
        SERVER
        + """
import pytest
from mcp_trio.testing import ERAS

pytest_plugins = ["mcp_trio.pytest_plugin"]


@pytest.fixture
def mcp_server():
    return server


@pytest.fixture(params=ERAS)
def mcp_era(request):
    return request.param


@pytest.fixture
def mcp_client_options():
    async def on_elicitation(params):
        assert params.message == "Sure?"
        return {"action": "accept", "content": {"sure": True}}

    return {"on_elicitation": on_elicitation, "timeout": 30}
"""
    )
    tests = """
async def test_ask(mcp_client):
    result = await mcp_client.call_tool("ask")
    assert not result.is_error, result.text
    assert result.text == "accept Confirm(sure=True)"
"""
    result = run_pytest(tmp_path, {"conftest.py": conftest, "test_ask.py": tests})
    assert passed(result, 2), result.stdout + result.stderr


def test_a_failing_callback_fails_the_test(tmp_path: Path) -> None:
    # The tool's log message reaches on_log, whose assert fails; the session goes on
    # (what a notification callback raises is logged) and the call returns. The test
    # must fail all the same, in both eras.
    conftest = (
        SERVER
        + """
import pytest
from mcp_trio.testing import ERAS

pytest_plugins = ["mcp_trio.pytest_plugin"]


@server.tool()
async def chatty(ctx: Context) -> str:
    \"\"\"Logs, then answers.\"\"\"
    await ctx.info("working")
    return "done"


@pytest.fixture
def mcp_server():
    return server


@pytest.fixture(params=ERAS)
def mcp_era(request):
    return request.param


@pytest.fixture
def mcp_client_options():
    async def on_log(params):
        assert params.data == "started", "the expected log message"

    return {"on_log": on_log}
"""
    )
    tests = """
async def test_chatty(mcp_client):
    assert (await mcp_client.call_tool("chatty")).text == "done"
"""
    result = run_pytest(tmp_path, {"conftest.py": conftest, "test_chatty.py": tests})
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "2 failed" in result.stdout, output
    assert "AssertionError: the expected log message" in output
    assert "(raised in the on_log callback given to the mcp_client fixture)" in output


ASYNCIO_RUNNER = '''
import asyncio
import inspect

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_fixture_setup(fixturedef, request):
    """Run every async generator fixture on asyncio, as pytest-asyncio's asyncio_mode =
    auto does (even for a Trio test)."""
    function = fixturedef.func
    if not inspect.isasyncgenfunction(function):
        return

    def on_asyncio(**kwargs):
        generator = function(**kwargs)
        loop = asyncio.new_event_loop()
        try:
            yield loop.run_until_complete(generator.__anext__())
            loop.run_until_complete(generator.aclose())
        finally:
            loop.close()

    fixturedef.func = on_asyncio
'''


def test_the_fixture_run_by_another_runner_says_what_to_do(tmp_path: Path) -> None:
    conftest = (
        SERVER
        + ASYNCIO_RUNNER
        + """
pytest_plugins = ["mcp_trio.pytest_plugin"]


@pytest.fixture
def mcp_server():
    return server
"""
    )
    tests = """
import pytest


@pytest.mark.trio
async def test_add(mcp_client):
    assert (await mcp_client.call_tool("add", {"a": 1, "b": 2})).text == "3"
"""
    result = run_pytest(tmp_path, {"conftest.py": conftest, "test_add.py": tests})
    output = result.stdout + result.stderr
    assert "1 error" in result.stdout, output
    message = re.search(r"^mcp_client needs Trio.*$", result.stdout, re.M)
    assert message is not None, output
    assert message[0].startswith("mcp_client needs Trio, but runs under asyncio: ")
    for advice in ("trio_mode = true", "anyio_backend", "asyncio_mode = strict"):
        assert advice in message[0], message[0]
    assert "AttributeError" not in output
