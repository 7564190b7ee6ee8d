"""The shared cluster fixture is what the cluster tests assume: a worker node that sees none of
the driver's folders (the negative control for every "no shared filesystem" test)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_the_worker_node_sees_neither_the_drivers_output_nor_its_data(ray_cluster, tmp_path):
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from zoo.data.images import PROJECT_ROOT

    (tmp_path / "written-by-the-driver.txt").write_text("here")
    data = PROJECT_ROOT.parent / "shared" / "data"

    @ray.remote(num_cpus=1)
    def look(paths: list[str]) -> list[bool]:
        import os

        return [os.path.exists(p) for p in paths]

    ray.init(address=ray_cluster.address, logging_level="ERROR")
    try:
        nodes = {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}
        assert len(nodes) >= 2, nodes
        paths = [str(tmp_path / "written-by-the-driver.txt"), str(data / "mnist" / "mnist.npz")]
        seen = {node_id: ray.get(look.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
                                 .remote(paths)) for node_id in nodes}
    finally:
        ray.shutdown()
    head = ray_cluster.head_node_id()
    assert seen.pop(head) == [True, data.is_dir()]  # the driver's node sees the driver's files
    for node_id, visible in seen.items():
        assert visible == [False, False], f"node {node_id} sees the driver's folders: {visible}"
