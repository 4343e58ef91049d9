"""The ``bank`` theme of ``terminal-repos``: accounts in cents, transfers, interest and statements."""

from __future__ import annotations

import random

from veriloop.tasks.generators._terminal_themes import Bug, Misuse, Module, Theme, Unit, ValueUnit, money_text


def _bank_draw(rng: random.Random) -> dict[str, object]:
    owners = rng.sample(("ada", "ben", "cleo", "dev", "eli", "fay", "gus", "hana", "ivo", "jun"), 3)
    balances = [rng.randint(50_000, 900_000), rng.randint(1_000, 40_000), rng.randint(100, 999)]
    bill = rng.randint(1_000, 9_999)
    share, rest = divmod(bill, 3)
    parts = [share + 1 if index < rest else share for index in range(3)]
    total = sum(balances)
    return {
        **{f"owner_{k}": owner for k, owner in zip("abc", owners)},
        **{f"balance_{k}": balance for k, balance in zip("abc", balances)},
        "balance_a_text": money_text(balances[0]),
        "balance_sum": total,
        "share_a": round(100 * balances[0] / total, 1),
        "share_c": round(100 * balances[2] / total, 1),
        "amount": rng.randint(100, 999),
        "rate_bp": rng.choice((150, 200, 250, 300, 350, 400, 450)),
        "promo_percent": rng.randint(3, 9),
        "bill": bill,
        "bill_shares": "{" + ", ".join(f'"{owner}": {part}' for owner, part in zip(owners, parts)) + "}",
    }


BANK = Theme(
    name="bank",
    packages=("ledger", "bankbook", "tally", "coffer"),
    doc="Bank accounts kept in cents: deposits, withdrawals, transfers, interest and statements.",
    modules=(
        Module("rates", ("rates", "interest", "finance"), "Interest and the splitting of amounts, in integer cents."),
        Module("accounts", ("accounts", "models", "holders"), "The account record."),
        Module("moves", ("transactions", "operations", "movements"), "Deposits, withdrawals, transfers, interest."),
        Module("statements", ("statements", "reports", "summaries"), "Statements over lists of accounts."),
    ),
    names={
        "interest": ("interest", "simple_interest", "interest_for"),
        "split_evenly": ("split_evenly", "even_shares", "split_amount"),
        "monthly": ("monthly", "instalments", "monthly_parts"),
        "Account": ("Account", "BankAccount", "Holding"),
        "InsufficientFunds": ("InsufficientFunds", "OverdraftError", "NotEnoughFunds"),
        "deposit": ("deposit", "pay_in", "credit"),
        "withdraw": ("withdraw", "take_out", "debit"),
        "transfer": ("transfer", "move_money", "send"),
        "add_interest": ("add_interest", "accrue", "pay_interest"),
        "projected_balance": ("projected_balance", "balance_after", "forecast"),
        "statement_line": ("statement_line", "balance_line", "describe_account"),
        "total_balance": ("total_balance", "money_held", "sum_balances"),
        "share_of": ("share_of", "holding_percent", "owner_share"),
        "shares": ("shares", "split_between", "divide_bill"),
    },
    draw=_bank_draw,
    helpers={
        "bank": """
def bank():
    return [$Account("$owner_a", $balance_a), $Account("$owner_b", $balance_b), $Account("$owner_c", $balance_c)]
""",
    },
    units=(
        Unit(
            "interest",
            ("rates",),
            '''
def $interest(balance, rate_bp, days):
    """Simple interest in cents on ``balance`` cents over ``days`` days at ``rate_bp`` basis points
    a year (100 basis points are 1 %; a year has 365 days), rounded down to whole cents."""
    return balance * rate_bp * days // (10_000 * 365)
''',
            tests="""
def test_interest_is_in_basis_points_a_year():
    assert $interest(3_650_000, $rate_bp, 10) == $rate_bp * 10
    assert $interest(36_500, 100, 1) == 1
    assert $interest(0, 300, 30) == 0
""",
            visible="""
def test_a_year_of_interest():
    assert $interest(1_000_000, 500, 365) == 50_000
""",
            bugs=(Bug("// (10_000 * 365)", "// 10_000 * 365", "wrong operator"),),
            returns=ValueUnit("cents", "$interest(1_000_000, 250, 365)", "25_000"),
        ),
        Unit(
            "split_evenly",
            ("rates",),
            '''
def $split_evenly(cents, parts):
    """``cents`` split into ``parts`` whole-cent shares that differ by at most one cent and add up
    to ``cents``; the larger shares come first."""
    share, rest = divmod(cents, parts)
    return [share + 1 if index < rest else share for index in range(parts)]
''',
            tests="""
def test_shares_differ_by_one_cent_at_most():
    assert $split_evenly(9, 3) == [3, 3, 3]
    assert $split_evenly(5, 7) == [1, 1, 1, 1, 1, 0, 0]
    assert sum($split_evenly($bill, 4)) == $bill
""",
            visible="""
def test_split_a_bill():
    assert $split_evenly(1000, 3) == [334, 333, 333]
""",
            bugs=(
                Bug("index < rest", "index <= rest", "off-by-one"),
                Bug("divmod(cents, parts)", "divmod(parts, cents)", "swapped arguments"),
            ),
        ),
        Unit(
            "monthly",
            ("rates", "statements"),
            '''
def $monthly(cents):
    """The 12 monthly instalments (whole cents, larger ones first) of a yearly amount of ``cents``."""
    return $split_evenly(cents, 12)
''',
            tests="""
def test_twelve_instalments():
    assert $monthly(1210) == [101] * 10 + [100] * 2
""",
        ),
        Unit(
            "Account",
            ("accounts",),
            '''
@dataclass(frozen=True)
class $Account:
    """A bank account: its owner and its balance in cents, never negative."""

    owner: str
    balance: int

    def can_pay(self, cents):
        """Whether ``cents`` can be taken out without the balance going negative."""
        return cents <= self.balance
''',
            tests="""
def test_an_account_can_pay_up_to_its_balance():
    assert $Account("$owner_b", 0).can_pay(0)
    assert $Account("$owner_b", 10).can_pay(3)
    assert not $Account("$owner_b", 10).can_pay(11)
""",
            visible="""
def test_paying_the_whole_balance():
    account = $Account("$owner_a", $balance_a)
    assert account.can_pay($balance_a)
    assert not account.can_pay($balance_a + 1)
""",
            imports=("dataclasses.dataclass",),
            bugs=(Bug("cents <= self.balance", "cents < self.balance", "off-by-one"),),
        ),
        Unit(
            "InsufficientFunds",
            ("moves",),
            '''
class $InsufficientFunds(ValueError):
    """Raised when an account cannot pay an amount."""
''',
        ),
        Unit(
            "deposit",
            ("moves",),
            '''
def $deposit(account, cents):
    """The account after paying in ``cents``; ValueError unless ``cents`` is positive."""
    if cents <= 0:
        raise ValueError(f"a deposit must be positive, not {cents}")
    return replace(account, balance=account.balance + cents)
''',
            tests="""
def test_deposits_must_be_positive():
    account = $Account("$owner_b", $balance_b)
    assert $deposit(account, 1).balance == $balance_b + 1
    for cents in (0, -$amount):
        with pytest.raises(ValueError):
            $deposit(account, cents)
""",
            visible="""
def test_deposits_add_to_the_balance():
    account = $deposit($Account("$owner_a", $balance_a), $amount)
    assert account.balance == $balance_a + $amount
    with pytest.raises(ValueError):
        $deposit(account, 0)
""",
            imports=("dataclasses.replace",),
            bugs=(
                Bug("if cents <= 0:", "if cents < 0:", "off-by-one"),
                Bug("account.balance + cents", "account.balance - cents", "wrong operator"),
            ),
        ),
        Unit(
            "withdraw",
            ("moves",),
            '''
def $withdraw(account, cents):
    """The account after taking out ``cents``; InsufficientFunds if it cannot pay them."""
    if not account.can_pay(cents):
        raise $InsufficientFunds(f"{account.owner} cannot pay {cents}")
    return replace(account, balance=account.balance - cents)
''',
            tests="""
def test_withdrawing_everything_leaves_zero():
    assert $withdraw($Account("$owner_b", $balance_b), $balance_b).balance == 0


def test_overdrafts_are_refused():
    with pytest.raises($InsufficientFunds):
        $withdraw($Account("$owner_b", $balance_b), $balance_b + 1)
""",
            visible="""
def test_withdrawals_take_from_the_balance():
    account = $withdraw($Account("$owner_a", $balance_a), $amount)
    assert account.balance == $balance_a - $amount
""",
            imports=("dataclasses.replace",),
            bugs=(
                Bug("account.balance - cents", "account.balance + cents", "wrong operator"),
                Bug("if not account.can_pay(cents):", "if account.can_pay(cents):", "wrong comparison"),
            ),
        ),
        Unit(
            "transfer",
            ("moves",),
            '''
def $transfer(source, target, cents):
    """``(source, target)`` after moving ``cents`` from ``source`` to ``target``."""
    return $withdraw(source, cents), $deposit(target, cents)
''',
            tests="""
def test_transfers_keep_the_total():
    source, target = $transfer($Account("$owner_b", $balance_b), $Account("$owner_c", 0), $balance_b)
    assert (source.balance, target.balance) == (0, $balance_b)


def test_a_refused_transfer_raises():
    with pytest.raises($InsufficientFunds):
        $transfer($Account("$owner_c", 5), $Account("$owner_a", $balance_a), 6)
""",
            visible="""
def test_transfer_moves_money():
    source, target = $transfer($Account("$owner_a", $balance_a), $Account("$owner_b", $balance_b), $amount)
    assert (source.balance, target.balance) == ($balance_a - $amount, $balance_b + $amount)
""",
            bugs=(
                Bug(
                    "$withdraw(source, cents), $deposit(target, cents)",
                    "$withdraw(target, cents), $deposit(source, cents)",
                    "swapped arguments",
                ),
            ),
        ),
        Unit(
            "add_interest",
            ("moves",),
            '''
SAVINGS_RATE_BP = $rate_bp


def $add_interest(account, days):
    """The account after ``days`` days of interest at SAVINGS_RATE_BP basis points a year."""
    earned = $interest(account.balance, SAVINGS_RATE_BP, days)
    return $deposit(account, earned) if earned else account
''',
            tests="""
def test_savings_interest_is_paid_in():
    assert $add_interest($Account("$owner_a", 3_650_000), 10).balance == 3_650_000 + $rate_bp * 10
    assert $add_interest($Account("$owner_c", 10), 1).balance == 10
""",
        ),
        Unit(
            "projected_balance",
            ("statements",),
            '''
PROMO_RATE_PERCENT = $promo_percent


def $projected_balance(account, days):
    """The balance in cents after ``days`` days at the promotional rate of PROMO_RATE_PERCENT % a year."""
    return account.balance + $interest(account.balance, PROMO_RATE_PERCENT * 100, days)
''',
            tests="""
def test_projection_at_the_promotional_rate():
    assert $projected_balance($Account("$owner_b", 0), 100) == 0
    assert $projected_balance($Account("$owner_c", 3_650_000), 1) == 3_650_000 + 100 * $promo_percent
""",
            visible="""
def test_balance_after_a_year():
    assert $projected_balance($Account("$owner_a", 730_000), 365) == 730_000 + 7_300 * $promo_percent
""",
        ),
        Unit(
            "statement_line",
            ("statements", "accounts"),
            '''
def $statement_line(account):
    """'owner: B' with the balance B in currency units, two decimals."""
    whole, rest = divmod(account.balance, 100)
    return f"{account.owner}: {whole}.{rest:02d}"
''',
            tests="""
def test_statement_lines_show_two_decimals():
    assert $statement_line($Account("$owner_b", 7)) == "$owner_b: 0.07"
    assert $statement_line($Account("$owner_c", 100)) == "$owner_c: 1.00"
""",
            visible="""
def test_one_statement_line():
    assert $statement_line($Account("$owner_a", $balance_a)) == "$owner_a: $balance_a_text"
""",
            bugs=(Bug("divmod(account.balance, 100)", "divmod(100, account.balance)", "swapped arguments"),),
        ),
        Unit(
            "total_balance",
            ("accounts", "statements"),
            '''
def $total_balance(accounts):
    """The sum of the balances of ``accounts``, in cents."""
    return sum(account.balance for account in accounts)
''',
            tests="""
def test_balances_add_up():
    assert $total_balance([]) == 0
    assert $total_balance(bank()) == $balance_sum
""",
        ),
        Unit(
            "share_of",
            ("statements",),
            '''
def $share_of(accounts, owner):
    """The percentage (0-100, one decimal) of all the money in ``accounts`` that ``owner`` holds."""
    total = $total_balance(accounts)
    held = sum(account.balance for account in accounts if account.owner == owner)
    return round(100 * held / total, 1) if total else 0.0
''',
            tests="""
def test_owner_shares_of_the_money():
    assert $share_of(bank(), "$owner_c") == $share_c
    assert $share_of(bank(), "nobody") == 0.0
    assert $share_of([], "$owner_a") == 0.0
""",
            visible="""
def test_share_of_the_largest_owner():
    assert $share_of(bank(), "$owner_a") == $share_a
""",
            bugs=(Bug("account.owner == owner", "account.owner != owner", "wrong comparison"),),
        ),
        Unit(
            "shares",
            ("statements",),
            '''
def $shares(cents, owners):
    """``{owner: share}`` splitting ``cents`` evenly between ``owners``, earlier owners taking the
    larger shares."""
    return dict(zip(owners, $split_evenly(cents, len(owners))))
''',
            tests="""
def test_a_bill_shared_by_three():
    assert $shares($bill, ["$owner_a", "$owner_b", "$owner_c"]) == $bill_shares
    assert $shares(0, ["$owner_a"]) == {"$owner_a": 0}
""",
            visible="""
def test_a_bill_shared_by_two():
    assert $shares(1001, ["$owner_a", "$owner_b"]) == {"$owner_a": 501, "$owner_b": 500}
""",
        ),
    ),
    misuses=(
        Misuse(
            caller="projected_balance",
            helper="interest",
            wrong=("PROMO_RATE_PERCENT * 100, days", "PROMO_RATE_PERCENT, days"),
            decoy=("// (10_000 * 365)", "// (100 * 365)"),
            contract="the rate is in basis points; the caller passes a percentage",
        ),
        Misuse(
            caller="shares",
            helper="split_evenly",
            wrong=("$split_evenly(cents, len(owners))", "$split_evenly(len(owners), cents)"),
            decoy=("def $split_evenly(cents, parts):", "def $split_evenly(parts, cents):"),
            contract="the amount comes first, then the number of parts; the caller swaps them",
        ),
    ),
)
