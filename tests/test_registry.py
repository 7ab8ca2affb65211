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


def test_populate_fills_once_and_a_failed_populate_leaves_nothing_half_filled():
    calls = []

    def populate(reg):
        calls.append(1)
        reg.register("first", lambda: 1)
        if len(calls) == 1:
            raise ImportError("the second entry's module is broken")
        reg.register("second", lambda: 2)

    reg = Registry("thing", populate=populate)
    reg.register("static", lambda: 0)
    with pytest.raises(ImportError, match="broken"):
        reg.names()
    assert reg._entries.keys() == {"static"}  # "first" did not stay behind
    assert reg.names() == ["first", "second", "static"]  # the next lookup fills it again
    assert reg.names() == ["first", "second", "static"] and len(calls) == 2


def test_import_object_names_what_is_missing():
    from medibench.registry import import_object

    assert import_object("os.path:join") is __import__("os").path.join
    with pytest.raises(AttributeError, match="os.path:nope"):
        import_object("os.path:nope")
    with pytest.raises(ValueError, match="module:attr"):
        import_object("os.path")


def test_lookups_on_other_threads_wait_for_the_first_fill():
    import threading
    import time

    def populate(reg):
        for i in range(5):
            time.sleep(0.01)  # long enough for the other threads to look up meanwhile
            reg.register(f"p{i}", dict)

    reg = Registry("thing", populate=populate)
    seen: list[int] = []
    threads = [threading.Thread(target=lambda: seen.append(len(reg.names()))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == [5] * 8
