"""Plain data on the wire: exact types survive, nothing that runs code can cross."""

import math

import pytest

from veriloop.verifiers.code.sandboxed._wire import NotPlainData, dumps_value, loads_value


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -7,
        2.5,
        "text",
        [1, [2, "x"]],
        (1, 2),
        (),
        {"a": 1},
        {(1, 2): {3}},
        frozenset({1, "a"}),
        b"\x00\xff",
        3 + 4j,
        -(2**20000),
        float("inf"),
        float("-inf"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_round_trip_keeps_value_and_exact_type(value):
    back = loads_value(dumps_value(value))
    assert back == value and type(back) is type(value)


def test_nan_round_trips():
    assert math.isnan(loads_value(dumps_value(float("nan"))))


def test_tuple_and_list_stay_distinct():
    assert loads_value(dumps_value((0, 1))) != [0, 1]


def test_objects_that_could_run_code_are_refused():
    class AlwaysEqual(str):
        def __eq__(self, other):
            return True

    for bad in (AlwaysEqual("x"), [object()], {"k": lambda: 1}, (i for i in range(3))):
        with pytest.raises(NotPlainData):
            dumps_value(bad)


@pytest.mark.parametrize("text", ['{"$eval": "1"}', '{"a": 1, "b": 2}', "NaN", '{"$set": [[1]]}', "[1,"])
def test_malformed_or_unknown_encodings_are_rejected(text):
    with pytest.raises(NotPlainData):
        loads_value(text)


def test_a_function_crosses_only_as_the_tests_argument_and_runs_only_where_rebuilt():
    from veriloop.verifiers.code.sandboxed._shipped_callables import ShippedCallable, described, rebuilt, shipped_form

    namespace: dict = {}
    exec(compile("import math\nfactor = 3\nf = lambda x: math.floor(x) * factor", "<tests>", "exec"), namespace)
    text = dumps_value([namespace["f"], len, str.upper], shipped_form)
    assert text == dumps_value([namespace["f"], len, str.upper], shipped_form)  # a stable call key
    with pytest.raises(NotPlainData):
        loads_value(text)  # a result, or a key read without asking for functions: refused
    shown = loads_value(text, described)
    assert all(type(item) is ShippedCallable for item in shown) and repr(shown) == "[<lambda>, len, str.upper]"
    assert dumps_value(shown, shipped_form) == text  # the host's reading re-encodes to the same key
    function, length, upper = loads_value(text, rebuilt)
    assert function(2.5) == 6 and length is len and upper is str.upper
    with pytest.raises(NotPlainData):
        dumps_value(namespace["f"])  # a candidate's result is never encoded with functions


def test_a_shipped_function_carries_only_the_globals_it_reads():
    from veriloop.verifiers.code.sandboxed._shipped_callables import shipped_form

    namespace: dict = {}
    source = "expected = [2, 4]\nscale = 2\ndef f(x):\n    return x.expected * scale\n"
    exec(compile(source, "<tests>", "exec"), namespace)
    text = dumps_value(namespace["f"], shipped_form)
    assert '"scale"' in text and '"expected"' not in text and "[2,4]" not in text
