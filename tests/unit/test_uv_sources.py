"""scripts/uv-sources: pip's configured package sources as `uv pip install` options, with pip's
precedence (global, then install, then PIP_* variables)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def uv_options(pip_config_list: str) -> list[str]:
    """What scripts/uv-sources prints for this `pip config list` output."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "uv-sources")],
        input=pip_config_list,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return done.stdout.splitlines()


def test_this_kind_of_machine() -> None:
    listed = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
"""
    assert uv_options(listed) == [
        "--cert", "/etc/ssl/certs/ca-certificates.crt",
        "--index", "file:///opt/pypi/simple",
        "--index", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels",
        "--constraints", "/etc/xdg/pip/constraints.txt",
        "--index-strategy", "unsafe-best-match",
    ]  # fmt: skip


def test_variables_override_install_which_overrides_global() -> None:
    listed = """\
global.index-url='https://global.example/simple'
install.index-url='https://install.example/simple'
global.no-index='false'
:env:.index-url='https://env.example/simple'
:env:.no_index='yes'
global.timeout='60'
"""
    assert uv_options(listed) == ["--default-index", "https://env.example/simple", "--no-index"]


def test_nothing_configured_means_uv_defaults() -> None:
    assert uv_options("") == []
    assert uv_options("global.index-url=''\nnot a setting\n") == []  # empty values are ignored
