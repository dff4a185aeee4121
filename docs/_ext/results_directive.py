"""Sphinx side of :mod:`results_tables`: a ``results-table`` directive and a ``result`` role.

In a MyST page::

    ```{results-table} racing_errors
    :experiment: fig1_D10_pairwise
    :delta: 0.05
    ```

    The tree is {result}`gumbel_tree_timing:ratio_1e6_over_1e3_min:.2f` times slower.

The role's text is ``file:key.path[:format]`` (file without ``.json``, keys separated by dots).
"""

from __future__ import annotations

from typing import ClassVar

import results_tables
from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util.docutils import SphinxDirective, SphinxRole


def _row(cells):
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        entry += nodes.paragraph(text=str(cell))
        row += entry
    return row


def table_node(table):
    """A docutils table of a :class:`results_tables.Table`."""
    node = nodes.table(classes=["results-table"])
    if table.title:
        node += nodes.title(text=table.title)
    group = nodes.tgroup(cols=len(table.header))
    node += group
    group.extend(nodes.colspec(colwidth=1) for _ in table.header)
    group += nodes.thead("", _row(table.header))
    group += nodes.tbody("", *(_row(r) for r in table.rows))
    return node


class ResultsTable(SphinxDirective):
    """Render ``results_tables.TABLES[name](**options)``."""

    required_arguments = 1
    option_spec: ClassVar[dict] = {
        key: directives.unchanged for key in ("experiment", "delta", "section", "n")}

    def run(self):
        name = self.arguments[0]
        if name not in results_tables.TABLES:
            raise self.error(f"unknown results table {name!r}; "
                             f"known: {', '.join(sorted(results_tables.TABLES))}")
        for path in results_tables.RESULTS.glob("*.json"):
            self.env.note_dependency(str(path))
        table = results_tables.TABLES[name](**self.options)
        if not table.rows:
            return [nodes.paragraph(text=f"No results yet ({table.title}).")]
        return [table_node(table)]


class ResultValue(SphinxRole):
    """Inline value from a results file: ``file:key.path[:format]``."""

    def run(self):
        name, _, rest = self.text.partition(":")
        path, _, spec = rest.partition(":")
        self.env.note_dependency(str(results_tables.RESULTS / f"{name}.json"))
        return [nodes.Text(results_tables.value(name, path, spec))], []


def setup(app):
    app.add_directive("results-table", ResultsTable)
    app.add_role("result", ResultValue())
    return {"parallel_read_safe": True, "parallel_write_safe": True}
