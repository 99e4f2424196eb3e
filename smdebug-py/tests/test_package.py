"""The installed package: an abi3 extension, numpy its only dependency, and in the numpy 2 venv
the versions Python smdebug 1.0.34 cannot run with."""

import importlib.metadata as md
import os

import numpy as np
import pytest

import smdebug_rs
from smdebug_rs import _native
from conftest import REQUIRED


def test_extension_is_abi3():
    assert os.path.basename(_native.__file__).endswith(".abi3.so")


def test_numpy_is_the_only_dependency():
    requires = md.requires("smdebug-rs") or []
    runtime = [r for r in requires if "extra ==" not in r]
    assert [r.split(">")[0].split("=")[0].split("<")[0].strip() for r in runtime] == ["numpy"]


def test_type_stubs_are_installed():
    root = os.path.dirname(smdebug_rs.__file__)
    assert os.path.exists(os.path.join(root, "_native.pyi"))
    assert os.path.exists(os.path.join(root, "py.typed"))


def test_numpy2_venv_has_what_smdebug_cannot_run_with():
    if "numpy2" not in REQUIRED:
        pytest.skip("not the numpy 2 venv")
    assert int(np.__version__.split(".")[0]) >= 2
    assert int(md.version("protobuf").split(".")[0]) >= 5
