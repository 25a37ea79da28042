"""Every move of the block-state diagram (docs/design.md, "Block states"; Note [Block states] in
csrc/core/pin_block.h), walked by test/scenarios/block_states.py: at each step the block's
state, and what a user relies on - the bytes a replay or an eager copy delivers, the bytes held
and in use (torch_npu_pinpool.host_memory_stats()), pool_stats(). The same walk with the plugin off
(TORCH_NPU_PINPOOL=0) delivers the same bytes."""

from __future__ import annotations

from ._snippets import ON_OFF, env_for, pair

# (step, state) in walk order: every state, every move of the diagram.
EXPECTED = [
    ("pool: pinned in capture", "in_use"),  # free -> in_use (a new block)
    ("pool: captured copy", "graph_used"),  # in_use -> graph_used
    ("pool: tensor freed", "graph_owned"),  # graph_used -> graph_owned
    ("pool: replayed", "graph_owned"),
    ("pool: graph gone", "free"),  # graph_owned -> free (its pool's free list)
    ("pool: next capture pins", "in_use"),  # free -> in_use (the same block)
    ("pool: next graph replayed", "graph_used"),
    ("default: pinned", "in_use"),
    ("default: captured copy", "graph_used"),
    ("default: tensor freed after an eager copy", "awaiting_copies"),  # graph_used -> awaiting
    ("default: eager copy ran", "graph_owned"),  # awaiting_copies -> graph_owned
    ("default: replayed", "graph_owned"),
    ("default: graph gone", "free"),  # graph_owned -> free (ATen's free path)
    ("eager: captured copy", "graph_used"),
    ("eager: graph gone, tensor alive", "in_use"),  # graph_used -> in_use
    ("eager: tensor freed", "free"),  # in_use -> free (ATen's fast path)
    ("eager: pinned for a capture", "in_use"),
    ("eager: freed in a capture after an eager copy", "awaiting_copies"),  # in_use -> awaiting
    ("eager: eager copy ran", "free"),  # awaiting_copies -> free
    ("large: pinned", "in_use"),
    ("large: freed after an eager copy", "awaiting_copies"),  # in_use -> awaiting (large)
    ("large: eager copy ran", "free"),  # awaiting_copies -> free
]
# Without c10's pinned limits (torch < 2.13) a 40 MiB block is a default-pool one: ATen's path.
EXPECTED_ATEN_LARGE = {"large: freed after an eager copy": "free", "large: eager copy ran": "free"}


def _large_path() -> bool:
    return pair() >= (2, 13)


def _expected() -> list[tuple[str, str]]:
    if _large_path():
        return EXPECTED
    return [(step, EXPECTED_ATEN_LARGE.get(step, state)) for step, state in EXPECTED]


def _diagram_moves() -> set[tuple[str, str]]:
    """The moves docs/design.md's table under the block-state drawing lists."""
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "design.md")
    with open(path) as f:
        text = f.read()
    table = text[text.index("| from | to | when |") :].split("\n\n")[0]
    rows = [line.split("|")[1:3] for line in table.splitlines()[2:]]
    return {(a.strip(), b.strip()) for a, b in rows}


def _walked_moves(steps: list[dict]) -> set[tuple[str, str]]:
    """Moves one block made between two consecutive steps of one walk."""
    moves = set()
    for a, b in zip(steps, steps[1:]):
        same_walk = a["step"].split(":")[0] == b["step"].split(":")[0]
        if same_walk and a["ptr"] == b["ptr"] and a["state"] != b["state"]:
            moves.add((a["state"], b["state"]))
    return moves


def _walk(scenario, plugin: bool) -> tuple[dict[str, dict], int]:
    o = scenario("block_states", env=env_for(plugin)).result
    steps = {s["step"]: s for s in o["steps"]}
    assert list(steps) == [step for step, _ in EXPECTED]
    return steps, o["block"]


def test_the_walk_makes_exactly_the_diagrams_moves(scenario):
    """Every move docs/design.md's table lists is walked, and no other move happens."""
    o = scenario("block_states", env=env_for(True)).result
    assert _walked_moves(o["steps"]) == _diagram_moves()


def test_every_move_of_the_block_state_diagram(scenario):
    steps, block = _walk(scenario, True)
    assert [(name, s["state"]) for name, s in steps.items()] == _expected()
    assert steps["pool: next capture pins"]["same_block"], "the pool's free block is reused"
    # Bytes held and in use: a graph-owned block is held, not in use; its pool keeps it free.
    freed, used = steps["pool: tensor freed"], steps["pool: captured copy"]
    assert (freed["pool_held"], freed["pool_in_use"]) == (block, 0), freed
    assert (used["pool_held"], used["pool_in_use"]) == (block, block), used
    assert freed["in_use"] == used["in_use"] - block and freed["held"] == used["held"]
    gone = steps["pool: graph gone"]
    assert (gone["pool_held"], gone["pool_in_use"]) == (block, 0), gone
    nxt = steps["pool: next capture pins"]
    assert (nxt["pool_held"], nxt["pool_in_use"]) == (block, block), nxt
    # A default-pool block: held throughout, in use until it is free again. The first goes back
    # through ATen's free path after its copy's event, after which torch 2.10 - 2.12's ATen
    # miscounts the in-use figure, plugin or not (test_host_memory_stats_in_use_bytes_return).
    pinned, free = steps["default: pinned"], steps["default: graph gone"]
    alive, freed = steps["eager: graph gone, tensor alive"], steps["eager: tensor freed"]
    assert free["held"] == pinned["held"] and freed["held"] == alive["held"]
    if not (2, 10) <= pair() <= (2, 12):
        assert free["in_use"] == pinned["in_use"] - block
        assert freed["in_use"] == alive["in_use"] - block


@ON_OFF
def test_the_walk_delivers_every_byte(scenario, plugin):
    """Replays and eager copies read the bytes the tensor held, plugin on and off; but for the
    block freed inside its capture, which torch_npu 2.8 - 2.10 alone may hand to the next
    pin_memory() (7.0) while the graph still replays it."""
    steps, _ = _walk(scenario, plugin)
    recycled = [[1.0], [7.0]] if not plugin and pair() < (2, 11) else [[1.0]]
    assert steps["pool: replayed"]["delivered"] in recycled
    assert steps["pool: next graph replayed"]["delivered"] == [3.0]
    assert steps["default: eager copy ran"]["delivered_eager"] == [2.0]
    assert steps["default: replayed"]["delivered"] == [2.0]
    assert steps["eager: graph gone, tensor alive"]["delivered"] == [4.0]
    assert steps["eager: eager copy ran"]["delivered_eager"] == [5.0]
    assert steps["large: eager copy ran"]["delivered_eager"] == [6]
    if not plugin:
        assert {s["state"] for s in steps.values()} == {None}
