import pytest

from medibench.registry import Registry, UnknownNameError


def test_lazy_entry_imports_on_first_use():
    reg = Registry("thing")
    reg.register("frac", "fractions:Fraction", help="a fraction")
    assert isinstance(reg._entries["frac"], str)  # not imported yet
    assert reg.create("frac", numerator=3, denominator=6) == 0.5
    assert reg.help("frac") == "a fraction"


def test_unknown_name_suggests_close_matches():
    reg = Registry("model")
    reg.register("classical", lambda: 1)
    reg.register("identity", lambda: 2)
    with pytest.raises(UnknownNameError, match="Did you mean: classical") as e:
        reg.get("clasical")
    assert "Known models: classical, identity" in str(e.value)


def test_decorator_and_duplicate():
    reg = Registry("x")

    @reg.register("a")
    def make_a():
        return "A"

    assert reg.create("a") == "A"
    assert reg.names() == ["a"] and "a" in reg
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a", make_a)
    with pytest.raises(ValueError, match="module:attr"):
        reg.register("b", "no_colon")
