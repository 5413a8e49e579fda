"""Tests for mhalint.configuration.discovery: real trees under tmp_path, and a cross-check against git."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mhalint.configuration.discovery import DEFAULT_EXCLUDE, GitIgnore, discover


def make(root: Path, *paths: str) -> None:
    """Create empty files, or directories for paths that end in "/"."""
    for path in paths:
        target = root / path
        if path.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def found(*args, **kwargs) -> list[str]:
    """The discovered files as "/"-separated strings, asserting that nothing failed."""
    result = discover(*args, **kwargs)
    assert result.errors == []
    return [path.as_posix() for path in result.files]


@pytest.fixture
def plain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory outside any git repository, as the current directory."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def repo(plain: Path) -> Path:
    """A git repository root (a bare ``.git`` is all discovery looks for), as the current directory."""
    (plain / ".git" / "info").mkdir(parents=True)
    return plain


# ---------------------------------------------------------------- walking


def test_walks_recursively_and_keeps_python_extensions(plain: Path) -> None:
    make(plain, "a.py", "b.pyi", "c.ipynb", "notes.txt", "README")
    make(plain, "pkg/__init__.py", "pkg/data.json", "pkg/sub/deep.py")
    assert found(["."]) == ["a.py", "b.pyi", "c.ipynb", "pkg/__init__.py", "pkg/sub/deep.py"]


def test_custom_extensions(plain: Path) -> None:
    make(plain, "a.py", "b.pyx", "pkg/c.pyx")
    assert found(["."], extensions=[".pyx"]) == ["b.pyx", "pkg/c.pyx"]


def test_paths_keep_the_given_spelling(plain: Path) -> None:
    make(plain, "src/pkg/a.py")
    assert found(["src"]) == ["src/pkg/a.py"]
    assert found([Path("./src/")]) == ["src/pkg/a.py"]
    assert found(["src/pkg/.."]) == ["src/pkg/a.py"]
    assert found([plain / "src"]) == [f"{plain.as_posix()}/src/pkg/a.py"]


def test_output_is_sorted_and_deduplicated(plain: Path) -> None:
    make(plain, "b.py", "a.py", "a/z.py", "A.py", "src/x.py", "src/y.py")
    result = found(["src", ".", "src/x.py", "./src/"])
    assert result == sorted(result, key=lambda path: Path(path))
    assert len(result) == len(set(result)) == 6


def test_explicit_files_are_always_checked(repo: Path) -> None:
    write(repo / ".gitignore", "ignored.py\n")
    make(repo, "ignored.py", "notes.txt", "build/x.py")
    assert found(["."]) == []
    assert found(["ignored.py", "notes.txt", "build/x.py"], exclude=["*.py"]) == [
        "build/x.py",
        "ignored.py",
        "notes.txt",
    ]


def test_missing_path_is_reported_not_raised(plain: Path) -> None:
    make(plain, "a.py")
    result = discover(["nope.py", "a.py", "gone/"])
    assert result.files == [Path("a.py")]
    assert result.errors == [
        (Path("gone"), "no such file or directory"),
        (Path("nope.py"), "no such file or directory"),
    ]


SKIPPED_DIRS = [
    ".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".ruff_cache", ".mhalint_cache",
    ".tox", ".nox", ".venv", "venv", "node_modules", "site-packages", "build", "dist",
]  # fmt: skip


def test_default_excluded_directories_are_pruned(plain: Path) -> None:
    assert set(SKIPPED_DIRS) <= DEFAULT_EXCLUDE
    for name in SKIPPED_DIRS:
        make(plain, f"{name}/x.py", f"pkg/{name}/y.py")
    make(plain, "keep.py", "pkg/keep.py", "builder/ok.py")
    assert found(["."]) == ["builder/ok.py", "keep.py", "pkg/keep.py"]


def test_explicit_directory_is_walked_even_if_excluded(repo: Path) -> None:
    write(repo / ".gitignore", "gen/\n")
    make(repo, "build/x.py", "gen/y.py")
    assert found(["."]) == []
    assert found(["build", "gen"]) == ["build/x.py", "gen/y.py"]


# ---------------------------------------------------------------- gitignore in the walk


def test_nested_gitignore_applies_to_its_subtree_and_takes_precedence(repo: Path) -> None:
    write(repo / ".gitignore", "*.gen.py\nlocal.py\n")
    write(repo / "sub/.gitignore", "!*.gen.py\nsecret.py\n")
    make(repo, "a.gen.py", "local.py", "secret.py", "sub/b.gen.py", "sub/local.py", "sub/secret.py")
    make(repo, "sub/deeper/c.gen.py", "other/c.gen.py", "other/secret.py")
    assert found(["."]) == ["other/secret.py", "secret.py", "sub/b.gen.py", "sub/deeper/c.gen.py"]


def test_negation_last_match_wins_but_cannot_reach_under_an_ignored_directory(repo: Path) -> None:
    write(
        repo / ".gitignore",
        "*.gen.py\n!keep.gen.py\n!late.py\nlate.py\nlogs/\n!logs/keep.py\nout/*\n!out/keep.py\n",
    )
    make(repo, "a.gen.py", "keep.gen.py", "late.py", "plain.py", "logs/keep.py", "out/keep.py", "out/drop.py")
    assert found(["."]) == ["keep.gen.py", "out/keep.py", "plain.py"]


def test_anchored_and_unanchored_patterns(repo: Path) -> None:
    write(repo / ".gitignore", "/top.py\nany.py\nsub/mid.py\n")
    write(repo / "sub/.gitignore", "/own.py\n")
    make(repo, "top.py", "sub/top.py", "any.py", "sub/deep/any.py", "sub/mid.py", "x/sub/mid.py")
    make(repo, "sub/own.py", "sub/deeper/own.py", "own.py")
    assert found(["."]) == ["own.py", "sub/deeper/own.py", "sub/top.py", "x/sub/mid.py"]


def test_directory_only_patterns(repo: Path) -> None:
    write(repo / ".gitignore", "data.py/\ncache/\n")
    make(repo, "data.py", "pkg/data.py", "lib/data.py/inner.py", "cache/a.py", "pkg/cache/b.py")
    assert found(["."]) == ["data.py", "pkg/data.py"]


def test_double_star_patterns(repo: Path) -> None:
    write(repo / ".gitignore", "**/gen/*.py\nvendor/**\na/**/z.py\n")
    make(repo, "gen/x.py", "deep/er/gen/y.py", "gen/sub/kept.py", "vendor/v.py", "vendor/sub/w.py")
    make(repo, "a/z.py", "a/b/c/z.py", "b/a/z.py", "z.py")
    assert found(["."]) == ["b/a/z.py", "gen/sub/kept.py", "z.py"]


def test_escapes_in_a_gitignore_file(repo: Path) -> None:
    write(repo / ".gitignore", "\\#hash.py\n#comment.py\n\\!bang.py\ntrail.py   \n")
    make(repo, "#hash.py", "#comment.py", "!bang.py", "trail.py", "kept.py")
    assert found(["."]) == ["#comment.py", "kept.py"]


def test_info_exclude_applies_with_lower_precedence_than_gitignore(repo: Path) -> None:
    write(repo / ".git/info/exclude", "secret.py\nboth.py\n")
    write(repo / ".gitignore", "!both.py\n")
    make(repo, "secret.py", "sub/secret.py", "both.py", "kept.py")
    assert found(["."]) == ["both.py", "kept.py"]


def test_git_file_points_to_the_git_dir_of_a_submodule(plain: Path) -> None:
    write(plain / "modules/proj/info/exclude", "x.py\n")
    write(plain / "proj/.git", "gitdir: ../modules/proj\n")
    make(plain, "proj/x.py", "proj/y.py")
    assert found(["proj"]) == ["proj/y.py"]


def test_gitignore_files_above_the_walked_root_apply(repo: Path) -> None:
    write(repo / ".gitignore", "*.gen.py\n/src/skip.py\n")
    write(repo / "src/.gitignore", "pkg/drop.py\n")
    write(repo / ".git/info/exclude", "secret.py\n")
    make(repo, "src/a.py", "src/x.gen.py", "src/skip.py")
    make(repo, "src/pkg/drop.py", "src/pkg/keep.py", "src/pkg/secret.py")
    assert found(["src"]) == ["src/a.py", "src/pkg/keep.py"]
    assert found(["src/pkg"]) == ["src/pkg/keep.py"]


def test_nested_repository_does_not_inherit_outer_rules(repo: Path) -> None:
    write(repo / ".gitignore", "*.gen.py\n")
    write(repo / "inner/.git/info/exclude", "y.py\n")
    make(repo, "x.gen.py", "y.py", "inner/x.gen.py", "inner/y.py")
    assert found(["."]) == ["inner/x.gen.py", "y.py"]
    assert found(["inner"]) == ["inner/x.gen.py"]


def test_respect_gitignore_false(repo: Path) -> None:
    write(repo / ".gitignore", "*.py\n")
    write(repo / ".git/info/exclude", "*.py\n")
    make(repo, "a.py", "pkg/b.py", "build/c.py")
    assert found(["."]) == []
    assert found(["."], respect_gitignore=False) == ["a.py", "pkg/b.py"]


def test_gitignore_outside_a_repository_is_not_read(plain: Path) -> None:
    if any((parent / ".git").exists() for parent in plain.parents):
        pytest.skip("the temporary directory is inside a git repository")
    write(plain / ".gitignore", "a.py\n")
    make(plain, "a.py")
    assert found(["."]) == ["a.py"]


# ---------------------------------------------------------------- exclude


def test_exclude_patterns_relative_to_cwd_and_to_the_walked_root(plain: Path) -> None:
    make(plain, "a.py", "gen/b.py", "src/gen/c.py", "src/keep.py", "src/tests/t.py")
    assert found(["."], exclude=["gen/"]) == ["a.py", "src/keep.py", "src/tests/t.py"]
    assert found(["src"], exclude=["/tests"]) == ["src/gen/c.py", "src/keep.py"]  # anchored at the root
    assert found(["src"], exclude=["src/keep.py"]) == ["src/gen/c.py", "src/tests/t.py"]  # anchored at cwd
    assert found(["."], exclude=["*.py", "!keep.py"]) == ["src/keep.py"]
    assert found(["a.py"], exclude=["a.py"]) == ["a.py"]


# ---------------------------------------------------------------- failures that must not raise


def test_symlinks_loops_and_broken_links_never_raise(plain: Path) -> None:
    make(plain, "real.py", "dir/inner.py")
    os.symlink("real.py", plain / "link.py")
    os.symlink("missing.py", plain / "broken.py")
    os.symlink("loop.py", plain / "loop.py")
    os.symlink("..", plain / "dir/up")
    os.symlink("dir", plain / "dirlink")
    assert found(["."]) == ["dir/inner.py", "link.py", "real.py"]
    result = discover(["broken.py", "loop.py"])
    assert result.files == []
    assert result.errors == [
        (Path("broken.py"), "no such file or directory"),
        (Path("loop.py"), "too many levels of symbolic links"),
    ]
    assert found(["dirlink"]) == ["dirlink/inner.py"]  # an explicit directory symlink is walked


def test_unreadable_directory_and_gitignore_are_reported(repo: Path) -> None:
    make(repo, "ok.py", "locked/secret.py", "sub/a.py")
    write(repo / "sub/.gitignore", "a.py\n")
    (repo / "locked").chmod(0)
    (repo / "sub/.gitignore").chmod(0)
    try:
        result = discover(["."])
        # root reads whatever the mode says, so decide by what this process can do
        readable = os.access(repo / "locked", os.R_OK | os.X_OK)
    finally:
        (repo / "locked").chmod(0o755)
        (repo / "sub/.gitignore").chmod(0o644)
    if readable:
        assert result.files == [Path("locked/secret.py"), Path("ok.py")]
        assert result.errors == []
    else:
        assert result.files == [Path("ok.py"), Path("sub/a.py")]
        assert result.errors == [
            (Path("locked"), "permission denied"),
            (Path("sub/.gitignore"), "permission denied"),
        ]


# ---------------------------------------------------------------- the matcher alone


@pytest.mark.parametrize(
    ("pattern", "path", "is_dir", "expected"),
    [
        ("**/foo", "foo", False, True),
        ("**/foo", "a/b/foo", False, True),
        ("**/foo", "a/xfoo", False, None),
        ("bar/**", "bar", True, None),
        ("bar/**", "bar/x", False, True),
        ("bar/**", "bar/x/y", False, True),
        ("x/**/y", "x/y", False, True),
        ("x/**/y", "x/a/b/y", False, True),
        ("x/**/y", "z/x/a/y", False, None),
        ("a**b", "a/b", False, None),  # "**" not between slashes is a plain "*"
        ("a**b", "axxb", False, True),
        ("[abc].py", "b.py", False, True),
        ("[abc].py", "d.py", False, None),
        ("[!abc].py", "d.py", False, True),
        ("[^abc].py", "a.py", False, None),
        ("[a-c]x", "bx", False, True),
        ("[a-c]x", "dx", False, None),
        ("[]]x", "]x", False, True),
        ("[[:digit:]]x", "7x", False, True),
        ("[[:digit:]]x", "ax", False, None),
        ("a[/]b", "a/b", False, None),  # a class never matches "/"
        ("[a-", "[a-", False, None),  # unterminated: never matches
        ("?.py", "é.py", False, None),  # "?" is one byte, as in git
        ("\\#hash", "#hash", False, True),
        ("#hash", "#hash", False, None),  # a comment
        ("\\!bang", "!bang", False, True),
        ("trail   ", "trail", False, True),
        ("trail   ", "trail ", False, None),
        ("spc\\ ", "spc ", False, True),
        ("spc\\ ", "spc", False, None),
        ("dir/", "dir", True, True),
        ("dir/", "dir", False, None),
        ("!dir", "dir", True, False),
    ],
)
def test_gitignore_pattern(pattern: str, path: str, is_dir: bool, expected: bool | None) -> None:
    assert GitIgnore([pattern]).match(path, is_dir) is expected


def test_gitignore_base_anchors_patterns() -> None:
    ignore = GitIgnore(["/x.py", "y.py"], base="/repo/sub")
    assert ignore.match("/repo/sub/x.py") is True
    assert ignore.match("/repo/sub/deeper/x.py") is None
    assert ignore.match("/repo/sub/deeper/y.py") is True
    assert ignore.match("/repo/x.py") is None  # outside the base
    assert ignore.match("/repo/subx/y.py") is None


def test_gitignore_file_with_bom_and_crlf(tmp_path: Path) -> None:
    (tmp_path / "ignore").write_bytes(b"\xef\xbb\xbfa.py\r\nb.py \r\n# c.py\r\nd.py")
    ignore = GitIgnore.from_file(tmp_path / "ignore")
    assert [ignore.match(name) for name in ("a.py", "b.py", "c.py", "d.py")] == [True, True, None, True]


# ---------------------------------------------------------------- cross-check against git

CROSS_PATTERNS = [
    "# a comment",
    "*.log",
    "!important.log",
    "build_out/",
    "/root_only.txt",
    "docs/*.md",
    "**/cache",
    "logs/**",
    "!logs/keep.txt",
    "a/**/z.txt",
    "temp?.txt",
    "[abc]x.txt",
    "[!0-9]num.txt",
    "data[[:digit:]].csv",
    "\\#hash.txt",
    "\\!bang.txt",
    "trailing.txt   ",
    "spc\\ ",
    "nested/deep/",
    "*.tmp",
    "!keep/*.tmp",
    "doc**/x.txt",
]

CROSS_PATHS = [
    "app.log", "important.log", "sub/deep.log", "sub/important.log",
    "build_out/", "build_out/a.txt", "sub/build_out/", "sub/build_out/b.txt", "build_out.txt",
    "root_only.txt", "sub/root_only.txt",
    "docs/a.md", "docs/sub/b.md", "sub/docs/c.md",
    "cache/", "cache/x.txt", "sub/cache/", "sub/cache/y.txt", "cache.txt",
    "logs/", "logs/a.txt", "logs/keep.txt", "logs/sub/", "logs/sub/keep.txt",
    "a/z.txt", "a/b/z.txt", "a/b/c/z.txt", "b/a/z.txt",
    "temp1.txt", "temp12.txt", "ax.txt", "dx.txt", "anum.txt", "5num.txt", "data7.csv", "datax.csv",
    "#hash.txt", "!bang.txt", "trailing.txt", "spc ", "spc",
    "nested/deep/", "nested/deep/f.txt", "nested/other.txt",
    "x.tmp", "keep/y.tmp", "keep/sub/z.tmp",
    "doc/x.txt", "docx.txt", "doc/q/x.txt", "docs2/x.txt", "dox/x.txt",
]  # fmt: skip


@pytest.fixture(scope="module")
def git_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bool]]:
    """A repository holding CROSS_PATHS, and whether ``git check-ignore`` ignores each one."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path_factory.mktemp("repo")
    home = tmp_path_factory.mktemp("home")  # keep the user's global excludes out
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home))
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    write(root / ".gitignore", "\n".join(CROSS_PATTERNS) + "\n")
    make(root, *CROSS_PATHS)
    paths = [path.rstrip("/") for path in CROSS_PATHS]
    checked = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "--no-index", "--verbose", "--non-matching"]
        + ["-z", "--stdin"],
        input="\0".join(paths) + "\0",
        capture_output=True,
        text=True,
        env=env,
    )
    assert checked.returncode in (0, 1), checked.stderr
    fields = iter(checked.stdout.split("\0"))
    # -z -v prints: source, line number, pattern, path; the pattern is empty when none matched
    decisions = {
        path: bool(pattern) and not pattern.startswith("!")
        for _, _, pattern, path in zip(fields, fields, fields, fields)
    }
    assert decisions.keys() == set(paths)
    return root, decisions


def ignored_like_check_ignore(ignore: GitIgnore, path: str, is_dir: bool) -> bool:
    """``git check-ignore`` also reports a path under an ignored directory as ignored."""
    parts = path.split("/")
    parents = ("/".join(parts[:end]) for end in range(1, len(parts)))
    return any(ignore.match(parent, is_dir=True) for parent in parents) or bool(ignore.match(path, is_dir))


@pytest.mark.parametrize("path", CROSS_PATHS)
def test_matcher_agrees_with_git_check_ignore(git_repo: tuple[Path, dict[str, bool]], path: str) -> None:
    root, decisions = git_repo
    ignore = GitIgnore.from_file(root / ".gitignore")
    name = path.rstrip("/")
    assert ignored_like_check_ignore(ignore, name, is_dir=path.endswith("/")) is decisions[name]


def test_discover_agrees_with_git_check_ignore(
    git_repo: tuple[Path, dict[str, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, decisions = git_repo
    assert True in decisions.values() and False in decisions.values()
    monkeypatch.chdir(root)
    expected = [Path(path) for path in CROSS_PATHS if not path.endswith("/") and not decisions[path]]
    assert discover(["."], extensions=[""]).files == sorted([*expected, Path(".gitignore")])
