"""workspace_tests under pytest: every honest way of testing the workspace's code still passes,
now that the code runs in a process of its own and the tests hold proxies of it."""

from __future__ import annotations

import pytest

from veriloop.core import Response, Task
from veriloop.verifiers import verify

SHOP = {
    "shop/__init__.py": "from shop.cart import Cart, CartError, EmptyCart, total\n",
    "shop/cart.py": """
import datetime
import decimal
import pathlib

RATES = {"standard": 1, "express": 3}


class CartError(ValueError):
    pass


class EmptyCart(CartError):
    pass


class Cart:
    def __init__(self, owner="anyone"):
        self.owner = owner
        self.items = []

    def add(self, name, price):
        if price < 0:
            raise CartError(f"negative price for {name}")
        self.items.append((name, price))
        return self

    def total(self):
        return total([price for _, price in self.items])

    def __len__(self):
        return len(self.items)

    def __iter__(self):
        return (name for name, _ in self.items)

    def __contains__(self, name):
        return any(name == item for item, _ in self.items)

    def __getitem__(self, index):
        return self.items[index]

    def __eq__(self, other):
        return isinstance(other, Cart) and self.items == other.items

    def __repr__(self):
        return f"Cart({self.owner!r}, {len(self.items)} items)"


def total(prices):
    if not prices:
        raise EmptyCart("nothing to add up")
    return sum(prices)


def squares(count):
    for number in range(count):
        yield number * number


def sort_in_place(values):
    values.sort()


def save(path, text):
    pathlib.Path(path).write_text(text)
    return pathlib.Path(path)


def shipping(kind):
    return RATES[kind]


def shout(text):
    print(text.upper())


def apply(function, value):
    return function(value)


def due(start, days):
    return start + datetime.timedelta(days=days)


def with_tax(price):
    return (price * decimal.Decimal("1.1")).quantize(decimal.Decimal("0.01"))


def shop_name():
    import os

    return os.environ["SHOP_NAME"]


def load_prices(text):
    import json

    return json.loads(text)


def carts(*owners):
    return [Cart(owner) for owner in owners]
""",
    "app.py": "import sys\nfrom shop.cart import total\n\nprint(total([int(a) for a in sys.argv[1:]]))\n",
}

HIDDEN = {
    "tests/test_shop.py": """
import datetime
import decimal
import json
import pathlib
import subprocess
import sys

import pytest

import shop
from shop import cart
from shop.cart import Cart, CartError, EmptyCart, squares, total


@pytest.fixture
def filled():
    return Cart("ann").add("pen", 2).add("ink", 5)


def test_module_function():
    assert total([1, 2, 3]) == 6 and cart.shipping("express") == 3


@pytest.mark.parametrize("prices, expected", [([1], 1), ([2, 3], 5), ((4, 4, 4), 12)])
def test_parametrized(prices, expected):
    assert total(prices) == expected


def test_class_state_and_methods(filled):
    assert filled.owner == "ann" and len(filled) == 2 and filled.total() == 7
    filled.owner = "bob"
    assert filled.owner == "bob" and filled.items == [("pen", 2), ("ink", 5)]
    assert list(filled) == ["pen", "ink"] and "ink" in filled and "cap" not in filled
    assert filled[0] == ("pen", 2) and repr(filled) == "Cart('bob', 2 items)"
    assert isinstance(filled, Cart) and not isinstance(filled, type(shop))


def test_objects_compare_by_their_own_eq(filled):
    assert filled == Cart("other").add("pen", 2).add("ink", 5)
    assert filled != Cart()


def test_own_exceptions_and_their_bases():
    with pytest.raises(EmptyCart, match="nothing"):
        total([])
    with pytest.raises(CartError):
        total([])
    with pytest.raises(ValueError):
        Cart().add("pen", -1)
    with pytest.raises(shop.CartError) as caught:
        Cart().add("pen", -1)
    assert str(caught.value) == "negative price for pen"
    assert not issubclass(CartError, EmptyCart)


def test_builtin_exceptions():
    with pytest.raises(KeyError):
        cart.shipping("teleport")
    with pytest.raises(json.JSONDecodeError):
        cart.load_prices("{not json")
    with pytest.raises(TypeError):
        total([1, "2"])


def test_generators():
    assert list(squares(4)) == [0, 1, 4, 9]
    numbers = squares(3)
    assert next(numbers) == 0 and next(numbers) == 1 and sum(numbers) == 4


def test_arguments_changed_in_place():
    values = [3, 1, 2]
    assert cart.sort_in_place(values) is None
    assert values == [1, 2, 3]


def test_module_attributes_can_be_patched(monkeypatch):
    monkeypatch.setattr(cart, "RATES", {"express": 9})
    assert cart.shipping("express") == 9


def test_the_file_the_code_wrote(tmp_path):
    written = cart.save(tmp_path / "out.txt", "saved")
    assert (tmp_path / "out.txt").read_text() == "saved" and written == tmp_path / "out.txt"
    cart.save("relative.txt", "here")
    assert pathlib.Path("relative.txt").read_text() == "here"


def test_working_directory_and_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SHOP_NAME", "corner")
    cart.save("here.txt", cart.shop_name())
    assert (tmp_path / "here.txt").read_text() == "corner"


def test_printed_output(capsys):
    cart.shout("hi")
    assert capsys.readouterr().out == "HI\\n"


def test_dates_decimals_and_lists_of_objects():
    assert cart.due(datetime.date(2024, 1, 30), 3) == datetime.date(2024, 2, 2)
    assert cart.with_tax(decimal.Decimal("2.00")) == decimal.Decimal("2.20")
    made = cart.carts("ann", "bob")
    assert type(made) is list and len(made) == 2 and [c.owner for c in made] == ["ann", "bob"]


def test_a_workspace_program_in_a_subprocess():
    done = subprocess.run([sys.executable, "app.py", "2", "5"], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "7"
""",
}
CASES = 16


def _task(hidden: dict[str, str] = HIDDEN) -> Task:
    verifier = {"kind": "workspace_tests", "files": hidden}
    return Task(id="shop", domain="terminal", prompt="p", verifier=verifier, environment="pytest", workspace=SHOP)


def _score(workspace: dict[str, str], hidden: dict[str, str] = HIDDEN):
    return verify(_task(hidden), Response(id="r", task_id="shop", response="done", workspace=workspace))


def test_every_honest_form_passes(env_with_pytest):
    score = _score(SHOP)
    assert score.passed and score.reward == 1.0, score.detail
    assert f"{CASES}/{CASES} hidden tests passed" in score.detail


def test_an_object_equal_to_everything_passes_no_comparison(env_with_pytest):
    always = (
        "class _Any:\n    def __eq__(self, other):\n        return True\n\n\ndef total(prices):\n    return _Any()\n"
    )
    score = _score({**SHOP, "shop/cart.py": SHOP["shop/cart.py"] + always})
    assert not score.passed, score.detail
    assert "test_module_function" in score.detail and "test_parametrized[prices0-1]" in score.detail


def test_the_wrong_exception_class_is_not_caught(env_with_pytest):
    wrong = SHOP["shop/cart.py"].replace('raise EmptyCart("nothing', 'raise CartError("nothing')
    score = _score({**SHOP, "shop/cart.py": wrong})
    assert not score.passed and "test_own_exceptions_and_their_bases" in score.detail, score.detail


def test_a_function_of_the_tests_runs_beside_the_code_and_an_object_of_them_fails_only_its_test(env_with_pytest):
    hidden = {
        "tests/test_callback.py": (
            "from shop import cart\n\n\ndef test_callback():\n    assert cart.apply(lambda v: v + 1, 1) == 2\n\n\n"
            "def test_object():\n    assert cart.apply(len, object()) == 1\n\n\n"
            "def test_plain():\n    assert cart.total([1]) == 1\n"
        )
    }
    score = _score(SHOP, hidden)
    assert score.reward == pytest.approx(2 / 3) and "not passed: tests/test_callback.py::test_object" in score.detail
    assert "test_callback.py::test_object: the tests' object cannot reach" in score.detail, score.detail


def test_the_workspace_code_runs_in_another_process_than_the_tests(env_with_pytest):
    probe = "import os\n\n\ndef pid():\n    return os.getpid()\n"
    hidden = {
        "tests/test_apart.py": (
            "import os\n\nfrom shop import probe\n\n\n"
            "def test_apart():\n    assert probe.pid() != os.getpid()\n\n\n"
            "def test_same_process_for_every_call():\n    assert probe.pid() == probe.pid()\n"
        )
    }
    score = _score({**SHOP, "shop/probe.py": probe}, hidden)
    assert score.passed, score.detail


def test_hidden_tests_inside_a_package_of_the_workspace(env_with_pytest):
    package = {**SHOP, "tests/__init__.py": "MARK = 'workspace'\n", "tests/support.py": "def one():\n    return 1\n"}
    hidden = {
        "tests/test_in_package.py": (
            "import tests\nfrom tests.support import one\nfrom shop.cart import total\n\n\n"
            "def test_total():\n    assert total([one(), 2]) == 3 and tests.MARK == 'workspace'\n"
        )
    }
    verifier = {"kind": "workspace_tests", "files": hidden}
    task = Task(id="pkg", domain="terminal", prompt="p", verifier=verifier, environment="pytest", workspace=package)
    score = verify(task, Response(id="r", task_id="pkg", response="done", workspace=package))
    assert score.passed, score.detail
