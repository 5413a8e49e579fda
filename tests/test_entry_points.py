"""mhalint.run.entry_points answers as importlib.metadata.entry_points(group=...) does, on generated site folders."""

from __future__ import annotations

import importlib.metadata
import os
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mhalint.run import entry_points as reader

GROUP = "mhalint.rules"
NAMES = ["foo", "Foo", "foo_bar", "foo-bar", "Foo.Bar", "baz", "qux"]
# importlib.metadata imports parts of email as it reads a name from METADATA: the tests' sys.path keeps the stdlib
STDLIB = sorted({sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"],
                 os.path.join(sysconfig.get_paths()["platstdlib"], "lib-dynload")})
LINES = ["a = m:f", "b=pkg.mod:Cls.attr", "  c = m  ", "# a comment", "", "d = m:f [extra]", "e = m:f=g"]


def _section(name: str, lines: list[str]) -> str:
    return f"[{name}]\n" + "\n".join(lines) + "\n"


distribution = st.fixed_dictionaries({
    "name": st.sampled_from(NAMES),
    "version": st.sampled_from(["-1.0", "-2.0", ""]),
    "suffix": st.sampled_from([".dist-info", ".egg-info"]),
    "kind": st.sampled_from(["folder", "folder", "no entry points", "file"]),
    "text": st.lists(st.tuples(st.sampled_from([GROUP, "other", "console_scripts"]),
                               st.lists(st.sampled_from(LINES), max_size=4)), max_size=3).map(
        lambda sections: "".join(_section(name, lines) for name, lines in sections)),
    "preamble": st.sampled_from(["", "no section yet\n", "z = before:any\n"]),
})
site = st.lists(distribution, max_size=5)


def _build(root: Path, sites: list[list[dict]]) -> list[str]:
    paths = []
    for number, distributions in enumerate(sites):
        folder = root / f"site{number}"
        folder.mkdir()
        paths.append(str(folder))
        for dist in distributions:
            target = folder / f"{dist['name']}{dist['version']}{dist['suffix']}"
            if target.exists():
                continue
            if dist["kind"] == "file":  # an old-style PKG-INFO file named *.egg-info
                target.write_text("Metadata-Version: 1.0\nName: x\n")
                continue
            target.mkdir()
            (target / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist['name']}\nVersion: 1\n")
            if dist["kind"] == "folder":
                (target / "entry_points.txt").write_text(dist["preamble"] + dist["text"])
    return paths + [str(root / "missing")]


def _both(paths: list[str], monkeypatch) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    monkeypatch.setattr(sys, "path", paths + STDLIB)
    ours = [tuple(found) for found in reader.entry_points(GROUP)]
    theirs = [(found.name, found.value) for found in importlib.metadata.entry_points(group=GROUP)]
    return ours, theirs


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 always asks importlib.metadata")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sites=st.lists(site, min_size=1, max_size=3))
def test_generated_sites_give_importlib_metadatas_entry_points_without_asking_it(sites, monkeypatch):
    with tempfile.TemporaryDirectory() as root:
        paths = _build(Path(root), sites)
        monkeypatch.setattr(sys, "path", paths)
        read = [tuple(found) for found in reader._read(GROUP)]  # no fallback: the reader itself answered
        ours, theirs = _both(paths, monkeypatch)
    assert read == ours == theirs


def test_a_line_importlib_metadata_refuses_is_refused_by_it(tmp_path: Path, monkeypatch):
    dist = tmp_path / "broken-1.0.dist-info"
    dist.mkdir()
    (dist / "entry_points.txt").write_text(f"[other]\nno equals sign here\n[{GROUP}]\nA = m:f\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    with pytest.raises(Exception) as theirs:  # TypeError on 3.11, ValueError on others
        importlib.metadata.entry_points(group=GROUP)
    with pytest.raises(type(theirs.value)):
        reader.entry_points(GROUP)


def test_where_the_name_is_in_the_metadata_importlib_metadata_answers(tmp_path: Path, monkeypatch):
    """`Foo.DIST-INFO`: importlib.metadata lists it, but reads the distribution's name from its METADATA."""
    for folder, name in (("first.DIST-INFO", "same"), ("same-2.0.dist-info", "same")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1\n")
        (tmp_path / folder / "entry_points.txt").write_text(f"[{GROUP}]\n{folder} = m:f\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    with pytest.raises(reader._Unsure):
        reader._read(GROUP)
    ours, theirs = _both([str(tmp_path)], monkeypatch)
    assert ours == theirs and len(theirs) == 1


def test_a_zip_on_the_path_is_read_by_importlib_metadata(tmp_path: Path, monkeypatch):
    import zipfile

    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("zipped-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: zipped\nVersion: 1\n")
        zipped.writestr("zipped-1.0.dist-info/entry_points.txt", f"[{GROUP}]\nZIP001 = zipped:Rule\n")
    ours, theirs = _both([str(archive)], monkeypatch)
    assert ours == theirs == [("ZIP001", "zipped:Rule")]


def test_the_current_environment_lists_the_same_rules():
    ours = [tuple(found) for found in reader.entry_points(GROUP)]
    assert ours == [(found.name, found.value) for found in importlib.metadata.entry_points(group=GROUP)]
    assert len(ours) >= 15  # the built-in rules, registered in pyproject.toml


@pytest.mark.parametrize("value, expected", [
    ("os.path:join", os.path.join), ("os", os), ("os:path.join", os.path.join), ("os:sep [extra]", os.sep),
])
def test_load_imports_what_the_value_names(value: str, expected):
    assert reader.EntryPoint("x", value).load() is expected


def test_load_refuses_a_value_that_names_nothing():
    with pytest.raises(ValueError, match="is not `module:attribute`"):
        reader.EntryPoint("x", "os : path!").load()
