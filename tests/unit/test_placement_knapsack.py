"""The knapsack of the placement study against brute force on random instances."""

from __future__ import annotations

import math
import random

import pytest

from tailscope.studies.placement.knapsack import Item, brute_force, solve


def _instance(rng: random.Random) -> tuple[list[Item], int]:
    n = rng.randint(0, 11)
    # Values in eighths: every sum is exact in binary floating point, so ties are real ties.
    items = [Item(f"s{i}", rng.randint(0, 40), rng.randint(-8, 80) / 8) for i in range(n)]
    return items, rng.randint(0, 120)


@pytest.mark.parametrize("seed", range(300))
def test_solve_matches_brute_force(seed: int) -> None:
    items, capacity = _instance(random.Random(seed))
    got, want = solve(items, capacity), brute_force(items, capacity)
    assert got.value == want.value
    assert got.weight <= capacity
    by_name = {it.name: it for it in items}
    assert math.isclose(sum(by_name[n].value for n in got.chosen), got.value, abs_tol=1e-9)
    assert sum(by_name[n].weight for n in got.chosen) == got.weight
    # Ties go to the lighter subset, as brute force breaks them.
    assert got.weight == want.weight


def test_textbook_instance() -> None:
    items = [Item("a", 10, 60), Item("b", 20, 100), Item("c", 30, 120)]
    assert solve(items, 50).chosen == ("b", "c")
    assert solve(items, 50).value == 220


def test_nothing_fits_or_nothing_is_worth_it() -> None:
    assert solve([Item("a", 5, 1.0)], 4).chosen == ()
    assert solve([Item("a", 1, 0.0), Item("b", 1, -2.0)], 10).chosen == ()
    assert solve([], 3).chosen == ()


@pytest.mark.parametrize(
    ("items", "capacity", "message"),
    [
        ([Item("a", -1, 1.0)], 3, "weight must be an integer"),
        ([Item("a", 1.5, 1.0)], 3, "weight must be an integer"),  # type: ignore[arg-type]
        ([Item("a", 1, float("nan"))], 3, "finite"),
        ([Item("a", 1, 1.0), Item("a", 2, 1.0)], 3, "appears twice"),
        ([Item("a", 1, 1.0)], -1, "capacity"),
        ([Item("a", 1, 1.0)], 10**9, "coarser weight unit"),
    ],
)
def test_bad_input_is_refused(items: list[Item], capacity: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        solve(items, capacity)
