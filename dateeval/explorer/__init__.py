"""What every explorer page shares, by concern: :mod:`~dateeval.explorer.state` (the store choice, the folders, the
sidebar's :class:`Selection`), :mod:`~dateeval.explorer.cache` (every store read, cached per store state by one
helper) and :mod:`~dateeval.explorer.widgets` (filters, pickers, tables, downloads).

Pages stay thin: they call :func:`load` or :func:`page_data`, ask the cache for what they show, passing the store
(``explorer.headline(store)``), and draw with ``dateeval.plots``. Everything a page calls is named here.
"""

from __future__ import annotations

from dateeval.explorer.cache import (
    bands,
    between,
    chance_bands,
    compare,
    estimates,
    fewshot_formats,
    flips,
    headline,
    item_descriptions,
    item_history,
    item_rows,
    item_table,
    paper_beside,
    prompt_on,
    reorder_chance,
    robust,
    statistics,
    store_metrics,
    summary,
    task_for,
    template_default_dates,
)
from dateeval.explorer.state import (
    DEMO_STORE,
    Selection,
    app_settings,
    check_offered,
    current_store,
    data_dir,
    results_store,
    templates_dir,
)
from dateeval.explorer.widgets import (
    about_demo,
    dataset_picker,
    date_picker,
    describe_item,
    downloads,
    filters,
    intro,
    load,
    page_data,
    picker,
    show_table,
)

__all__ = [
    "DEMO_STORE",
    "Selection",
    "about_demo",
    "app_settings",
    "bands",
    "between",
    "chance_bands",
    "check_offered",
    "compare",
    "current_store",
    "estimates",
    "data_dir",
    "dataset_picker",
    "date_picker",
    "describe_item",
    "downloads",
    "fewshot_formats",
    "filters",
    "flips",
    "headline",
    "intro",
    "item_descriptions",
    "item_history",
    "item_rows",
    "item_table",
    "load",
    "page_data",
    "paper_beside",
    "prompt_on",
    "picker",
    "reorder_chance",
    "results_store",
    "robust",
    "show_table",
    "statistics",
    "store_metrics",
    "summary",
    "task_for",
    "template_default_dates",
    "templates_dir",
]
