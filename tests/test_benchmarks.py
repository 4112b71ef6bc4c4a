"""The benchmark tool's bookkeeping: every target names a case, the SDK pin is one version.

Nothing here times anything (timings are never test assertions); the figures come from
``python -m benchmarks``.
"""

from __future__ import annotations

import dis
import functools
import json
import statistics
import tomllib
import types
from pathlib import Path

import attrs
import pytest
from benchmarks import _bytecodes, _cli, _harness, _net_server, _profile, _registry, inmemory, sdk
from benchmarks._harness import Bench, Settings, Skip, TimedCase, measure_paired, resolve
from benchmarks.targets import TARGETS

ROOT = Path(__file__).resolve().parent.parent


def _case_names() -> set[str]:
    names: set[str] = set()
    for group in _registry.GROUPS.values():
        if group.name == "sdk":  # no targets; may be unavailable here
            continue
        module = _registry.load(group)
        assert not isinstance(module, str), f"{group.name}: {module}"
        for case in module.cases(Settings.for_run(quick=False)):
            if not isinstance(case, Skip):
                names.add(case.name)
    return names


def test_every_target_names_a_case() -> None:
    # A target keyed by a name no case has would never be checked.
    names = _case_names()
    assert set(TARGETS) <= names, sorted(set(TARGETS) - names)


def test_the_bench_extra_pins_the_sdk_version_the_group_was_written_against() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["bench"] == [f"mcp=={sdk.SDK_VERSION}"]


def test_a_case_and_its_reference_run_in_alternating_rounds() -> None:
    order: list[str] = []

    def case(name: str) -> TimedCase:
        def setup() -> Bench:
            def run(n: int) -> None:
                order.append(name)

            return Bench(run)

        return TimedCase(name=f"g.{name}", title=name, setup=setup, reference=None)

    floor, ours = case("floor"), case("ours")
    settings = Settings(rounds=4, min_round_ns=1, quick=True)
    figures, _, paired = measure_paired(ours, floor, settings)
    assert len(figures) == len(paired) == 4
    # After one calibration run each, rounds alternate and so does who goes first.
    assert order[2:] == ["floor", "ours", "ours", "floor", "floor", "ours", "ours", "floor"]
    result = resolve("g", attrs.evolve(ours, reference="g.floor"), figures, 1, {}, paired)
    assert result.reference_median == statistics.median(paired)
    assert result.ratio == statistics.median(figures) / statistics.median(paired)


def test_every_sdk_pair_is_ours_after_theirs_and_quick_runs_skip_the_slow_ones() -> None:
    # Builds the case lists only (nothing is spawned): the SDK need not be installed.
    full = sdk.cases(Settings.for_run(quick=False))
    names = [case.name for case in full]
    assert names == [f"sdk.{side}.{pair}" for pair in sdk.pair_names() for side in ("mcp", "ours")]
    for case in full:
        assert not isinstance(case, Skip)
        theirs = case.name.replace(".ours.", ".mcp.")
        assert case.reference == (theirs if theirs != case.name else None), case.name
    quick = sdk.cases(Settings.for_run(quick=True))
    measured = {case.name for case in quick if not isinstance(case, Skip)}
    assert measured == {f"sdk.{side}.{pair}" for pair in sdk.QUICK for side in ("mcp", "ours")}
    assert {case.name for case in quick if isinstance(case, Skip)} == {
        f"sdk.*.{pair}" for pair in sdk.pair_names() if pair not in sdk.QUICK
    }


def test_our_side_of_the_sdk_http_pairs_names_server_kinds_that_exist() -> None:
    targets = {target for _, target, *_ in sdk.PAIRS if target.startswith("http-")}
    assert targets
    assert targets <= set(_net_server.KINDS)


# ---------------------------------------------------------------------- the command line


def _fake_group(monkeypatch: pytest.MonkeyPatch, cases: list[TimedCase]) -> None:
    """Make ``core`` a group of ``cases`` (nothing real is measured)."""
    module = types.SimpleNamespace(
        DESCRIPTION="fake", unavailable=lambda: None, cases=lambda settings: cases
    )
    monkeypatch.setattr(_cli, "load", lambda group: module)


def _timed(name: str, *, reference: str | None = None, fails: bool = False) -> TimedCase:
    def setup() -> Bench:
        if fails:
            raise RuntimeError("the server child died")

        def run(n: int) -> None:
            pass

        return Bench(run)

    return TimedCase(name=name, title=name, setup=setup, reference=reference)


def test_an_unknown_group_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main(["bogus", "--check"]) == 2
    assert "bogus: unknown group" in capsys.readouterr().err


def test_a_keyword_that_matches_nothing_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_group(monkeypatch, [_timed("core.floor")])
    assert _cli.main(["core", "--quick", "-k", "nothing", "--check"]) == 2
    assert "no case of core matches" in capsys.readouterr().err


def test_a_json_path_in_no_directory_is_refused_before_measuring(tmp_path: Path) -> None:
    assert _cli.main(["core", "--quick", "--json", str(tmp_path / "no" / "x.json")]) == 2


def test_a_failing_case_spoils_no_other_and_fails_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_group(
        monkeypatch,
        [
            _timed("core.floor"),
            _timed("core.roundtrip.legacy", reference="core.floor", fails=True),
            _timed("core.dispatch100.legacy", reference="core.floor"),
        ],
    )
    monkeypatch.setattr(_harness, "calibrate", lambda run, min_round_ns, self_timed=False: 1)
    out = tmp_path / "run.json"
    assert _cli.main(["core", "--rounds", "1", "--json", str(out)]) == 1
    report = capsys.readouterr().out
    assert "error: core.roundtrip.legacy: RuntimeError: the server child died" in report
    document = json.loads(out.read_text())
    assert [r["name"] for r in document["results"]] == ["core.floor", "core.dispatch100.legacy"]
    assert document["errors"] == [
        {"name": "core.roundtrip.legacy", "error": "RuntimeError: the server child died"}
    ]


def test_a_target_whose_reference_has_no_figure_is_not_met(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_group(
        monkeypatch,
        [
            _timed("core.floor", fails=True),
            _timed("core.roundtrip.legacy", reference="core.floor"),
        ],
    )
    monkeypatch.setattr(_harness, "calibrate", lambda run, min_round_ns, self_timed=False: 1)
    out = tmp_path / "run.json"
    assert _cli.main(["core", "--rounds", "1", "--check", "--json", str(out)]) == 1
    assert "target not checked: core.roundtrip.legacy" in capsys.readouterr().out
    assert json.loads(out.read_text())["failed"] == ["core.roundtrip.legacy"]


# ---------------------------------------------------------------------- --bytecodes


def _one_step() -> int:
    x = 1
    return x


def _three_steps() -> int:
    x = 1
    y = x + 2
    z = y * x
    return z


def _calling(function: object, *, self_timed: bool = False) -> TimedCase:
    assert callable(function)

    def setup() -> Bench:
        def run(n: int) -> None:
            for _ in range(n):
                function()

        return Bench(run, self_timed=self_timed)

    return TimedCase(name="core.fake", title="fake", setup=setup)


def test_bytecodes_counts_exactly_the_bytecodes_each_operation_runs() -> None:
    one = _bytecodes.count_bytecodes(_calling(_one_step))
    three = _bytecodes.count_bytecodes(_calling(_three_steps))
    assert one.ops >= _bytecodes.OPERATIONS
    extra = len(list(dis.get_instructions(_three_steps))) - len(
        list(dis.get_instructions(_one_step))
    )
    assert extra > 0
    assert three.per_op - one.per_op == extra


def test_bytecodes_of_a_real_case_name_the_core_and_the_reference(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _cli.main(["core", "--bytecodes", "core.roundtrip.legacy"]) == 0
    out = capsys.readouterr().out
    assert "its reference `core.floor`" in out
    assert "| core (mcp_sansio) |" in out
    assert "Connection.send_request)`" in out


def test_bytecodes_trace_the_event_loop_thread_of_a_trio_case() -> None:
    cases = {case.name: case for case in inmemory.cases(Settings.for_run(quick=True))}
    case = cases["inmemory.roundtrip"]
    assert isinstance(case, TimedCase)
    counted = _bytecodes.count_bytecodes(case, operations=20)
    traced = {code.co_filename.replace("\\", "/") for code in counted.bytecodes}
    assert any(name.endswith("mcp_trio/_session.py") for name in traced)
    assert any(name.endswith("trio/_core/_run.py") for name in traced)


def test_bytecodes_refuse_a_case_timed_in_another_process(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_group(monkeypatch, [_calling(_one_step, self_timed=True)])
    assert _cli.main(["core", "--bytecodes", "core.fake"]) == 2
    assert "runs in another process" in capsys.readouterr().err
    assert _cli.main(["core", "--bytecodes", "core.nothing"]) == 2
    assert "no timed case named 'core.nothing'" in capsys.readouterr().err


# ---------------------------------------------------------------------- the tight floors


def _all_cases(*groups: str) -> dict[str, TimedCase]:
    found: dict[str, TimedCase] = {}
    for name in groups:
        module = _registry.load(_registry.GROUPS[name])
        assert not isinstance(module, str), module
        for case in module.cases(Settings.for_run(quick=True)):
            if isinstance(case, TimedCase):
                found[case.name] = case
    return found


def test_each_transport_target_has_a_tight_floor_measured_before_it() -> None:
    # bench-audit finding 1: the plain floors yield where ours does not; every case
    # with a transport target also reports its ratio to the tight floor.
    for group in ("inmemory", "stdio", "http"):
        module = _registry.load(_registry.GROUPS[group])
        assert not isinstance(module, str)
        order = [c.name for c in module.cases(Settings.for_run(quick=True))]
        cases = _all_cases(group)
        targeted = [n for n in cases if n in TARGETS and cases[n].reference is not None]
        assert targeted, group
        for name in targeted:
            tight = cases[name].tight
            assert tight is not None and ".floor.tight." in f"{tight}.", name
            # The tight floor is divided by the same plain floor, and runs before the case.
            assert cases[tight].reference == cases[name].reference, name
            assert order.index(tight) < order.index(name), name


def test_a_tight_floor_is_measured_in_the_same_rounds_as_the_case_and_its_reference() -> None:
    order: list[str] = []

    def case(name: str, reference: str | None = None, tight: str | None = None) -> TimedCase:
        def setup() -> Bench:
            def run(n: int) -> None:
                order.append(name)

            return Bench(run)

        return TimedCase(
            name=f"g.{name}", title=name, setup=setup, reference=reference, tight=tight
        )

    floor, tight = case("floor"), case("tight")
    ours = case("ours", reference="g.floor", tight="g.tight")
    settings = Settings(rounds=4, min_round_ns=1, quick=True)
    figures, _, (floor_figures, tight_figures) = _harness.measure_interleaved(
        ours, [floor, tight], settings
    )
    assert len(figures) == len(floor_figures) == len(tight_figures) == 4
    rounds = ["floor", "tight", "ours", "ours", "tight", "floor"]
    assert order[3:] == rounds + rounds  # (after one calibration run each)
    result = resolve("g", ours, figures, 1, {}, floor_figures, tight_figures)
    assert result.tight == "g.tight"
    assert result.tight_median == statistics.median(tight_figures)
    assert result.tight_ratio == statistics.median(figures) / statistics.median(tight_figures)
    assert result.ratio == statistics.median(figures) / statistics.median(floor_figures)


def test_the_table_and_the_json_give_the_ratio_to_the_tight_floor(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = attrs.evolve(
        _timed("core.roundtrip.legacy", reference="core.floor"), tight="core.floor.tight"
    )
    _fake_group(
        monkeypatch,
        [
            _timed("core.floor"),
            _timed("core.floor.tight", reference="core.floor"),
            _timed("core.other"),
            ours,
        ],
    )
    monkeypatch.setattr(_harness, "calibrate", lambda run, min_round_ns, self_timed=False: 1)
    out = tmp_path / "run.json"
    # -k brings in the reference and the tight floor (and nothing else).
    assert _cli.main(["core", "--rounds", "1", "-k", "roundtrip", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| tight floor (median) | ratio to tight |" in table
    (row,) = [line for line in table.splitlines() if line.startswith("| `core.roundtrip")]
    assert "| core.floor.tight (" in row
    results = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    assert set(results) == {"core.floor", "core.floor.tight", "core.roundtrip.legacy"}
    mine = results["core.roundtrip.legacy"]
    assert mine["tight"] == "core.floor.tight"
    assert mine["tight_ratio"] == mine["median"] / mine["tight_median"]
    assert results["core.floor"]["tight"] is None


def test_every_tight_floor_answers_every_call() -> None:
    # Each tight floor (its echo child too) really serves: a few calls, then the check.
    cases = _all_cases("inmemory", "stdio", "http")
    tight = [case for name, case in cases.items() if ".floor.tight" in name]
    assert len(tight) == 8
    for case in tight:
        bench = case.setup()
        try:
            bench.run(3)
            assert bench.check is not None
            bench.check()
        finally:
            assert bench.close is not None
            bench.close()


def test_the_tight_in_memory_floor_runs_fewer_bytecodes_than_the_floor_and_ours() -> None:
    cases = _all_cases("inmemory")
    for suffix in ("", ".100"):
        tight = _bytecodes.count_bytecodes(cases[f"inmemory.floor.tight{suffix}"], 100).per_op
        floor = _bytecodes.count_bytecodes(cases[f"inmemory.floor{suffix}"], 100).per_op
        ours = _bytecodes.count_bytecodes(cases[f"inmemory.roundtrip{suffix}"], 100).per_op
        assert tight < floor < ours, (suffix, tight, floor, ours)


def test_bytecodes_of_a_case_with_a_tight_floor_give_both_ratios(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    count = functools.partial(_bytecodes.count_bytecodes, operations=50)
    monkeypatch.setattr(_cli, "count_bytecodes", count)
    assert _cli.main(["inmemory", "--bytecodes", "inmemory.roundtrip"]) == 0
    out = capsys.readouterr().out
    assert "its reference `inmemory.floor`" in out
    assert "its tight floor `inmemory.floor.tight`" in out


# ---------------------------------------------------------------------- layers


def test_third_party_packages_have_layers_of_their_own() -> None:
    # bench-audit finding 5: they were all filed under "standard library".
    for path, expected in (
        ("/v/lib/python3.11/site-packages/h11/_connection.py", "h11"),
        ("/v/lib/python3.11/site-packages/trio_websocket/_impl.py", "trio_websocket"),
        ("/v/lib/python3.11/site-packages/wsproto/frame_protocol.py", "wsproto"),
        ("/v/lib/python3.11/site-packages/trio/_core/_run.py", _profile.TRIO),
        ("/usr/lib/python3.11/contextlib.py", _profile.STDLIB),
    ):
        assert _profile.layer(_profile.area(path)) == expected, path


def test_bytecodes_charge_the_standard_library_trio_calls_to_trio() -> None:
    cases = _all_cases("inmemory")
    counted = _bytecodes.count_bytecodes(cases["inmemory.roundtrip"], operations=50)
    # The cancel scope's contextmanager (contextlib) runs for Trio on every call.
    assert any(code.co_filename.endswith("contextlib.py") for code in counted.for_trio)
    report = _bytecodes.report(counted)
    assert "standard library" not in report.split("| module |")[0]


# ---------------------------------------------------------------------- sdk parse/serialize


def test_our_side_of_each_sdk_parse_and_serialize_pair_runs_its_core_case() -> None:
    full = {case.name: case for case in sdk.cases(Settings.for_run(quick=False))}
    for kind, *_ in sdk.CODEC_KINDS:
        for message in ("request", "result", "tools_list", "resource", "progress"):
            ours = full[f"sdk.ours.{kind}.{message}"]
            assert isinstance(ours, TimedCase)
            assert ours.reference == f"sdk.mcp.{kind}.{message}"
            bench = ours.setup()  # (checks it produces the workload)
            bench.run(1)
