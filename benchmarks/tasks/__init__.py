"""Benchmark tasks behind one registry; importing the package registers the built-in tasks."""

from benchmarks.tasks.base import SPLITS, Task, TaskResult
from benchmarks.tasks.registry import create_task, get_task_class, list_tasks, register_task, task_config
# importing the modules registers the built-in tasks
from benchmarks.tasks import (  # noqa: F401 (registers the built-in tasks)
    continual_learning, generalization, inr_classification, inr_editing, token_dynamics)

__all__ = ["SPLITS", "Task", "TaskResult", "create_task", "get_task_class", "list_tasks", "register_task",
           "task_config"]
