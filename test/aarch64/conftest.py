"""The aarch64 suites' shared fixtures: the cross-built library and the
crash-chain program in each of arm64.VARIANTS."""
import pytest

import arm64


@pytest.fixture(scope="module")
def lib():
    return arm64.library()


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """crashchain.c built in each variant: {variant: path}."""
    return arm64.compile_variants(tmp_path_factory, "crashchain.c")
