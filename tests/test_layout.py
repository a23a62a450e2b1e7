"""The package layout stays readable: small modules, imports that point one way.

The import graph is read from the source (ast), counting every import — at the top,
inside functions and under `if TYPE_CHECKING:` — because a cycle hidden from the
interpreter is still a cycle for the reader.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 400
#: A function longer than this is split into named steps (issue 23): one screen, one job.
MAX_FUNCTION_LINES = 60
# Known offenders, to be split by their owners (none now: approvals↔promotion and the long
# evolution_repository were fixed); listed by name so that nothing new can join them unseen.
KNOWN_CYCLES: list[list[str]] = []
KNOWN_LONG: set[str] = set()

#: The packages (and top-level modules) of src by layer, lowest first (issue 23). A module
#: imports its own layer and the ones below it, never one above: what a layer needs from
#: a higher one is passed in (the database settings to `db`, the loop's settings to the
#: loop) or lives with its reader (the Dirichlet factors, recall outcomes and tuned gate
#: values that consolidation writes are recall's and the gates'). Every package under src
#: is in exactly one layer, so a new one has to be placed here.
LAYERS: list[tuple[str, frozenset[str]]] = [
    # what everything stands on: text and vectors, errors, the database, the model providers
    ("foundation", frozenset({"text", "vectors", "tokens", "errors", "terminal", "line_editor", "db", "providers"})),
    # the memory mechanisms: weights, recall, the gates, context assembly, seeding and milestones
    ("memory", frozenset({"weights", "recall", "gates", "context", "bootstrap"})),
    # processes that run on the memory: consolidation, DMN, gut, metacognition, skills,
    # outcomes, the tools the model calls, the guardian's erasure
    ("processes", frozenset({"consolidation", "dmn", "gut", "metacognition", "skills", "outcomes",
                             "tools", "erasure"})),
    ("loop", frozenset({"loop"})),
    # the wiring: settings composed, the process and its entry points, the guardian's slash
    # commands, the web view, the CLI
    ("wiring", frozenset({"config", "config_reference", "logging_setup", "cli_runner", "repl", "mind", "main",
                          "commands", "web", "memory", "api", "detached", "health", "mcp"})),
]
#: Imports allowed to run upward, as (importer, imported), each with its reason. An entry
#: that no longer matches an import fails the test, so the list only shrinks.
UPWARD_EXEMPT: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """module -> the src modules it imports (absolute imports; the project uses no others)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                assert node.level == 0, f"{module}: relative import of {node.module}"
                targets = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                found = _resolve(target, modules)
                if found is not None and found != module:
                    graph[module].add(found)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycles_among_src_modules():
    assert sorted(cycles(import_graph())) == KNOWN_CYCLES


def test_no_module_over_the_size_limit():
    too_long = {name: n for name, path in _modules().items()
                if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert set(too_long) == KNOWN_LONG, f"split these modules (one concept each, ~400 lines): {too_long}"


def long_functions(source: str, max_lines: int = MAX_FUNCTION_LINES) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function or method in `source` longer than `max_lines`,
    counted from its `def` to its last line (decorators not counted; nested functions count
    in their parent and on their own)."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = child.end_lineno - child.lineno + 1
                if lines > max_lines:
                    found.append((prefix + child.name, lines))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def test_the_function_length_check_finds_a_long_method():
    body = "\n".join(f"        x{i} = {i}" for i in range(60))
    source = f"class A:\n    @property\n    def short(self):\n        return 1\n\n    async def long(self):\n{body}\n"
    assert long_functions(source) == [("A.long", 61)]


def test_no_function_over_the_length_limit():
    too_long = [f"{name}.{function} ({n} lines)" for name, path in _modules().items()
                for function, n in long_functions(path.read_text(encoding="utf-8"))]
    assert too_long == [], f"split these into named steps (at most {MAX_FUNCTION_LINES} lines each): {too_long}"


#: A signature a reader can hold (issue 36): what travels together is one typed value.
MAX_PARAMETERS = 8


def wide_signatures(source: str, max_params: int = MAX_PARAMETERS) -> list[tuple[str, int]]:
    """(function, parameter count) of each function taking more than `max_params`
    parameters, `self`/`cls` not counted (a settings model's fields are no function)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs) if x.arg not in ("self", "cls")]
            count = len(names) + (a.vararg is not None) + (a.kwarg is not None)
            if count > max_params:
                found.append((node.name, count))
    return found


def test_the_signature_check_counts_every_kind_of_parameter():
    source = "class A:\n    def f(self, a, b, /, c, *d, e, f, g, h, **i):\n        pass\n"
    assert wide_signatures(source) == [("f", 9)] and wide_signatures(source, 9) == []


def test_no_function_takes_more_than_eight_parameters():
    wide = [f"{name}.{function} ({n})" for name, path in _modules().items()
            for function, n in wide_signatures(path.read_text(encoding="utf-8"))]
    assert wide == [], f"group what travels together into a typed value (at most {MAX_PARAMETERS}): {wide}"


def layer_of(module: str) -> int:
    """Index in LAYERS of a src module. A package's `__main__` is a program (`python -m
    src.consolidation`): it loads the settings and runs, so it belongs to the wiring."""
    if module.endswith(".__main__"):
        return len(LAYERS) - 1
    top = module.split(".")[1]
    found = [i for i, (_, members) in enumerate(LAYERS) if top in members]
    assert len(found) == 1, f"{module}: its package {top!r} must be in exactly one layer of LAYERS"
    return found[0]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a higher layer than the importer's own."""
    return sorted(f"{m} ({LAYERS[layer_of(m)][0]}) -> {d} ({LAYERS[layer_of(d)][0]})"
                  for m, deps in graph.items() if m != "src"
                  for d in deps if d != "src" and layer_of(d) > layer_of(m) and (m, d) not in UPWARD_EXEMPT)


def test_the_layer_check_finds_an_upward_import():
    graph = {"src.recall.retrieval": {"src.consolidation.evolution.x", "src.db.sql"},
             "src.consolidation.__main__": {"src.config"}, "src.config": {"src.recall.settings"}}
    assert upward_imports(graph) == ["src.recall.retrieval (memory) -> src.consolidation.evolution.x (processes)"]


def test_every_package_is_in_one_layer():
    tops = {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"}
    tops |= {p.name for p in SRC.iterdir() if (p / "__init__.py").exists()}
    placed = [name for _, members in LAYERS for name in members]
    assert sorted(placed) == sorted(set(placed)), "a package is in two layers"
    assert sorted(tops - set(placed)) == [] and sorted(set(placed) - tops) == []


def test_imports_never_run_up_a_layer():
    """Module-level, function-level and TYPE_CHECKING imports alike (see import_graph)."""
    graph = import_graph()
    assert upward_imports(graph) == []
    assert sorted((m, d) for m, d in UPWARD_EXEMPT if d not in graph.get(m, ())) == [], "stale exemption"


#: What config may import beside the settings models: the errors it raises, and the generator
#: of `python -m src.config reference` (it reads the models through pydantic, nothing else).
CONFIG_MAY_IMPORT = {"src.errors", "src.config_reference"}


def test_config_imports_only_settings_and_features_never_import_the_wiring():
    graph = import_graph()
    reach, todo = set(), ["src.config"]
    while todo:
        for dep in graph[todo.pop()] - reach:
            reach.add(dep)
            todo.append(dep)
    feature_code = sorted(m for m in reach if not m.rpartition(".")[2].endswith("settings")
                          and m not in CONFIG_MAY_IMPORT and not (SRC.parent / m.replace(".", "/")).is_dir())
    assert feature_code == []
    wiring = {"src.main", "src.mind"}
    importers = sorted(m for m, deps in graph.items() if deps & wiring and m not in wiring)
    assert importers == []


def test_every_path_the_docs_name_exists():
    """README and docs/architecture.md are the newcomer's map (issue 10): a file they name
    that was moved or removed would send the reader nowhere."""
    root = Path(__file__).resolve().parent.parent
    missing = []
    for doc in ("README.md", "docs/architecture.md"):
        base = None
        for line in (root / doc).read_text(encoding="utf-8").splitlines():
            for name in re.findall(r"`((?:src|sql|bench|tests|docs)/[\w./-]*|[\w-]+\.(?:py|sql))`", line):
                if "/" in name:
                    base = name.rsplit("/", 1)[0] if "." in name.rsplit("/", 1)[-1] else name.rstrip("/")
                    path = name
                elif base is None:
                    continue
                else:              # `merge.py` after `src/consolidation/deep/deep_pass.py` on the same line
                    path = f"{base}/{name}"
                module = path.rpartition(".")[0]          # `src/weights/apply.apply_weight_changes`
                placeholder = "NNN" in path                 # `sql/NNN_name.sql`
                if not (placeholder or (root / path.rstrip("/")).exists() or (root / f"{module}.py").exists()):
                    missing.append(f"{doc}: {path}")
            base = None
    assert missing == []


def test_the_readme_map_names_every_package():
    """README's package map (its list of `src/…/` packages, subpackages nested) names every package
    under src, so a newcomer finds each one there (issue 23)."""
    root = Path(__file__).resolve().parent.parent
    named = {name.rstrip("/") for line in (root / "README.md").read_text(encoding="utf-8").splitlines()
             if re.match(r"\s*- `src/", line) for name in re.findall(r"`(src/[\w/]+/)`", line)}
    packages = {str(p.parent.relative_to(root)) for p in SRC.rglob("__init__.py")} - {"src"}
    assert sorted(packages - named) == []


def test_no_part_is_wired_after_it_is_built():
    """Issue 36: every part gets what it needs in its constructor. The wiring (mind.py, main.py,
    the commands main.py builds) assigns no attribute of another object: `retriever.emotional = …`
    or `loop.on_answered = …` after construction is work no signature shows."""
    found = []
    wiring = ["mind.py", "main.py", *(p.relative_to(SRC).as_posix() for p in sorted((SRC / "commands").glob("*.py")))]
    for name in wiring:
        tree = ast.parse((SRC / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])
            for target in targets:
                if isinstance(target, ast.Attribute) and not (
                        isinstance(target.value, ast.Name) and target.value.id == "self"):
                    found.append(f"src/{name}:{node.lineno}: {ast.unparse(target)}")
    assert found == []


#: Modules run as `python -m`, whose `__name__` is then "__main__": they name themselves.
SELF_NAMED_LOGGERS = {"src/main.py": "src.main"}


def test_each_module_logs_under_its_own_name():
    """One logger per module, named by its module: a line in data/moltbot.log says where it
    was written (four loop steps once logged as the loop itself)."""
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).as_posix()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and ast.unparse(node.value.func) == "logging.getLogger"):
                continue
            arg = ast.unparse(node.value.args[0]) if node.value.args else ""
            expected = repr(SELF_NAMED_LOGGERS[rel]) if rel in SELF_NAMED_LOGGERS else "__name__"
            if arg.replace('"', "'") != expected.replace('"', "'"):
                wrong.append(f"{rel}: logging.getLogger({arg})")
    assert wrong == []


def test_the_process_module_holds_no_sql():
    """main.py keeps the process; its statements live with the tables they read (issue 36)."""
    text = (SRC / "main.py").read_text(encoding="utf-8")
    assert re.search(r"\b(SELECT|INSERT|UPDATE|DELETE)\b", text) is None
    assert ".fetch" not in text and ".execute(" not in text


def _registered_commands() -> set[str]:
    """The name of every `….add("name", …)` call under src/commands."""
    found = set()
    for path in sorted((SRC / "commands").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                found.add(node.args[0].value)
    return found


def test_the_process_module_implements_no_command():
    """main.py keeps the process; the guardian's slash commands live in src/commands, and only
    main.py builds them: it registers none itself, has no function named after one (`_status`,
    `_memory_mode`), and no other module imports the package."""
    commands = _registered_commands()
    assert {"help", "quit", "status", "memory", "approve", "skill"} <= commands
    tree = ast.parse((SRC / "main.py").read_text(encoding="utf-8"))
    adds = [f"src/main.py:{node.lineno}: {ast.unparse(node.func)}" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add"]
    assert adds == []
    functions = {node.name.strip("_") for node in ast.walk(tree)
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
    assert sorted(functions & {name.replace("-", "_") for name in commands}) == []
    importers = sorted(m for m, deps in import_graph().items()
                       if any(d == "src.commands" or d.startswith("src.commands.") for d in deps)
                       and m != "src.commands" and not m.startswith("src.commands."))
    assert importers == ["src.main"]


def test_no_two_classes_share_a_name():
    """Names that explain themselves (issue 36): a class name says which one it is; two
    `Turn`s or two `Candidate`s make a reader open both files to know which is meant.
    (A module's private helper, `_Section`, may repeat.)"""
    where: dict[str, list[str]] = {}
    for name, path in _modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(name)
    assert {n: ms for n, ms in where.items() if len(ms) > 1} == {}
