"""List what a Hermes tree's start-up and approval code reads (inventory_test.go).

Arguments: the tree, then its files (relative). For every file it parses the
source with ast and prints one JSON object a line, {"file", "line", "kind",
"name"}:

  env     an environment variable read: os.environ.get / os.getenv /
          os.environ[...] / "X" in os.environ / Hermes' env helpers
          (_env_enabled, env_var_enabled, _env_bool, _env_int, ...); a name
          not written literally is "<dynamic>@<function>", an f-string's
          constant parts joined by "*";
  config  a config key read: cfg_get(config, "a", "b") and .get("k") chains
          on a config (a name holding "config"/"cfg", a call of a function
          named *config*, or a variable assigned from such a chain, whose
          prefix it keeps), dotted;
  import  a directory Python is imported from: sys.path.insert/append,
          importlib's spec_from_file_location, the plugin managers'
          _scan_directory and synthetic packages, as
          "<call>(<argument>)@<function>".
"""

import ast
import json
import sys

ENV_HELPERS = {"getenv", "_env_enabled", "env_var_enabled", "_env_bool", "_env_int", "_env_float", "_get_env",
               "_env_flag", "_env_str", "env_bool", "env_int", "env_float"}
IMPORT_CALLS = {"spec_from_file_location", "_scan_directory", "_register_synthetic_package", "_scan_directory_level"}


def is_environ(n):
    return (isinstance(n, ast.Attribute) and n.attr == "environ") or (isinstance(n, ast.Name) and n.id == "environ")


def literal(n):
    if isinstance(n, ast.Constant) and isinstance(n.value, str):
        return n.value
    if isinstance(n, ast.JoinedStr):
        return "*".join(v.value for v in n.values if isinstance(v, ast.Constant)) or None
    return None


def configish(name):
    low = name.lower()
    return "config" in low or "cfg" in low


class Reader(ast.NodeVisitor):
    def __init__(self, path):
        self.path, self.out, self.func, self.prefixes = path, [], "<module>", [{}]

    def add(self, kind, name, node):
        self.out.append({"file": self.path, "line": node.lineno, "kind": kind, "name": name})

    def visit_FunctionDef(self, node):
        saved = self.func
        self.func = node.name
        self.prefixes.append({})
        self.generic_visit(node)
        self.prefixes.pop()
        self.func = saved

    visit_AsyncFunctionDef = visit_FunctionDef

    # --- config chains -------------------------------------------------
    def chain(self, n):
        """The dotted config path n reads, or None when n is no config."""
        if isinstance(n, (ast.BoolOp, ast.IfExp)):  # (x.get("a") or {}), x.get("a") if ... else {}
            for v in ([n.body, n.orelse] if isinstance(n, ast.IfExp) else n.values):
                p = self.chain(v)
                if p is not None:
                    return p
            return None
        if isinstance(n, ast.Name):
            for scope in reversed(self.prefixes):
                if n.id in scope:
                    return scope[n.id]
            return "" if configish(n.id) else None
        if isinstance(n, ast.Attribute) and configish(n.attr):
            return ""
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and f.attr == "get" and n.args:
                base, key = self.chain(f.value), literal(n.args[0])
                if base is not None and key is not None:
                    return base + "." + key if base else key
                return None
            fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if fname == "cfg_get" and len(n.args) >= 2:
                base = self.chain(n.args[0])
                keys = [literal(a) for a in n.args[1:]]
                if base is not None and all(k is not None for k in keys):
                    return ".".join(([base] if base else []) + keys)
                return None
            if "config" in fname.lower() and not n.args:
                return ""
            return None
        if isinstance(n, ast.Subscript):
            base, key = self.chain(n.value), literal(n.slice)
            if base is not None and key is not None:
                return base + "." + key if base else key
        return None

    def visit_Assign(self, node):
        p = self.chain(node.value)
        if p:
            for tgt in node.targets:
                if isinstance(tgt, ast.Name):
                    self.prefixes[-1][tgt.id] = p
        self.generic_visit(node)

    def visit_Call(self, n):
        f = n.func
        a0 = n.args[0] if n.args else None
        name = literal(a0) if a0 is not None else None
        fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if isinstance(f, ast.Attribute) and f.attr in ("get", "pop", "setdefault") and is_environ(f.value):
            self.add("env", name or "<dynamic>@" + self.func, n)
        elif fname in ENV_HELPERS and a0 is not None:
            self.add("env", name or "<dynamic>@" + self.func, n)
        elif fname in IMPORT_CALLS or (fname in ("insert", "append") and isinstance(f, ast.Attribute)
                                       and ast.unparse(f.value) == "sys.path"):
            arg = n.args[-1] if fname in ("insert", "spec_from_file_location") and n.args else a0
            self.add("import", "%s(%s)@%s" % (fname, ast.unparse(arg) if arg is not None else "", self.func), n)
        elif (fname == "get" and n.args) or fname == "cfg_get":
            p = self.chain(n)
            if p:
                self.add("config", p, n)
        self.generic_visit(n)

    def visit_Subscript(self, n):
        if is_environ(n.value) and isinstance(n.ctx, ast.Load):
            self.add("env", literal(n.slice) or "<dynamic>@" + self.func, n)
        self.generic_visit(n)

    def visit_Compare(self, n):
        if any(is_environ(c) for c in n.comparators) and literal(n.left) is not None:
            self.add("env", literal(n.left), n)
        self.generic_visit(n)


def main():
    tree = sys.argv[1]
    for rel in sys.argv[2:]:
        try:
            with open(tree + "/" + rel, encoding="utf-8") as f:
                src = f.read()
        except FileNotFoundError:
            continue
        r = Reader(rel)
        r.visit(ast.parse(src, rel))
        for item in r.out:
            print(json.dumps(item, sort_keys=True))


if __name__ == "__main__":
    main()
