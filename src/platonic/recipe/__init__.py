"""`platonic run`: one recipe file that says what to edit, how, and what to export (a product surface
above the experiment engine: it reads its setups' schema and runs on its fast path).

- `config`: the recipe's schema (`Recipe`, `EditConfig`, `ExportConfig`), `read_recipe` / `parse_recipe`;
- `run`: `run_recipe`, which measures, solves, applies, exports and evaluates into one run directory;
- `report`: that directory's tables.md.
"""

from .config import EditConfig, ExportConfig, Recipe, parse_recipe, read_recipe, recipe_json
from .report import render_recipe_tables
from .run import is_recipe_run, run_recipe

__all__ = ["EditConfig", "ExportConfig", "Recipe", "is_recipe_run", "parse_recipe", "read_recipe", "recipe_json",
           "render_recipe_tables", "run_recipe"]
