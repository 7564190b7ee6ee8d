"""The render check of a submission: an entry is accepted only if the board can show it.

"An entry that renders is the test". A submission that passes every schema check may still hold something
the views choke on. Examples are a task config its task's protocol description cannot read, or a value no
table cell can format. `render_problems(root, entry, record)` builds, in memory, what `nfnzoo leaderboard
render` would build for the new entry's task. That is the entry's board rows beside the accepted entries it
would share tables with (ranking, labels, sweeps, protocol lines). It also builds the task's Markdown page
and its HTML page. Any failure there is a rejection naming the error. So one accepted entry can never break
the rendering of the whole board. The plots draw only what these tables hold, through
`leaderboards.escape.plot_text`.
"""

from __future__ import annotations

from pathlib import Path

from leaderboards.board import board_of
from leaderboards.datasets import KnownDataset, load_datasets
from leaderboards.entries import Entry, load_entries


def render_problems(root: Path, entry: Entry, record: KnownDataset | None) -> list[str]:
    """Why the board could not show `entry` among its task's accepted entries ([] when it can)."""
    from leaderboards.renderer import task_markdown
    from leaderboards.site import task_page

    known = dict(load_datasets(root))
    if record is not None:
        known[record.dataset_hash] = record
    same_task = [other for _, other in load_entries(root) if other.results.task == entry.results.task]
    try:
        for board in board_of([*same_task, entry], known):
            task_markdown(board, [])
            task_page(board, [])
    except Exception as error:  # noqa: BLE001 (whatever breaks the views refuses the entry, in one line)
        reason = " ".join(str(error).split())[:300]
        return [f"the board cannot show this entry ({type(error).__name__}: {reason}); it would break "
                "`nfnzoo leaderboard render` for every entry"]
    return []
