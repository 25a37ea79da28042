"""A live pool keeps its free blocks for its next capture (Note [Pool lifetime]): host_empty_cache()
gives back only what no live pool owns, as ATen's private pools do."""

from __future__ import annotations

from ._snippets import ON_OFF, env_for, native_pools


@ON_OFF
def test_free_block_reused_by_next_capture_into_pool(scenario, plugin):
    """A block freed unused in g1's capture survives host_empty_cache() and is the block g2's
    capture into the same pool gets; both graphs replay their own bytes. Native >= 2.11 keeps
    it too; native <= 2.10 has no graph pools and gives it back."""
    o = scenario("pool_reuse_across_captures", env=env_for(plugin)).result
    if plugin or native_pools():
        assert o["d1"] == [1.0] and o["d2"] == [2.0]
        assert o["kept_by_empty_cache"], o["held_before_after"]
        assert o["reused"]
    else:
        assert not o["kept_by_empty_cache"], "native <= 2.10 gives the free block back"
