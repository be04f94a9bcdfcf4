"""Issue 30, attack 7: a plugin without an instance never takes a tool name or group away
from an installed plugin (``plugins.tools.served_specs(..., installed)``).  A hypothesis
property over plugins, installed subsets and load orders; the end-to-end route (the real
registry, ``webfetch plugin install``, the tool registry's offer) is
``tests/plugins/test_plugin_dirs_pyc_and_pin_memo_routes.py::test_a_tool_of_a_plugin_never_installed_takes_an_installed_plugins_tool_away``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from django_webfetch.plugins.tools import served_specs, tool_group
from tests.plugins.packages import assert_one_owner
from tests.plugins.test_owned_tool_names_and_groups import _manifest, _plugins


def _served(kept):
    return [(m.name, s.name, tool_group(m, s)) for m, s in kept]


def test_an_uninstalled_plugins_tool_of_an_installed_ones_name_is_not_served_nor_contested():
    victim = _manifest("victim", [("victim_run", "")])
    squat = _manifest("squat", [("victim_run", "")])
    for order in ([victim, squat], [squat, victim]):
        kept, contests = served_specs(order, {"victim"})
        assert _served(kept) == [("victim", "victim_run", "victim")]
        assert contests == []
        kept, contests = served_specs(order, {"victim", "squat"})
        assert kept == []
        assert [(c.name, c.plugins, c.reason) for c in contests] == [
            ("victim_run", ("squat", "victim"), "tool_name_claimed_twice")
        ]
    # Neither installed: served by neither (nothing of either is offered anyway).
    kept, contests = served_specs([victim, squat], set())
    assert kept == [] and len(contests) == 1


@settings(max_examples=300, deadline=None)
@given(plugins=_plugins(), data=st.data())
def test_plugins_without_an_instance_change_nothing_an_installed_plugin_is_served(plugins, data):
    """Property: whatever plugins load, whichever are installed, in whatever order, an
    installed plugin is served exactly what it would be were the others not there at all;
    no name or group is served for two plugins; the order changes nothing; a contest is
    reported only among installed plugins, or among plugins none of which is installed."""
    names = [m.name for m in plugins]
    installed = set(data.draw(st.lists(st.sampled_from(names), unique=True)) if names else [])
    kept, contests = served_specs(plugins, installed)
    again, contests_again = served_specs(data.draw(st.permutations(plugins)), installed)
    served = _served(kept)
    assert served == _served(again) and contests == contests_again
    alone, alone_contests = served_specs([m for m in plugins if m.name in installed])
    assert [s for s in served if s[0] in installed] == _served(alone)
    assert [c for c in contests if set(c.plugins) & installed] == alone_contests
    assert_one_owner(served)
