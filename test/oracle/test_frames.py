"""Frame-exact truth against gdb: the corpus of test/oracle/programs (C and C++
at -O0/-O2/-O3, with and without frame pointers, GCC and Clang; see oracle.py
for the scenarios) crashes under the preload with core dumps on; gdb reads the core
file of the very same run. For the crashing thread, frame by frame:
- every real frame gdb shows is in the report, at the same pc (no gaps);
- the raw report's symbol names the function gdb names (real frames);
- after `faultline symbolize`, the function and the inline chain name what
  gdb names (inlined frames included).
The shares and every miss are printed (pytest -s, or on failure); misses the
project does not fix are listed with their reason in doc/frames.md."""
import os

import pytest

import oracle

usable, why = oracle.core_pattern_usable()
pytestmark = pytest.mark.skipif(not usable, reason=why)

# The shares the project holds itself to (doc/frames.md lists what misses).
RAW_MIN = float(os.environ.get("FAULTLINE_ORACLE_RAW_MIN", "0.95"))
SYMBOLIZED_MIN = float(os.environ.get("FAULTLINE_ORACLE_SYMBOLIZED_MIN", "0.99"))
# Gaps that remain, by scenario, each with its reason in doc/frames.md: none.
KNOWN_GAPS = set()


@pytest.fixture(scope="module")
def corpus(request, tmp_path_factory):
    res, cases = oracle.run_all(keep=str(tmp_path_factory.mktemp("corpus")))
    # The shares and the misses are printed whether the tests pass or not.
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n" + res.summary())
    return res, cases


@pytest.fixture(scope="module")
def result(corpus):
    return corpus[0]


def test_every_case_ran_and_gdb_read_it(result):
    assert result.cases >= 120
    assert not result.errors, result.summary()
    # The comparison must have had something to compare.
    assert result.raw_named >= 1000 and result.sym_named >= 1000, result.summary()


def test_no_frame_gdb_shows_is_skipped(result):
    unexpected = [g for g in result.gaps if g.split()[0].split(":")[1] not in KNOWN_GAPS]
    assert not unexpected, result.summary()


def test_no_frames_gdb_does_not_show(result):
    assert not result.extra, result.summary()


def test_raw_and_symbolized_reports_name_a_function_the_same_way(result):
    assert result.real_frames >= 1000, result.summary()
    assert len(result.inconsistent) <= result.real_frames // 100, result.summary()


def test_raw_report_names_agree_with_gdb(result):
    assert result.share("raw") >= RAW_MIN, result.summary()


def test_symbolized_names_agree_with_gdb(result):
    assert result.share("sym") >= SYMBOLIZED_MIN, result.summary()


def test_symbolizer_agrees_with_llvm_symbolizer_on_the_corpus_frames(corpus, request):
    """Every distinct frame address of the corpus (programs, their library,
    libc, libstdc++, the loader, libfaultline) through `faultline symbolize
    --module` and llvm-symbolizer-14: function, file, line, column and the
    inline chain (naming differences by design: symtools.compare_with_llvm)."""
    compared, disagreements = oracle.llvm_compare(corpus[1])
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print(f"\nllvm-symbolizer: {compared - len(disagreements)}/{compared} corpus addresses agree")
        for d in disagreements:
            print("  " + d)
    assert compared >= 300
    assert len(disagreements) <= compared // 100, "\n".join(disagreements)


def test_name_keys():
    k = oracle.name_key
    assert k("main::{lambda(Tensor&)#1}::operator()(Tensor&) const") == \
        k("main(int, char**)::<lambda(Tensor&)>::operator()")
    assert k("double corpus::Matrix<int>::sum<double>(int) const") == k("corpus::Matrix<int>::sum<double>")
    assert k("checked_get(int const*, int) [clone .cold]") == k("checked_get")
    assert k("std::function<void (Tensor&)>::operator()(Tensor&) const") == \
        k("std::function<void(Tensor&)>::operator()(Tensor&) const")
    assert oracle.names_agree("operator()", "main::{lambda(Tensor&)#1}::operator()(Tensor&) const")
    # A name shorter than gdb's (scopes lost) does not agree.
    assert not oracle.names_agree("std::_Function_handler<void(Tensor&), main(int, char**)::"
                                  "<lambda(Tensor&)> >::_M_invoke(const std::_Any_data &, Tensor &)",
                                  "_M_invoke")
    assert not oracle.names_agree("(anonymous namespace)::hidden_fault", "hidden_fault")
    assert not oracle.names_agree("level2", "level3")


def test_tail_call_frames_agree_with_gdb(result):
    """Every tail-call frame gdb shows (the `tail` scenario, glibc's qsort) is
    in the symbolized report, marked, and none where gdb shows none."""
    assert not result.tail_misses and not result.tail_extra, result.summary()
